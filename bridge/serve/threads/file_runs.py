"""The runs' files of the file thread store (``bridge.serve.threads.file_store``), in its
worker threads: a run's appended events, the cancels asked and the followers' wants.

``DIR/runs/<run>.events`` (``<run>``: a digest of the run's owner and id, ``RunKey.name``,
never of a client's id alone): a run's events, appended by the process that runs it: a line of
JSON naming the run, its owner and its thread, then a line per batch (``[first, frames]``);
``<run>.ended`` beside it once the last batch is in, kept ``RUN_KEPT`` seconds.
``DIR/cancels/<run>``: a cancel asked, kept ``CANCEL_KEPT`` seconds.
``DIR/wants/<process>/<run>``: a follower's ask for a run's events as they come, taken (removed)
by the process that runs it; one left by a process that died goes after ``run_alive``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from contextlib import suppress
from pathlib import Path
from typing import BinaryIO

from bridge.serve.threads import store
from bridge.serve.threads.folders import entries, remove_if_older, taken_asks, touch
from bridge.serve.threads.records import CANCEL_KEPT, digest, frames_of
from bridge.serve.threads.store import Batch, RunInfo, RunKey

#: Runs whose read position is remembered (a follower's next read starts where the last ended).
_POSITIONS = 256


class RunFiles:
    """The runs' part of a file store's folder (module docstring); every method blocks."""

    def __init__(self, folder: Path, run_alive: float) -> None:
        self.folder = folder
        self._run_alive = run_alive
        # run → (offset of its next unread batch, the last frame number before it), for reads
        # in several worker threads at once
        self._positions: OrderedDict[RunKey, tuple[int, int]] = OrderedDict()
        self._positions_lock = threading.Lock()

    def _path(self, run: RunKey, suffix: str) -> Path:
        return self.folder / "runs" / f"{run.name}{suffix}"

    def begin(self, run: RunKey, head: bytes) -> None:
        """Start the run's events file afresh with its head (a line naming whose it is)."""
        (self.folder / "runs").mkdir(exist_ok=True)
        self._path(run, ".ended").unlink(missing_ok=True)
        with self._path(run, ".events").open("wb") as file:
            file.write(head)

    def append(self, run: RunKey, batch: Batch, ended: bool) -> None:
        line = (json.dumps([batch.first, list(batch.frames)]) + "\n").encode()
        # No O_CREAT: a run that was never begun here has no file to add to (an OSError).
        handle = os.open(self._path(run, ".events"), os.O_WRONLY | os.O_APPEND)
        with os.fdopen(handle, "wb") as file:
            if batch.frames:  # a reader takes whole lines only: the rest is read next time
                file.write(line)
        if ended:  # after the last line: whoever sees the marker finds every batch
            self._path(run, ".ended").touch()

    def info(self, run: RunKey) -> RunInfo | None:
        opened = self._open(run)
        if opened is None:
            return None
        file, head, ended = opened
        file.close()
        fields = json.loads(head)
        if fields.get("owner") != run.owner or fields.get("run") != run.run_id:
            return None  # the store's own record says whose it is
        return RunInfo(
            owner=fields["owner"],
            thread_id=fields["thread"],
            ended=ended,
            process=str(fields.get("process", "")),
        )

    def _open(self, run: RunKey) -> tuple[BinaryIO, bytes, bool] | None:
        """The run's events file, open past its head; the head; whether the run ended.
        ``None`` when the store keeps no events of it: never begun here (or being begun),
        ended ``RUN_KEPT`` ago, or silent ``run_alive`` since its last batch."""
        now = time.time()
        try:  # before the file is read: whoever sees the marker then finds every batch
            ended: float | None = self._path(run, ".ended").stat().st_mtime
        except FileNotFoundError:
            ended = None
        try:
            file = self._path(run, ".events").open("rb")
        except FileNotFoundError:
            return None
        head = file.readline()
        written = os.fstat(file.fileno()).st_mtime
        kept_until = written + self._run_alive if ended is None else ended + store.RUN_KEPT
        if kept_until <= now or not head.endswith(b"\n"):
            file.close()
            return None
        return file, head, ended is not None

    def read(self, run: RunKey, after: int) -> tuple[list[Batch], bool]:
        """The batches after ``after`` complete in the file, and whether the run goes on."""
        opened = self._open(run)
        if opened is None:
            return [], False
        file, head, ended = opened
        with file:
            with self._positions_lock:
                offset, last = self._positions.get(run, (0, 0))
            if offset == 0 or last > after or offset > os.fstat(file.fileno()).st_size:
                offset, last = len(head), 0  # from the first batch
            file.seek(offset)
            data = file.read()
        whole = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        batches = []
        for line in whole.splitlines():
            first, frames = json.loads(line)
            batch = Batch(int(first), frames_of(frames))
            last = max(last, batch.last)
            if batch.last > after:
                batches.append(batch)
        with self._positions_lock:
            self._positions[run] = (offset + len(whole), last)
            self._positions.move_to_end(run)
            while len(self._positions) > _POSITIONS:
                self._positions.popitem(last=False)
        return batches, not ended

    def _wants(self, process: str) -> Path:
        return self.folder / "wants" / digest(process)

    def want(self, run: RunKey, process: str) -> None:
        touch(self._wants(process) / run.name)

    def wanted(self, process: str, runs: list[RunKey]) -> list[RunKey]:
        return taken_asks(self._wants(process), runs)

    def cancel(self, run: RunKey) -> None:
        touch(self.folder / "cancels" / run.name)

    def cancelled(self, runs: list[RunKey]) -> list[RunKey]:
        now, asked = time.time(), []
        for run in runs:
            with suppress(FileNotFoundError):
                if (self.folder / "cancels" / run.name).stat().st_mtime + CANCEL_KEPT > now:
                    asked.append(run)
        return asked

    def sweep(self, now: float) -> None:
        """Remove runs kept ``RUN_KEPT`` past their end (or ``run_alive`` past their last
        batch), old cancels and wants."""
        for run in entries(self.folder / "runs"):
            suffix = run.name.rpartition(".")[2]
            if suffix == "ended" and remove_if_older(run, now - store.RUN_KEPT):
                with suppress(FileNotFoundError):
                    os.unlink(run.path[: -len("ended")] + "events")
            elif suffix == "events" and not os.path.exists(run.path[: -len("events")] + "ended"):
                remove_if_older(run, now - self._run_alive)
        for cancel in entries(self.folder / "cancels"):
            remove_if_older(cancel, now - CANCEL_KEPT)
        for process in entries(self.folder / "wants"):
            for ask in entries(process.path):
                remove_if_older(ask, now - self._run_alive)
            with suppress(OSError):  # not empty: the process is alive and asked of
                os.rmdir(process.path)

    def clear(self) -> None:
        self._positions.clear()
