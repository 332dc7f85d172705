"""What a shared store (``file://``, ``redis://``) holds of this process's runs, so that a
client on another process can follow them: every ``MIRROR_EVERY`` seconds, the new frames of
every run go to the store in one call (``run_append_many``: one Redis pipeline, one worker
thread for files). One writer per process, not one per run: a Redis command costs the client
more CPU than a token's whole way through the bridge, and 200 runs' commands in one pipeline
cost about a fifth of 200 sent apart.
"""

from __future__ import annotations

import asyncio
import logging

from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.store import Batch, ThreadStore, ThreadStoreError

logger = logging.getLogger("agui_bridge")

#: Seconds between two writes to the store: what a follower on another process may lag
#: behind one on this process.
MIRROR_EVERY = 0.1


class Mirror:
    """This process's writer of runs' frames to a shared store."""

    def __init__(self, store: ThreadStore) -> None:
        self._store = store
        self._pending: set[LiveRun] = set()
        self._task: asyncio.Task[None] | None = None

    def more(self, live: LiveRun) -> None:
        self._pending.add(live)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._pending:
            await asyncio.sleep(MIRROR_EVERY)
            runs, self._pending = self._pending, set()
            items: list[tuple[LiveRun, Batch, bool]] = []
            for live in runs:
                if not live.begun.done():  # the store is not told of it yet: next time
                    self._pending.add(live)
                elif not live.begun.result():  # it could not be: its frames stay here
                    live.mirror_gone()
                elif (new := live.unmirrored()) is not None:
                    items.append((live, *new))
            if not items:
                continue
            try:
                await self._store.run_append_many(
                    [(live.run_id, batch, ended) for live, batch, ended in items]
                )
            except ThreadStoreError as exc:
                logger.warning("runs' events are not shared: %s", exc.message)
                for live, _, _ in items:
                    live.mirror_gone()
                continue
            for live, batch, _ in items:
                live.mirrored(batch.last)
                if live.unmirrored() is not None:  # made while the store wrote
                    self._pending.add(live)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
