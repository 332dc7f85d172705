"""The memory thread store (``--threads memory``): this process's own, gone with it."""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.serve.threads.budget import THREAD_OVERHEAD, giving_way
from bridge.serve.threads.records import CANCEL_KEPT
from bridge.serve.threads.store import Batch, RunInfo, RunKey, ThreadSummary

#: Cancels kept at most (each for ``CANCEL_KEPT`` seconds): a flood of them stays bounded.
MAX_CANCELS = 10_000
#: Forgotten threads whose generation is remembered at most (the most recent): a run begun
#: before one of them cannot save it again.
MAX_FORGOTTEN = 10_000

logger = logging.getLogger("agui_bridge")


@dataclass(frozen=True, slots=True)
class _Kept:
    document: bytes
    summary: ThreadSummary
    until: float  # time.monotonic() when it expires


class MemoryThreads:
    """Threads kept in this process, for ``ttl`` seconds after their last save, at most
    ``max_threads`` of each owner's (a save beyond it forgets the owner's least recently saved)
    and ``max_bytes`` in all owners (a save beyond it forgets as ``budget`` says: the biggest
    holder's oldest thread, or the newest owner's one).

    One ttl for all makes the order of saving the order of expiring, so one ordered dict, the
    least recently saved first, is the expiry queue too: each access forgets from its front
    what has expired.

    It keeps no run events (the process keeps its own runs' events, and no other process reads
    this store): ``run_begin`` and ``run_append`` do nothing, ``run_info`` is ``None`` and
    ``run_events`` empty at once. A cancel is seen by ``cancelled`` in this process."""

    shown = "memory"
    shared = False

    def __init__(self, *, ttl: float, max_threads: int = 1000, max_bytes: int = 1 << 62) -> None:
        self._ttl = ttl
        self._max_threads = max_threads
        self._max_bytes = max_bytes
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
        # owner → its thread ids, the least recently saved first (a dict keeps that order)
        self._owners: dict[str, dict[str, None]] = {}
        self._bytes: dict[str, int] = {}  # owner → the bytes its threads cost
        self._since: dict[str, int] = {}  # owner → when it was seen first (a count)
        self._seen = itertools.count()
        self._total = 0
        self._cancels: OrderedDict[RunKey, float] = OrderedDict()  # run → until (monotonic)
        # (owner, thread id) → how many times it was forgotten, the most recent last
        self._forgotten: OrderedDict[tuple[str, str], int] = OrderedDict()

    def _expire(self, now: float) -> None:
        while self._kept:
            key, kept = next(iter(self._kept.items()))
            if kept.until > now:
                break
            self._drop(key)

    def _drop(self, key: tuple[str, str]) -> bool:
        kept = self._kept.pop(key, None)
        if kept is None:
            return False
        owner, thread_id = key
        ids = self._owners[owner]
        del ids[thread_id]
        cost = len(kept.document) + THREAD_OVERHEAD
        self._total -= cost
        self._bytes[owner] -= cost
        if not ids:
            del self._owners[owner], self._bytes[owner], self._since[owner]
        return True

    async def load(self, owner: str, thread_id: str) -> bytes | None:
        self._expire(time.monotonic())
        kept = self._kept.get((owner, thread_id))
        return None if kept is None else kept.document

    async def save(
        self,
        owner: str,
        thread_id: str,
        document: bytes,
        summary: ThreadSummary,
        *,
        generation: str | None = None,
    ) -> bool:
        key = (owner, thread_id)
        if generation is not None and generation != self._generation(key):
            return False
        now = time.monotonic()
        self._expire(now)
        since = self._since.get(owner)  # the owner's, whatever this save does
        self._drop(key)  # saved again: it goes to the end of both orders
        cost = len(document) + THREAD_OVERHEAD
        if cost > self._max_bytes:
            logger.info("thread %s: over --thread-store-bytes alone; not kept", thread_id)
            return True
        self._kept[key] = _Kept(document, summary, now + self._ttl)
        ids = self._owners.setdefault(owner, {})
        ids[thread_id] = None
        if owner not in self._since:
            self._since[owner] = next(self._seen) if since is None else since
            self._bytes[owner] = 0
        self._bytes[owner] += cost
        self._total += cost
        while len(ids) > self._max_threads:
            self._drop((owner, next(iter(ids))))
        self._fit(key)
        return True

    def _fit(self, saved: tuple[str, str]) -> None:
        """Forget threads until all of them cost ``max_bytes`` at most (``budget``)."""
        while self._total > self._max_bytes:
            holdings = (
                (owner, len(ids), self._bytes[owner], self._since[owner])
                for owner, ids in self._owners.items()
            )
            owner = giving_way(holdings)
            assert owner is not None  # over a budget of 1 byte or more: something is kept
            key = (owner, next(iter(self._owners[owner])))
            if key == saved:
                logger.info("thread %s: the thread store is full; not kept", saved[1])
            self._drop(key)

    def _generation(self, key: tuple[str, str]) -> str:
        return str(self._forgotten.get(key, 0))

    async def threads(self, owner: str) -> list[ThreadSummary]:
        self._expire(time.monotonic())
        ids = self._owners.get(owner, {})
        return [self._kept[owner, thread_id].summary for thread_id in reversed(ids)]

    async def forget(self, owner: str, thread_id: str) -> ThreadSummary | None:
        self._expire(time.monotonic())
        key = (owner, thread_id)
        kept = self._kept.get(key)
        if kept is None:
            return None
        self._drop(key)
        self._forgotten[key] = self._forgotten.pop(key, 0) + 1
        while len(self._forgotten) > MAX_FORGOTTEN:
            self._forgotten.popitem(last=False)
        return kept.summary

    async def run_begin(
        self,
        run: RunKey,
        thread_id: str,
        process: str = "",
        *,
        saving: tuple[bytes, ThreadSummary] | None = None,
    ) -> str:
        generation = self._generation((run.owner, thread_id))
        if saving is not None:
            await self.save(run.owner, thread_id, *saving)
        return generation

    async def want(self, run: RunKey, process: str) -> None:
        return None

    async def wanted(self, process: str, runs: Sequence[RunKey]) -> list[RunKey]:
        return []

    async def run_append(self, run: RunKey, batch: Batch, *, ended: bool = False) -> None:
        return None

    async def run_append_many(self, batches: Sequence[tuple[RunKey, Batch, bool]]) -> None:
        return None

    async def run_info(self, run: RunKey) -> RunInfo | None:
        return None

    async def run_events(self, run: RunKey, after: int, wait: float) -> list[Batch]:
        return []

    async def cancel(self, run: RunKey) -> None:
        now = time.monotonic()
        self._expire_cancels(now)
        self._cancels.pop(run, None)
        self._cancels[run] = now + CANCEL_KEPT
        while len(self._cancels) > MAX_CANCELS:
            self._cancels.popitem(last=False)

    async def cancelled(self, runs: Sequence[RunKey]) -> list[RunKey]:
        self._expire_cancels(time.monotonic())
        return [run for run in runs if run in self._cancels]

    def _expire_cancels(self, now: float) -> None:
        while self._cancels and next(iter(self._cancels.values())) <= now:
            self._cancels.popitem(last=False)

    async def available(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._kept.clear()
        self._owners.clear()
        self._cancels.clear()
        self._forgotten.clear()

    def __len__(self) -> int:
        return len(self._kept)
