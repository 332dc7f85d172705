"""``serve --workers``' scratch folder: what the parent makes for its workers to share (the store
of used approvals, prometheus-client's multiprocess files), gone once the bridge is, however it
ended.

A parent that is killed (SIGKILL, the OOM killer) runs no cleanup, so the folder is not the
parent's to remove alone: every process of the bridge, the parent and each worker, holds a
shared ``flock`` on the folder's ``lock`` file while it lives (the kernel lets go of it when a
process dies, however it dies), and whichever leaves and then finds nobody else holding it
removes the folder. Workers whose parent died drain and leave, so the last of them removes it.
Should every process be killed at once (``kill -9`` of the whole group), nothing is left to
remove it: the next ``serve --workers`` on the machine sweeps such folders (its user's, in the
same temporary directory, and only those no live process holds) before it makes its own.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

#: The name every scratch folder begins with, in the temporary directory (``$TMPDIR``).
PREFIX = "agui-bridge-workers-"
_LOCK = "lock"


class Scratch:
    """One process's hold on the scratch folder: ``leave()`` lets go, and removes the folder
    if no other process holds it."""

    def __init__(self, folder: str) -> None:
        """Hold ``folder`` (one ``Scratch.make()`` made) for as long as this process lives."""
        self.folder = folder
        lock = Path(folder, _LOCK).open("a+", encoding="ascii")  # noqa: SIM115 - until leave()
        fcntl.flock(lock, fcntl.LOCK_SH)
        self._lock: IO[str] | None = lock

    @classmethod
    def make(cls) -> Scratch:
        """A new scratch folder, held by this process (after sweeping what killed bridges
        left)."""
        sweep()
        made = cls(tempfile.mkdtemp(prefix=PREFIX))
        assert made._lock is not None
        # A lock file with something in it is a folder some bridge finished making: only
        # such a folder is swept (one caught between mkdtemp and its lock is being made).
        made._lock.write(f"{os.getpid()}\n")
        made._lock.flush()
        return made

    def leave(self) -> None:
        """Let go; the last process to let go removes the folder."""
        if self._lock is None:
            return
        lock, self._lock = self._lock, None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_UN)
            # Two processes that leave at once cannot both fail here: each lets go before it
            # tries, so the one that tries last finds the lock free.
            if _exclusive(lock):
                shutil.rmtree(self.folder, ignore_errors=True)


def sweep(directory: str | None = None) -> list[str]:
    """Remove the scratch folders in ``directory`` (the temporary one) that no live process
    holds: those of bridges killed whole. The folders removed."""
    removed = []
    for folder in Path(directory or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            lock = (folder / _LOCK).open(encoding="ascii")
        except OSError:  # not ours, gone meanwhile, or one whose lock is not there yet
            continue
        with lock:
            if _exclusive(lock) and lock.read().strip():
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(str(folder))
    return removed


def _exclusive(lock: IO[str]) -> bool:
    """Whether this process could take ``lock`` for itself alone (no other holds it)."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
