"""Who follows a run going on (``bridge.serve.threads.live``): where each follower is, their
waits for more, the follower the run's own task writes (``Rider``), and the cut of one that
falls behind while others follow.

A follower ``FOLLOW_WINDOW`` frames behind makes the run wait (a slow reader slows the upstream
read, as without threads). Alone, it may hold the run; with others there, one that stays past
the window ``FOLLOW_PATIENCE`` seconds is cut: its response ends (its client follows again with
``Last-Event-ID`` and catches up from the frames kept), and the run and the others go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ag_ui.core import CustomEvent

from bridge.core.encode import encode_event

#: Frames a follower may be behind before the run waits for it.
FOLLOW_WINDOW = 256
#: Seconds the run waits for a follower past the window while others follow; then it is cut.
FOLLOW_PATIENCE = 5.0

#: Said last to a follower cut (``Followers.wait_for_slowest``), without an ``id:``.
CUT_FRAME = encode_event(
    CustomEvent(
        name="agui_bridge.follower_cut",
        value={
            "code": "follower_too_slow",
            "message": f"this client stayed {FOLLOW_WINDOW} events behind the run for "
            f"{FOLLOW_PATIENCE:g} s while others followed it: its stream ends here; follow the "
            "run again with Last-Event-ID to catch up",
        },
    )
)


class Rider:
    """The follower whose frames the run's own task writes (``LiveRun.carry``)."""

    __slots__ = ("add", "failed", "flush", "key", "prefix", "released", "taken")

    def __init__(
        self,
        key: int,
        taken: int,
        add: Callable[[str], None],
        prefix: str,
        flush: Callable[[], Awaitable[None]],
    ) -> None:
        self.key, self.taken, self.add, self.prefix, self.flush = key, taken, add, prefix, flush
        self.failed = False
        #: Set when the run's task writes for it no more (the run ended, a write failed, or
        #: another follower came).
        self.released: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class Followers:
    """A run's followers: each one's key and the last frame it took; and once none is left,
    the grace after which ``abandon`` is called."""

    def __init__(self, grace: float, abandon: Callable[[], None]) -> None:
        self._grace, self._abandon = grace, abandon
        self._alone: asyncio.TimerHandle | None = None
        #: Since when nobody follows (``time.monotonic()``); ``None`` while somebody does.
        self.alone_since: float | None = None
        self.taken: dict[int, int] = {}  # follower → the last frame it took
        self._cuts: dict[int, Callable[[], None] | None] = {}
        self._cut: set[int] = set()
        self._keys = 0  # the last follower's key
        #: One per follower waiting for more (of its own: a follower that leaves cancels
        #: only its own wait, with no shield to make per frame).
        self._waiting: list[asyncio.Future[None]] = []
        #: The follower whose frames the run's own task writes, while it is the only one.
        self.rider: Rider | None = None
        self._drained: asyncio.Future[None] | None = None
        #: The run's task, while it waits on the rider's socket; ``_unseating``: a follower
        #: that came cancels that wait (the run goes on, the rider writes its own frames).
        self.riding: asyncio.Task[None] | None = None
        self._unseating = False

    def __len__(self) -> int:
        return len(self.taken)

    def join(self, after: int, cut: Callable[[], None] | None) -> int:
        """A new follower from frame ``after``; ``cut`` ends its response."""
        key = self._keys = self._keys + 1
        self.taken[key] = after
        self._cuts[key] = cut
        if self.rider is not None:  # with two, no follower rides: each writes its own
            self.release(self.rider)
            if self.riding is not None and not self._unseating:
                self._unseating = True
                self.riding.cancel()
        self._moved()
        self.alone_since = None
        self.stop_grace()
        return key

    def leave(self, key: int, ended: bool) -> None:
        """The follower left (``ended``: the run is over; no grace starts)."""
        self.taken.pop(key, None)
        self._cuts.pop(key, None)
        self._cut.discard(key)
        self._moved()  # a run waiting for this follower waits no more
        if not self.taken and not ended and self._alone is None:
            self.alone_since = time.monotonic()
            self._alone = asyncio.get_running_loop().call_later(self._grace, self._alone_ends)

    def stop_grace(self) -> None:
        if self._alone is not None:
            self._alone.cancel()
            self._alone = None

    @property
    def in_grace(self) -> bool:
        return self._alone is not None

    def _alone_ends(self) -> None:
        self._alone = None
        if not self.taken:
            self._abandon()

    def took(self, key: int, end: int) -> None:
        if key in self.taken:
            self.taken[key] = end
            self._moved()

    def was_cut(self, key: int) -> bool:
        return key in self._cut

    def lag(self, last: int) -> int:
        return last - min(self.taken.values())

    async def wait_for_slowest(self, last: int) -> None:
        """The run waits while a follower is past the window (``last``: its last frame): for
        one alone, as long as it takes; among others, ``FOLLOW_PATIENCE`` seconds, then the
        slowest are cut."""
        deadline = asyncio.get_running_loop().time() + FOLLOW_PATIENCE
        while self.taken and self.lag(last) > FOLLOW_WINDOW:
            if len(self.taken) < 2:
                await self.drained()
                continue
            try:
                async with asyncio.timeout_at(deadline):
                    await self.drained()
            except TimeoutError:
                self._cut_slowest()

    def _cut_slowest(self) -> None:
        key = min(self.taken, key=self.taken.__getitem__)
        cut = self._cuts.pop(key, None)
        del self.taken[key]
        self._cut.add(key)
        if self.rider is not None and self.rider.key == key:
            self.release(self.rider)
        if cut is not None:
            cut()
        self.wake()  # a cut follower waiting for more finds it is cut

    def unseated(self) -> bool:
        """Whether the cancel the run's task took in the rider's write was a follower's
        coming alone (``join``): the run goes on."""
        if not self._unseating:
            return False
        self._unseating = False
        task = asyncio.current_task()
        return task is not None and task.uncancel() == 0

    def wake(self) -> None:
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)

    async def wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        await waiter

    async def drained(self) -> None:
        """Until a follower takes more, leaves or comes."""
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()
        await self._drained

    def _moved(self) -> None:
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    def release(self, rider: Rider) -> None:
        if self.rider is rider:
            self.rider = None
        if not rider.released.done():
            rider.released.set_result(None)
