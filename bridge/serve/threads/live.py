"""Runs that outlive their connection (README "Threads"). With threads kept, a run is no
longer its response's: it runs in a task of its own, its frames kept and numbered (the ``id:``
of each SSE frame), and any number of clients follow it: the one that started it, and one that
comes back after a reload (``follow(after)``: every frame after the one it had, exactly once,
then the rest live). A run whose followers are all gone goes on for ``grace`` seconds, long
enough for a reload; then it is cancelled, so a closed tab does not burn tokens. A cancel (the
owner's ``POST /runs/{id}/cancel``, the grace running out) stops the upstream request and ends
the run with what is open closed and ``RUN_FINISHED`` outcome ``cancelled``.

A follower that lags ``FOLLOW_WINDOW`` frames behind makes the run wait, as a slow reader
slows the upstream read without threads; one that stays there while others follow is cut
(``followers``): one slow reader holds only itself. A run nobody follows waits for nobody.
The frames kept are bounded by ``max_bytes`` (the thread's limit): past it the run goes on for
its followers, its early frames are let go once read, and it can no longer be followed from
its start nor kept in its thread (``kept`` is ``False``).

With a shared store (``Mirrors``), the run's frames go there as they come once it is ``wanted``
(asked for elsewhere, or past ``max_bytes``), and all of them at its end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

from ag_ui.core import BaseEvent

from bridge.serve.threads.followers import FOLLOW_WINDOW, Followers, Rider
from bridge.serve.threads.run_frames import (
    NOT_KEPT_FRAME,
    EndWith,
    RunGoneError,
    ends_run,
    id_prefix,
    in_batches,
    with_ids,
)
from bridge.serve.threads.store import Batch, RunKey

logger = logging.getLogger("agui_bridge")


#: The events that end a cancelled run: what it left open closed, and its terminal event.
CancelEnds = Callable[["LiveRun"], Awaitable[Sequence[BaseEvent]]]


class Place(Protocol):
    """The place a run holds among the runs going on (``bridge.serve.http.admission``)."""

    def release(self) -> None: ...


class Mirrors(Protocol):
    """Where a run hands its frames for a shared store (``bridge.serve.threads.mirror``)."""

    def more(self, live: LiveRun) -> None:
        """The run has frames the store has not."""
        ...


class LiveRun:
    """One run going on in this process, its frames, and who follows it."""

    def __init__(
        self,
        run_id: str,
        owner: str,
        thread_id: str,
        *,
        max_bytes: int,
        grace: float,
        mirror: Mirrors | None = None,
    ) -> None:
        self.run_id, self.owner, self.thread_id = run_id, owner, thread_id
        #: The run as the stores and this process's runs know it (its owner's and its id).
        self.key = RunKey(owner, run_id)
        #: The thread's generation as the run began (``ThreadStore.run_begin``): its end's
        #: save comes to nothing when the thread was forgotten since.
        self.generation: str | None = None
        self._max_bytes = max_bytes
        self._grace = grace
        self._frames: list[str] = []
        self._base = 0  # frames let go from the front (past max_bytes)
        self._size = 0
        self.kept = True
        self.ended = False
        self.cancel_reason: str | None = None
        self._followers = Followers(grace, self._abandon)
        self._task: asyncio.Task[None] | None = None
        self._mirror = mirror
        self._mirrored = 0  # frames the shared store has
        #: Whether its frames go to the shared store as they come (not only at its end).
        self.wanted = False
        self._shared: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: Set by the keeper once a shared store knows of the run (``True``), or could not
        #: be told (``False``: its events stay this process's).
        self.begun: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        #: Set once the run is over (its terminal frame written), and ``done`` once its last
        #: frames are in the shared store too: the run no longer counts among those going on
        #: from the first (a client's next run may come at once).
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: Set once the thread is saved as the run left it (or could not be).
        self.saved: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: The run's input (``RunAgentInput``): what a hydrate shows while the run goes on.
        self.input: Any = None
        #: Its place among the runs going on, given back as it ends, or at once when it gives
        #: way to a run whose client is there (``give_way``).
        self.slot: Place | None = None

    # -- written by the run (the output's sink) --------------------------------------------

    def add(self, text: str) -> None:
        """One frame or several (a batch's, encoded together): each is numbered. A frame ends
        at its first blank line (JSON escapes every line break inside the data)."""
        if not text:
            return
        if text.find("\n\n") == len(text) - 2:  # most batches: one token's frame
            self._frames.append(text)
        else:
            self._frames.extend(frame + "\n\n" for frame in text.split("\n\n")[:-1])
        self._size += len(text)
        if self.kept and self._size > self._max_bytes:
            self.kept = False
            self._frames.append(NOT_KEPT_FRAME)
            self.wanted = True  # what it lets go of must be in the store first

    async def flush(self) -> None:
        followers = self._followers
        rider = followers.rider
        if rider is not None and rider.taken < self.last:
            # The run's task writes the rider's frames: here, not in a coroutine of its own
            # (one more a token).
            taken, end = rider.taken, self.last
            rider.add(with_ids(rider.prefix, taken + 1, self._frames[taken - self._base :]))
            # Only the run's own task waits for followers to take more, and it is here: no
            # wait to wake (``Followers.took``).
            rider.taken = followers.taken[rider.key] = end
            followers.riding = self._task
            try:
                await rider.flush()
            except asyncio.CancelledError:
                # The run cancelled while the client's socket was full, or a second follower
                # came (``_join``): the server wrote nothing (it waits before it writes); the
                # follower writes those frames again.
                rider.taken = taken
                followers.took(rider.key, taken)
                followers.release(rider)
                if not followers.unseated():
                    raise
            except Exception:  # the response is over (its client gone, or it was stopped)
                rider.failed = True
                followers.release(rider)
            finally:
                followers.riding = None
        followers.wake()
        if self._mirror is not None and self.wanted:
            self._mirror.more(self)
        if not self.kept:
            self._let_go()
        # A rider is alone and has every frame: only followers of their own tasks may lag.
        if followers.rider is None and followers and followers.lag(self.last) > FOLLOW_WINDOW:
            await followers.wait_for_slowest(self.last)

    @property
    def size(self) -> int:
        """The characters of every frame written."""
        return self._size

    @property
    def last(self) -> int:
        """The number of the last frame written."""
        return self._base + len(self._frames)

    def frames(self) -> list[str]:
        """Every frame kept (all of them while ``kept``)."""
        return list(self._frames)

    def _let_go(self) -> None:
        """Past the limit: drop the frames every follower has taken (all, with none)."""
        taken = min(self._followers.taken.values(), default=self.last)
        drop = min(taken, self._mirrored if self._mirror is not None else taken) - self._base
        if drop > 0:
            del self._frames[:drop]
            self._base += drop

    # -- followed by clients ---------------------------------------------------------------

    async def follow(
        self, after: int = 0, cut: Callable[[], None] | None = None
    ) -> AsyncIterator[tuple[int, list[str]]]:
        """``(number of the first, frames)`` after frame ``after``, as they come, until the
        run's end, or until the follower is cut (``cut`` ends its response); ``RunGoneError``
        when those frames were let go."""
        key = self._followers.join(after, cut)
        taken = after
        try:
            while not self._followers.was_cut(key):
                end = self.last
                if taken < end:
                    chunk = self._take(key, taken, end)
                    first, taken = taken + 1, end
                    yield first, chunk
                    continue
                if self.ended:
                    return
                await self._followers.wait()
        finally:
            self._followers.leave(key, self.ended)

    async def carry(
        self,
        add: Callable[[str], None],
        flush: Callable[[], Awaitable[None]],
        after: int = 0,
        cut: Callable[[], None] | None = None,
    ) -> None:
        """Follow the run as ``follow`` does, into ``add`` (the frames after ``after``, each
        with its ``id:`` line) then ``flush``, until the run's end, and with no task
        switch per frame: once this follower has every frame and is the only one, the run's
        own task writes each as it flushes (``flush`` waits while the client's socket is full,
        so a slow reader slows the run, as without threads). With others, each writes its
        own. ``RunGoneError`` when the frames were let go."""
        key = self._followers.join(after, cut)
        taken = after
        prefix = id_prefix(self.run_id)
        followers = self._followers
        try:
            while not followers.was_cut(key):
                end = self.last
                if taken < end:
                    chunk = self._take(key, taken, end)
                    add(with_ids(prefix, taken + 1, chunk))
                    taken = end
                    await flush()
                    continue
                if self.ended:
                    return
                if followers.rider is not None or len(followers) > 1:
                    await followers.wait()
                    continue
                rider = followers.rider = Rider(key, taken, add, prefix, flush)
                try:
                    await rider.released
                finally:
                    if followers.rider is rider:
                        followers.rider = None
                if rider.failed:
                    return  # its response is over
                taken = rider.taken
        finally:
            self._followers.leave(key, self.ended)

    def _take(self, key: int, taken: int, end: int) -> list[str]:
        """The frames after ``taken`` up to ``end``, taken by the follower ``key``."""
        if taken < self._base:
            raise RunGoneError.of(self.run_id)
        chunk = self._frames[taken - self._base :]
        self._followers.took(key, end)
        if not self.kept:  # what every follower took goes
            self._let_go()
        return chunk

    def want(self) -> None:
        """A follower on another process asked for the run: its frames go to the store as
        they come."""
        self.wanted = True
        if self._mirror is not None:
            self._mirror.more(self)

    def can_follow(self, after: int) -> bool:
        """Whether the frames after ``after`` are all still here."""
        return after >= self._base

    @property
    def followed(self) -> bool:
        return bool(self._followers)

    @property
    def alone_since(self) -> float | None:
        """Since when nobody follows it (``time.monotonic()``); ``None`` while somebody does."""
        return self._followers.alone_since

    def give_way(self) -> None:
        """Nobody follows it and the runs' places are all taken: it ends now as it would
        after its grace (``abandoned``), and its place goes at once to a run whose client is
        there."""
        logger.info("run %s: nobody follows it; it gives its place to a new run", self.run_id)
        self.cancel("abandoned")
        if self.slot is not None:
            self.slot.release()

    def _abandon(self) -> None:
        if not self.ended:
            logger.info("run %s: no client came back in %gs; cancelled", self.run_id, self._grace)
            self.cancel("abandoned")

    # -- its life ------------------------------------------------------------------------

    def start(
        self,
        run: Callable[[], Awaitable[None]],
        *,
        timeout: float,
        end_with: EndWith,
        cancel_ends: CancelEnds,
        timed_out: Callable[[], BaseEvent],
    ) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._drive(run, timeout, end_with, cancel_ends, timed_out)
        )

    def cancel(self, reason: str = "cancelled") -> bool:
        """Stop the run (its upstream request); ``False`` when it has ended already."""
        if self.ended or self._task is None or self.cancel_reason is not None:
            return not self.ended
        self.cancel_reason = reason
        self._task.cancel()
        return True

    async def _drive(
        self,
        run: Callable[[], Awaitable[None]],
        limit: float,
        end_with: EndWith,
        cancel_ends: CancelEnds,
        timed_out: Callable[[], BaseEvent],
    ) -> None:
        try:
            async with asyncio.timeout(limit):
                made = run()
                del run  # what made the run (its request's closures) is not held for its life
                await made
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self.cancel_reason is None or task is None:
                raise
            task.uncancel()  # ours: the run goes on to write its end
            if not self._terminal_written():
                end_with(await cancel_ends(self))
        except TimeoutError:
            if not self._terminal_written():
                end_with([timed_out()])
        except Exception:  # the run's own safety net wrote its end; nothing is left to say
            logger.exception("run %s failed", self.run_id)
        finally:
            self.ended = True
            self._followers.wake()
            if self._followers.rider is not None:
                self._followers.release(self._followers.rider)
            self._followers.stop_grace()
            if not self.finished.done():
                self.finished.set_result(None)
            if self._mirror is not None:  # its last frames go to the store before its end
                self._mirror.more(self)
                await asyncio.shield(self._shared)
            if not self.done.done():
                self.done.set_result(None)

    def _terminal_written(self) -> bool:
        return bool(self._frames) and ends_run(self._frames[-1])

    # -- what other processes see (a shared store) -----------------------------------------

    def unmirrored(self) -> list[tuple[Batch, bool]]:
        """The frames not yet handed to the shared store, in batches of about
        ``MIRROR_BATCH_CHARS`` at most, each with whether it ends the run; none when there are
        none (or the store was not told of the run yet)."""
        if not self.begun.done() or self._mirrored >= self.last:
            return []
        return in_batches(self._mirrored + 1, self._frames[self._mirrored - self._base :])

    def mirrored(self, last: int) -> None:
        """The store has the frames up to number ``last``."""
        self._mirrored = max(self._mirrored, last)
        if self.ended and self._mirrored >= self.last:
            self.mirror_gone()

    def mirror_gone(self) -> None:
        """Nothing more goes to the store: it has every frame, or it failed."""
        self._mirror = None
        if not self._shared.done():
            self._shared.set_result(None)
