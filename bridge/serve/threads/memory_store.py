"""The memory thread store (``--threads memory``): this process's own, gone with it."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from bridge.serve.threads.records import CANCEL_KEPT
from bridge.serve.threads.store import Batch, RunInfo, ThreadSummary

#: Cancels kept at most (each for ``CANCEL_KEPT`` seconds): a flood of them stays bounded.
MAX_CANCELS = 10_000


@dataclass(frozen=True, slots=True)
class _Kept:
    document: bytes
    summary: ThreadSummary
    until: float  # time.monotonic() when it expires


class MemoryThreads:
    """Threads kept in this process, for ``ttl`` seconds after their last save and at most
    ``max_threads`` of them in all owners: a save beyond it forgets the thread saved least
    recently (whoever's it is), as an expired one is forgotten.

    One ttl for all makes the order of saving the order of expiring, so one ordered dict, the
    least recently saved first, is the expiry queue too: each access forgets from its front
    what has expired, and a save beyond the bound forgets its front.

    It keeps no run events (the process keeps its own runs' events, and no other process reads
    this store): ``run_begin`` and ``run_append`` do nothing, ``run_info`` is ``None`` and
    ``run_events`` empty at once. A cancel is seen by ``cancelled`` in this process."""

    shown = "memory"
    shared = False

    def __init__(self, *, ttl: float, max_threads: int = 1000) -> None:
        self._ttl = ttl
        self._max_threads = max_threads
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
        # owner → its thread ids, the least recently saved first (a dict keeps that order)
        self._owners: dict[str, dict[str, None]] = {}
        self._cancels: OrderedDict[str, float] = OrderedDict()  # run id → until (monotonic)

    def _expire(self, now: float) -> None:
        while self._kept:
            key, kept = next(iter(self._kept.items()))
            if kept.until > now:
                break
            self._drop(key)

    def _drop(self, key: tuple[str, str]) -> bool:
        if self._kept.pop(key, None) is None:
            return False
        owner, thread_id = key
        ids = self._owners[owner]
        del ids[thread_id]
        if not ids:
            del self._owners[owner]
        return True

    async def load(self, owner: str, thread_id: str) -> bytes | None:
        self._expire(time.monotonic())
        kept = self._kept.get((owner, thread_id))
        return None if kept is None else kept.document

    async def save(
        self, owner: str, thread_id: str, document: bytes, summary: ThreadSummary
    ) -> None:
        now = time.monotonic()
        self._expire(now)
        key = (owner, thread_id)
        self._drop(key)  # saved again: it goes to the end of both orders
        self._kept[key] = _Kept(document, summary, now + self._ttl)
        self._owners.setdefault(owner, {})[thread_id] = None
        while len(self._kept) > self._max_threads:
            self._drop(next(iter(self._kept)))

    async def threads(self, owner: str) -> list[ThreadSummary]:
        self._expire(time.monotonic())
        ids = self._owners.get(owner, {})
        return [self._kept[owner, thread_id].summary for thread_id in reversed(ids)]

    async def forget(self, owner: str, thread_id: str) -> bool:
        self._expire(time.monotonic())
        return self._drop((owner, thread_id))

    async def run_begin(
        self,
        run_id: str,
        owner: str,
        thread_id: str,
        process: str = "",
        *,
        saving: tuple[bytes, ThreadSummary] | None = None,
    ) -> None:
        if saving is not None:
            await self.save(owner, thread_id, *saving)

    async def want(self, run_id: str, process: str) -> None:
        return None

    async def wanted(self, process: str, run_ids: Sequence[str]) -> list[str]:
        return []

    async def run_append(self, run_id: str, batch: Batch, *, ended: bool = False) -> None:
        return None

    async def run_append_many(self, batches: Sequence[tuple[str, Batch, bool]]) -> None:
        return None

    async def run_info(self, run_id: str) -> RunInfo | None:
        return None

    async def run_events(self, run_id: str, after: int, wait: float) -> list[Batch]:
        return []

    async def cancel(self, run_id: str) -> None:
        now = time.monotonic()
        self._expire_cancels(now)
        self._cancels.pop(run_id, None)
        self._cancels[run_id] = now + CANCEL_KEPT
        while len(self._cancels) > MAX_CANCELS:
            self._cancels.popitem(last=False)

    async def cancelled(self, run_ids: Sequence[str]) -> list[str]:
        self._expire_cancels(time.monotonic())
        return [run_id for run_id in run_ids if run_id in self._cancels]

    def _expire_cancels(self, now: float) -> None:
        while self._cancels and next(iter(self._cancels.values())) <= now:
            self._cancels.popitem(last=False)

    async def available(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._kept.clear()
        self._owners.clear()
        self._cancels.clear()

    def __len__(self) -> int:
        return len(self._kept)
