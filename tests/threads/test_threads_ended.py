"""Runs that ended a moment ago (README "Threads"): kept as their frames alone, for a client
that comes back as its run ends, ``RUN_KEPT`` seconds and within ``ENDED_CHARS`` in all."""

from __future__ import annotations

import gc
from array import array
from typing import Any

import pytest

from bridge.serve.threads import ended as ended_module
from bridge.serve.threads.ended import EndedRun, LiveRuns
from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.run_frames import RunGoneError
from bridge.serve.threads.store import RUN_KEPT, RunKey

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def frame(n: int, chars: int = 10) -> str:
    return f'data: {{"type":"CUSTOM","name":"{n}","value":"{"x" * chars}"}}\n\n'


async def ended_live(run_id: str, count: int = 3, chars: int = 10) -> LiveRun:
    live = LiveRun(run_id, "owner", f"thread-{run_id}", max_bytes=1 << 30, grace=30)
    live.input = {"messages": ["what the run was asked"]}
    for n in range(1, count + 1):
        live.add(frame(n, chars))
    live.ended = True
    return live


async def taken(run: Any, after: int) -> list[tuple[int, list[str]]]:
    return [item async for item in run.follow(after)]


async def test_a_settled_run_keeps_its_frames_alone_and_gives_them_after_any_frame() -> None:
    runs = LiveRuns()
    live = await ended_live("r1")
    runs.add(live)
    runs.settle(live)
    kept = runs.get(RunKey("owner", "r1"))
    assert isinstance(kept, EndedRun)
    assert (kept.ended, kept.last, kept.cancel()) == (True, 3, False)
    assert runs.of_thread("owner", "thread-r1") is None
    assert runs.last_of_thread("owner", "thread-r1") is None
    assert await taken(kept, 0) == [(1, [frame(1), frame(2), frame(3)])]
    assert await taken(kept, 2) == [(3, [frame(3)])]
    assert await taken(kept, 3) == []
    # Nothing of the run but its frames is held, as one string and an array of where each
    # ends: two objects for all its frames, and nothing in them the garbage collector walks.
    assert not any(isinstance(o, LiveRun | dict) for o in gc.get_referents(kept))
    assert (type(kept.text), type(kept.ends), len(kept.ends)) == (str, array, 3)
    assert gc.get_referents(kept.ends) == [array] and not gc.is_tracked(kept.text)


async def test_frames_let_go_before_the_end_are_gone_for_a_client_that_had_fewer() -> None:
    live = await ended_live("r1", count=5)
    live._base, live._frames = 2, live._frames[2:]  # let go past --max-thread-bytes
    kept = EndedRun.of(live)
    assert (kept.base, kept.last, kept.can_follow(1), kept.can_follow(2)) == (2, 5, False, True)
    with pytest.raises(RunGoneError):
        await taken(kept, 1)
    assert await taken(kept, 4) == [(5, [frame(5)])]


async def test_ended_runs_go_after_RUN_KEPT(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(ended_module.time, "monotonic", lambda: now[0])
    runs = LiveRuns()
    for run_id in ("r1", "r2"):
        live = await ended_live(run_id)
        runs.add(live)
        runs.settle(live)
        now[0] += 10
    now[0] = 1000.0 + RUN_KEPT + 5  # r1 ended RUN_KEPT + 5 s ago, r2 RUN_KEPT - 5 s ago
    assert (
        runs.get(RunKey("owner", "r1")),
        isinstance(runs.get(RunKey("owner", "r2")), EndedRun),
    ) == (None, True)


async def test_ended_runs_past_ENDED_CHARS_go_the_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ended_module, "ENDED_CHARS", 2_000)
    runs = LiveRuns()
    for run_id in ("r1", "r2", "r3"):
        live = await ended_live(run_id, count=10, chars=40)  # about 900 characters a run
        runs.add(live)
        runs.settle(live)
    assert [runs.get(RunKey("owner", r)) is not None for r in ("r1", "r2", "r3")] == [
        False,
        True,
        True,
    ]
