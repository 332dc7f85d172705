"""What the file thread store (``bridge.serve.threads.file_store``) does to the entries of its
folder, in its worker threads: list them, remove one gone stale, touch one, take the asks of a
process."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from bridge.serve.threads.store import RunKey


def touch(path: Path) -> None:
    """Make the file (its folders too), or make it new: a cancel (or a want) asked again is
    asked for longer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def taken_asks(folder: Path, runs: list[RunKey]) -> list[RunKey]:
    """The asks in ``folder`` for these runs, taken: one look at the folder (most often
    not there at all), whatever the number of runs."""
    asked = {entry.name for entry in entries(folder)}
    if not asked:
        return []
    taken = []
    for run in runs:
        if run.name in asked:
            with suppress(FileNotFoundError):
                os.unlink(folder / run.name)
            taken.append(run)
    return taken


def entries(folder: str | Path) -> list[os.DirEntry[str]]:
    """The folder's entries; none when it is not there."""
    try:
        with os.scandir(folder) as listed:
            return list(listed)
    except FileNotFoundError:
        return []


def thread_names(folder: Path) -> list[str]:
    """The names of an owner's threads (files; not a temporary one being saved)."""
    return [
        entry.name
        for entry in entries(folder)
        if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)
    ]


def remove_if_older(entry: os.DirEntry[str], than: float) -> bool:
    """Remove the file ``entry`` if it was last modified before ``than`` (a folder there is
    none of ours: it stays, and the sweep goes on)."""
    try:
        if not entry.is_file(follow_symlinks=False) or os.stat(entry.path).st_mtime >= than:
            return False
        os.unlink(entry.path)
    except FileNotFoundError:  # another process removed it first
        return False
    return True
