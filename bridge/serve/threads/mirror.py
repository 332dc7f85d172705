"""What a shared store (``file://``, ``redis://``) holds of this process's runs, so that a
client on another process can follow them. One writer per process, not one per run: every
``MIRROR_EVERY`` seconds it asks the store which of its runs a follower elsewhere wants (one
call, whatever the number of runs), then hands the new frames of the runs wanted and of those
that ended to the store in one call (``run_append_many``: one Redis pipeline, one worker thread
for files).

A run nobody elsewhere follows goes to the store once, whole, at its end (for a client that
comes back after it): a Redis command costs the client more CPU than a token's whole way
through the bridge, and a run's frames sent every 100 ms while it goes cost more than the rest
of keeping it (``benchmarks/threads_cpu.py``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets

from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.store import Batch, RunKey, ThreadStore, ThreadStoreError

logger = logging.getLogger("agui_bridge")

#: Seconds between two writes to the store: what a follower on another process may lag
#: behind one on this process (twice that for its first frames, as its want is seen).
MIRROR_EVERY = 0.1


class Mirror:
    """This process's writer of runs' frames to a shared store."""

    def __init__(self, store: ThreadStore) -> None:
        self._store = store
        #: This process, as the runs it begins name it: where a follower elsewhere asks.
        self.process = secrets.token_hex(8)
        self._pending: set[LiveRun] = set()
        self._unwanted: dict[RunKey, LiveRun] = {}  # going on, its frames not asked for yet
        self._task: asyncio.Task[None] | None = None

    def track(self, live: LiveRun) -> None:
        """A run begins here: a follower elsewhere may ask for it."""
        self._unwanted[live.key] = live
        self._start()

    def more(self, live: LiveRun) -> None:
        """The run has frames the store should have now (it is wanted, or it ended)."""
        self._pending.add(live)
        self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._pending or self._unwanted:
            await asyncio.sleep(MIRROR_EVERY)
            await self._ask_wanted()
            runs, self._pending = self._pending, set()
            items: list[tuple[LiveRun, Batch, bool]] = []
            for live in runs:
                if not live.begun.done():  # the store is not told of it yet: next time
                    self._pending.add(live)
                elif not live.begun.result():  # it could not be: its frames stay here
                    live.mirror_gone()
                else:
                    items += [(live, batch, ended) for batch, ended in live.unmirrored()]
            if not items:
                continue
            try:
                await self._store.run_append_many(
                    [(live.key, batch, ended) for live, batch, ended in items]
                )
            except ThreadStoreError as exc:
                logger.warning("runs' events are not shared: %s", exc.message)
                for live, _, _ in items:
                    live.mirror_gone()
                continue
            for live, batch, _ in items:
                live.mirrored(batch.last)
                if live.unmirrored():  # made while the store wrote
                    self._pending.add(live)

    async def _ask_wanted(self) -> None:
        """Which runs going on here a follower elsewhere asked for since the last look."""
        for run, live in list(self._unwanted.items()):
            if live.ended or live.wanted or (live.begun.done() and not live.begun.result()):
                del self._unwanted[run]
        asking = [run for run, live in self._unwanted.items() if live.begun.done()]
        if not asking:
            return
        try:
            wanted = await self._store.wanted(self.process, asking)
        except ThreadStoreError:
            return  # the store is down: the appends say so; a want asked meanwhile waits
        for run in wanted:
            asked = self._unwanted.pop(run, None)
            if asked is not None:
                asked.want()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
