"""The file thread store (``--threads file:///DIR``): a folder the processes of one machine
share (``serve --workers``), every file operation in a worker thread.

``DIR/threads/<owner>/<thread>``: a thread (names are digests), its summary on the first line
and its document after it, replaced whole (a temporary file, then ``os.replace``, which a
reader never sees half done); it expires ``ttl`` seconds after its modification time.
``DIR/threads/<owner>/.forgotten-<thread>``: the thread's generation, made new by each forget,
kept ``run_alive``: the save of a run begun before a forget comes to nothing.
``DIR/runs``, ``DIR/cancels``, ``DIR/wants``: the runs' files (``bridge.serve.threads.file_runs``).

What has expired reads as gone at once; its files go at the next sweep, at most once a minute.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from bridge.serve.threads.budget import THREAD_OVERHEAD
from bridge.serve.threads.file_runs import RunFiles
from bridge.serve.threads.folders import (
    SINCE,
    entries,
    fit,
    made_owner_folder,
    remove_if_older,
    thread_names,
)
from bridge.serve.threads.records import (
    RUN_ALIVE,
    digest,
    summary_from_json,
    summary_json,
)
from bridge.serve.threads.store import Batch, RunInfo, RunKey, ThreadStoreError, ThreadSummary

logger = logging.getLogger("agui_bridge")

T = TypeVar("T")

#: How often the store removes what has expired (seconds).
SWEEP_EVERY = 60.0
#: How often ``run_events`` looks at a run's file while it waits for a batch (seconds).
POLL_EVERY = 0.05
#: A temporary file older than this (seconds) was left by a process that died while saving.
_LEFT_OVER = 3600.0
#: What begins the name of a thread's generation in its owner's folder.
_FORGOTTEN = ".forgotten-"


class FileThreads:
    """Threads and runs' events as files in a folder (module docstring)."""

    shared = True

    def __init__(
        self,
        folder: Path,
        *,
        ttl: float,
        max_threads: int = 1000,
        max_bytes: int = 1 << 62,
        run_alive: float = RUN_ALIVE,
    ) -> None:
        self.folder = folder
        self.shown = f"file://{folder}"
        self._ttl = ttl
        self._run_alive = run_alive
        self._max_threads = max_threads
        self._max_bytes = max_bytes
        self._swept = 0.0
        self._runs = RunFiles(folder, run_alive)

    async def _run(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in a worker thread, after a sweep if one is due."""

        def swept_then_work() -> T:
            self._sweep_if_due()
            return work(*args)

        try:
            return await anyio.to_thread.run_sync(swept_then_work)
        except OSError as exc:
            raise ThreadStoreError(
                f"the thread store {self.shown} failed: {exc.strerror or exc}"
            ) from exc
        except (ValueError, KeyError) as exc:  # a file in it that is none of ours
            raise ThreadStoreError(
                f"the thread store {self.shown} holds a file it cannot read ({type(exc).__name__})"
            ) from exc

    # --- threads ------------------------------------------------------------------------------

    def _owner_folder(self, owner: str) -> Path:
        return self.folder / "threads" / digest(owner)

    def _alive(self, modified: float, now: float) -> bool:
        return modified + self._ttl > now

    async def load(self, owner: str, thread_id: str) -> bytes | None:
        return await self._run(self._load, self._owner_folder(owner) / digest(thread_id), thread_id)

    def _load(self, path: Path, thread_id: str) -> bytes | None:
        try:
            with path.open("rb") as file:
                if not self._alive(os.fstat(file.fileno()).st_mtime, time.time()):
                    return None
                header = file.readline()
                document = file.read()
        except FileNotFoundError:
            return None
        return document if summary_from_json(header).id == thread_id else None

    async def save(
        self,
        owner: str,
        thread_id: str,
        document: bytes,
        summary: ThreadSummary,
        *,
        generation: str | None = None,
    ) -> bool:
        return await self._run(
            self._save, self._owner_folder(owner), digest(thread_id), document, summary, generation
        )

    def _generation(self, folder: Path, name: str) -> str:
        try:
            return (folder / f"{_FORGOTTEN}{name}").read_text("ascii")
        except FileNotFoundError:
            return "0"

    def _save(
        self,
        folder: Path,
        name: str,
        document: bytes,
        summary: ThreadSummary,
        generation: str | None = None,
    ) -> bool:
        """Keep the thread, unless it was forgotten since ``generation``. A forget changes the
        generation and then removes the thread; this looks at the generation before its
        replace and after it, and takes back what it wrote when the forget came between."""
        if generation is not None and self._generation(folder, name) != generation:
            return False
        if len(document) + THREAD_OVERHEAD > self._max_bytes:
            logger.info("the thread store %s: a thread over its budget alone; not kept", self.shown)
            with suppress(FileNotFoundError):
                os.unlink(folder / name)  # what it was before goes: it is not the thread
            return True
        for attempt in range(2):
            made_owner_folder(folder)
            try:
                handle, temporary = tempfile.mkstemp(dir=folder, prefix=".saving-")
                break
            except FileNotFoundError:  # a sweep took the owner's empty folder just now
                if attempt:
                    raise
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(summary_json(summary) + b"\n")
                file.write(document)
                # The save's time to the nanosecond (a file's own times move by the kernel's
                # tick): the order of saves, for the list and the bound.
                file.flush()
                saved = time.time_ns()
                os.utime(file.fileno(), ns=(saved, saved))
            written = os.stat(temporary).st_ino
            os.replace(temporary, folder / name)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        if generation is not None and self._generation(folder, name) != generation:
            with suppress(FileNotFoundError):
                if os.stat(folder / name).st_ino == written:  # ours, not a later run's
                    os.unlink(folder / name)
            return False
        self._bound(folder)
        if folder / name in fit(self.folder, self._max_bytes):
            logger.info(
                "the thread store %s is full (--thread-store-bytes): a thread of its "
                "newest owner is not kept",
                self.shown,
            )
        return True

    def _bound(self, folder: Path) -> None:
        """Forget the owner's least recently saved threads beyond ``max_threads``."""
        names = thread_names(folder)
        if len(names) <= self._max_threads:
            return
        saved: list[tuple[int, str]] = []
        for name in names:
            with suppress(FileNotFoundError):
                saved.append((os.stat(folder / name).st_mtime_ns, name))
        saved.sort()
        for _, name in saved[: len(saved) - self._max_threads]:
            with suppress(FileNotFoundError):
                os.unlink(folder / name)

    async def threads(self, owner: str) -> list[ThreadSummary]:
        return await self._run(self._threads, self._owner_folder(owner))

    def _threads(self, folder: Path) -> list[ThreadSummary]:
        now, found = time.time(), list[tuple[int, ThreadSummary]]()
        for name in thread_names(folder):
            try:
                with (folder / name).open("rb") as file:
                    modified = os.fstat(file.fileno()).st_mtime_ns
                    if self._alive(modified / 1e9, now):
                        found.append((modified, summary_from_json(file.readline())))
            except FileNotFoundError:  # forgotten or swept since the folder was listed
                continue
            except ValueError as exc:  # none of ours: it is left out, and said
                logger.warning("the thread store %s: %s is not a thread: %s", self.shown, name, exc)
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [summary for _, summary in found]

    async def forget(self, owner: str, thread_id: str) -> ThreadSummary | None:
        return await self._run(self._forget, self._owner_folder(owner), digest(thread_id))

    def _forget(self, folder: Path, name: str) -> ThreadSummary | None:
        # The generation first: a save that looks after it finds it changed, and one that
        # looked before has replaced the file by the time it looks again (``_save``). Only for
        # a thread kept: a flood of deletes of made-up ids writes nothing.
        if not (folder / name).is_file():
            return None
        try:
            handle, temporary = tempfile.mkstemp(dir=folder, prefix=".saving-")
        except FileNotFoundError:  # a sweep took the owner's folder: nothing is kept there
            return None
        with os.fdopen(handle, "w", encoding="ascii") as file:
            file.write(secrets.token_hex(8))
        os.replace(temporary, folder / f"{_FORGOTTEN}{name}")
        path = folder / name
        try:
            with path.open("rb") as file:
                alive = self._alive(os.fstat(file.fileno()).st_mtime, time.time())
                header = file.readline()
            os.unlink(path)
        except FileNotFoundError:
            return None
        if not alive:
            return None
        try:
            return summary_from_json(header)
        except (ValueError, KeyError):  # none of ours: gone all the same
            return ThreadSummary("", "", 0.0)

    # --- runs (``file_runs``) -------------------------------------------------------------------

    async def run_begin(
        self,
        run: RunKey,
        thread_id: str,
        process: str = "",
        *,
        saving: tuple[bytes, ThreadSummary] | None = None,
    ) -> str:
        owner = run.owner
        whose = {"run": run.run_id, "owner": owner, "thread": thread_id, "process": process}
        folder, name = self._owner_folder(owner), digest(thread_id)
        generation = await self._run(
            self._begin, run, (json.dumps(whose) + "\n").encode(), folder, name
        )
        if saving is not None:
            await self.save(owner, thread_id, *saving, generation=generation)
        return generation

    def _begin(self, run: RunKey, head: bytes, folder: Path, name: str) -> str:
        self._runs.begin(run, head)
        generation = self._generation(folder, name)
        with suppress(FileNotFoundError):  # kept as long as the run may go on
            os.utime(folder / f"{_FORGOTTEN}{name}")
        return generation

    async def run_append(self, run: RunKey, batch: Batch, *, ended: bool = False) -> None:
        await self.run_append_many([(run, batch, ended)])

    async def run_append_many(self, batches: Sequence[tuple[RunKey, Batch, bool]]) -> None:
        def append_all() -> None:  # one worker thread for them all
            for run, batch, ended in batches:
                self._runs.append(run, batch, ended)

        await self._run(append_all)

    async def run_info(self, run: RunKey) -> RunInfo | None:
        return await self._run(self._runs.info, run)

    async def run_events(self, run: RunKey, after: int, wait: float) -> list[Batch]:
        """Read what the run's file holds after ``after``; while there is none and the run
        goes on, look again every ``POLL_EVERY`` seconds until ``wait`` is up."""
        deadline = anyio.current_time() + wait
        while True:
            batches, going = await self._run(self._runs.read, run, after)
            if batches or not going or anyio.current_time() + POLL_EVERY > deadline:
                return batches
            await anyio.sleep(POLL_EVERY)

    async def want(self, run: RunKey, process: str) -> None:
        await self._run(self._runs.want, run, process)

    async def wanted(self, process: str, runs: Sequence[RunKey]) -> list[RunKey]:
        if not runs:
            return []
        return await self._run(self._runs.wanted, process, list(runs))

    async def cancel(self, run: RunKey) -> None:
        await self._run(self._runs.cancel, run)

    async def cancelled(self, runs: Sequence[RunKey]) -> list[RunKey]:
        if not runs:
            return []
        return await self._run(self._runs.cancelled, list(runs))

    # --- housekeeping -------------------------------------------------------------------------

    def _sweep_if_due(self) -> None:
        now = time.time()
        if now - self._swept <= SWEEP_EVERY:
            return
        self._swept = now
        try:
            self._sweep(now)
        except OSError as exc:  # housekeeping: nothing asked of the store depends on it
            logger.warning("the thread store %s was not swept: %s", self.shown, exc)

    def _sweep(self, now: float) -> None:
        """Remove expired threads (and owners' folders left empty), then the runs' files
        (``RunFiles.sweep``)."""
        for owner in entries(self.folder / "threads"):
            if not owner.is_dir(follow_symlinks=False):
                continue  # none of ours: owners are folders
            for thread in entries(owner.path):
                if thread.name == SINCE:
                    continue
                kept = self._ttl
                if thread.name.startswith(_FORGOTTEN):
                    kept = self._run_alive
                elif thread.name.startswith("."):
                    kept = _LEFT_OVER
                remove_if_older(thread, now - kept)
            if not thread_names(Path(owner.path)):  # the owner is seen anew when it comes back
                with suppress(FileNotFoundError):
                    os.unlink(os.path.join(owner.path, SINCE))
            with suppress(OSError):  # not empty: a thread is left, or was saved just now
                os.rmdir(owner.path)
        self._runs.sweep(now)

    async def available(self) -> bool:
        return await anyio.to_thread.run_sync(
            lambda: self.folder.is_dir() and os.access(self.folder, os.W_OK | os.X_OK)
        )

    async def aclose(self) -> None:
        self._runs.clear()
