"""A thread store's byte budget across its owners (``--thread-store-bytes``; README "Threads"),
and who gives way when it is full.

Among the owners that hold more than one thread, the one holding the most bytes loses its least
recently saved thread; when every owner holds one thread, the owner seen most lately loses it
(most often the one saving now). So an owner's one thread outlives a flood of new owners, and
an owner that keeps much gives way before one that keeps little.
"""

from __future__ import annotations

from collections.abc import Iterable

#: The bytes a thread costs beyond its document (its summary, names, the store's own keeping):
#: many small threads fill a budget too.
THREAD_OVERHEAD = 512

#: What the choice reads of an owner: its name, how many threads it holds, their bytes, and
#: when it was first seen (any number that grows with time).
Holding = tuple[str, int, int, float]


def giving_way(holdings: Iterable[Holding]) -> str | None:
    """The owner whose least recently saved thread goes (module docstring); ``None`` when no
    owner holds a thread."""
    many: tuple[int, float, str] | None = None  # (bytes, since, owner) of the most
    newest: tuple[float, str] | None = None
    for owner, threads, size, since in holdings:
        if threads > 1:
            if many is None or (size, since) > many[:2]:
                many = (size, since, owner)
        elif threads == 1 and (newest is None or since > newest[0]):
            newest = (since, owner)
    if many is not None:
        return many[2]
    return newest[1] if newest is not None else None
