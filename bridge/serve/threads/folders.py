"""What the file thread store (``bridge.serve.threads.file_store``) does to the entries of its
folder, in its worker threads: list them, remove one gone stale, touch one, take the asks of a
process, and hold the whole to its byte budget (``fit``)."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from bridge.serve.threads.budget import THREAD_OVERHEAD, giving_way
from bridge.serve.threads.store import RunKey

#: In an owner's folder: made with it, its time the owner's first thread's (``budget``).
SINCE = ".since"


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


def made_owner_folder(folder: Path) -> None:
    """The owner's folder, made if it is not there (with its ``SINCE``)."""
    folder.parent.mkdir(exist_ok=True)
    try:
        folder.mkdir()
    except FileExistsError:
        return
    with suppress(FileExistsError):
        os.close(os.open(folder / SINCE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def fit(folder: Path, max_bytes: int) -> list[Path]:
    """Hold the store in ``folder`` to ``max_bytes``: its threads (each with
    ``THREAD_OVERHEAD``) and its runs' events. Past it, ended runs' events go first, the
    oldest first (a client that comes back for one hydrates its thread), then threads as
    ``budget`` says. The threads it removed."""
    owners: dict[str, list[tuple[int, int, str]]] = {}  # owner → (saved, bytes, path), oldest first
    since: dict[str, float] = {}
    held: dict[str, int] = {}
    for owner in entries(folder / "threads"):
        if not owner.is_dir(follow_symlinks=False):
            continue
        threads = []
        for entry in entries(owner.path):
            if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                continue
            with suppress(FileNotFoundError):
                stat = entry.stat(follow_symlinks=False)
                threads.append((stat.st_mtime_ns, stat.st_size + THREAD_OVERHEAD, entry.path))
        if threads:
            threads.sort()
            owners[owner.name] = threads
            held[owner.name] = sum(size for _, size, _ in threads)
            try:
                since[owner.name] = os.stat(os.path.join(owner.path, SINCE)).st_mtime_ns
            except FileNotFoundError:  # made before owners were timed: the oldest
                since[owner.name] = 0
    ended: list[tuple[float, int, str]] = []
    total = sum(held.values())
    for run in entries(folder / "runs"):
        with suppress(FileNotFoundError):
            size = run.stat(follow_symlinks=False).st_size
            total += size
            if run.name.endswith(".events"):  # ended: its marker beside it (``file_runs``)
                marked = os.stat(run.path[: -len("events")] + "ended").st_mtime
                ended.append((marked, size, run.path))
    ended.sort()
    for _, size, path in ended:
        if total <= max_bytes:
            break
        with suppress(FileNotFoundError):
            os.unlink(path)
            os.unlink(path[: -len("events")] + "ended")
        total -= size
    removed = []
    while total > max_bytes:
        losing = giving_way((o, len(t), held[o], since[o]) for o, t in owners.items() if t)
        if losing is None:
            break
        _, size, path = owners[losing].pop(0)
        with suppress(FileNotFoundError):
            os.unlink(path)
        held[losing] -= size
        total -= size
        removed.append(Path(path))
    return removed
