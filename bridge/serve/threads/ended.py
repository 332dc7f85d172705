"""This process's runs: those going on (``LiveRun``) and those that ended a moment ago
(``EndedRun``), for a client that comes back as its run ends (README "Threads").

A run that ended and whose thread is saved is kept as its frames alone, one string and their ends:
the run's input, its futures and its followers go. Kept ``RUN_KEPT`` seconds after its end,
and no more than ``ENDED_CHARS`` of frames in all (the oldest go first): a client that comes
back later finds its thread (a hydrate), or, with a shared store, its events there. Ended runs
held whole for minutes cost the process more than the runs going on: at 40 runs a second,
12,000 of them, whose objects every collection of the garbage collector walked
(``benchmarks/threads_cpu.py``: 1.23x the CPU per token without threads, 1.08x without them).
"""

from __future__ import annotations

import time
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import accumulate

from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.run_frames import RunGoneError
from bridge.serve.threads.store import RUN_KEPT, RunKey

#: The characters of frames of ended runs a process keeps at most.
ENDED_CHARS = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class EndedRun:
    """A run that ended here a moment ago, its thread saved: its frames, for a client that
    comes back (``follow``), numbered from ``base + 1`` (earlier ones were let go).

    The frames are kept as one string and where each ends (an array of offsets), not as a
    string each: a process keeps up to ``ENDED_CHARS`` of them, hundreds of thousands of
    frames, and a string each cost a third more memory (100 short frames: 13.7 KiB against
    9.2) and an object each for the allocator to make and let go."""

    key: RunKey
    thread_id: str
    text: str  # every frame kept, one after the other
    ends: array[int]  # where each frame ends in ``text``
    base: int
    ended_at: float

    ended = True
    followed = False

    @classmethod
    def of(cls, live: LiveRun) -> EndedRun:
        frames = live.frames()
        ends = array("Q", accumulate(map(len, frames)))
        base = live.last - len(frames)
        text = "".join(frames)
        return cls(live.key, live.thread_id, text, ends, base, time.monotonic())

    @property
    def run_id(self) -> str:
        return self.key.run_id

    @property
    def owner(self) -> str:
        return self.key.owner

    @property
    def chars(self) -> int:
        """The characters of its frames."""
        return len(self.text)

    @property
    def last(self) -> int:
        return self.base + len(self.ends)

    def frames(self, after: int = 0) -> list[str]:
        """Its frames after number ``after`` (at least ``base``)."""
        text, ends = self.text, self.ends
        first = after - self.base
        start = ends[first - 1] if first > 0 else 0
        out = []
        for end in ends[first:]:
            out.append(text[start:end])
            start = end
        return out

    def can_follow(self, after: int) -> bool:
        return after >= self.base

    async def follow(self, after: int = 0) -> AsyncIterator[tuple[int, list[str]]]:
        """Every frame after ``after``; ``RunGoneError`` when those were let go."""
        if after < self.base:
            raise RunGoneError.of(self.run_id)
        if after < self.last:
            yield after + 1, self.frames(after)

    def cancel(self, reason: str = "cancelled") -> bool:
        return False


class LiveRuns:
    """This process's runs going on (``LiveRun``), by run (its owner's and its id) and by
    thread, and those that ended a moment ago (``EndedRun``), by run."""

    def __init__(self) -> None:
        self._runs: dict[RunKey, LiveRun] = {}
        self._threads: dict[tuple[str, str], LiveRun] = {}
        self._ended: OrderedDict[RunKey, EndedRun] = OrderedDict()  # the oldest first
        self._ended_chars = 0

    def add(self, live: LiveRun) -> None:
        self._runs[live.key] = live
        self._threads[live.owner, live.thread_id] = live

    def get(self, run: RunKey) -> LiveRun | EndedRun | None:
        live = self._runs.get(run)
        if live is not None:
            return live
        self._let_go(time.monotonic())
        return self._ended.get(run)

    def of_thread(self, owner: str, thread_id: str) -> LiveRun | None:
        """The run going on in the thread, if any."""
        live = self._threads.get((owner, thread_id))
        return live if live is not None and not live.ended else None

    def last_of_thread(self, owner: str, thread_id: str) -> LiveRun | None:
        """The thread's last run of this process, going on or ended and being saved."""
        return self._threads.get((owner, thread_id))

    def running(self, owner: str | None = None) -> list[LiveRun]:
        """The runs going on (``owner``'s only, when given)."""
        return [
            live
            for live in self._runs.values()
            if not live.ended and (owner is None or live.owner == owner)
        ]

    def settle(self, live: LiveRun) -> None:
        """The run ended and its thread is saved: only its frames are kept from now on."""
        if self._runs.get(live.key) is live:
            del self._runs[live.key]
        if self._threads.get((live.owner, live.thread_id)) is live:
            del self._threads[live.owner, live.thread_id]
        ended = EndedRun.of(live)
        gone = self._ended.pop(ended.key, None)
        if gone is not None:  # a run of the same owner and id before it
            self._ended_chars -= gone.chars
        self._ended[ended.key] = ended
        self._ended_chars += ended.chars
        self._let_go(ended.ended_at)

    def _let_go(self, now: float) -> None:
        """Forget ended runs kept ``RUN_KEPT``, then the oldest while past ``ENDED_CHARS``."""
        ended = self._ended
        while ended:
            oldest = next(iter(ended.values()))
            if oldest.ended_at > now - RUN_KEPT and self._ended_chars <= ENDED_CHARS:
                return
            del ended[oldest.key]
            self._ended_chars -= oldest.chars
