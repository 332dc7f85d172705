"""The thread as a run left it reaches the store a moment after the run's end (its frames
folded, then saved). Meanwhile a hydrate on another process finds the thread saved as the run
began, naming the run: it gives that run whole from the store's events, so it shows the answer
and not the thread before it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from threads_tools import body, events, hydrate_body, post_run, sse

from bridge.cli.demo import create_scripted_upstream
from bridge.serve.http.app import create_app
from bridge.serve.http.threads import from_store
from bridge.serve.threads import redis_store
from bridge.serve.threads.store import Batch, RunInfo, RunKey
from redis_server import RedisServer
from servers import scripted_config, serve


def test_a_hydrate_elsewhere_before_the_end_save_lands_shows_the_run_whole(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = redis_store.RedisThreads.save

    async def late(self: redis_store.RedisThreads, *args: Any) -> None:
        await asyncio.sleep(5)  # the end's save (the begin's goes with the run's begin)
        await saved(self, *args)

    monkeypatch.setattr(redis_store.RedisThreads, "save", late)
    with serve(create_scripted_upstream()) as upstream:
        config = replace(scripted_config(upstream), threads=redis.url)
        with serve(create_app(config)) as first, serve(create_app(config)) as other:
            ran = events(post_run(first, body("th-late-save", "Hi")))
            assert ran[-1]["type"] == "RUN_FINISHED"
            shown = sse(post_run(other, hydrate_body("th-late-save")))
    snapshot = next(frame for _, frame in shown if frame["type"] == "MESSAGES_SNAPSHOT")
    assert [m["role"] for m in snapshot["messages"]] == ["user"]  # the thread before the run
    replayed = [frame for ident, frame in shown if ident is not None]
    texts = "".join(f["delta"] for f in replayed if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts and texts == "".join(
        f["delta"] for f in ran if f["type"] == "TEXT_MESSAGE_CONTENT"
    )
    assert replayed[-1]["type"] == "RUN_FINISHED"


class _EndsMeanwhile:
    """A store whose run ends between the follower's read (nothing yet) and its look at the
    run: the run's whole events are there by the time the run says it ended."""

    shared = True

    def __init__(self) -> None:
        self.reads = 0

    async def want(self, run: RunKey, process: str) -> None:
        return None

    async def run_events(self, run: RunKey, after: int, wait: float) -> list[Batch]:
        self.reads += 1
        return [] if self.reads == 1 else [Batch(1, (FRAME, END))]

    async def run_info(self, run: RunKey) -> RunInfo:
        return RunInfo(owner="o", thread_id="t", ended=True, process="p")


FRAME = 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}\n\n'
END = 'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_run_that_ends_between_a_read_and_a_look_is_given_whole(anyio_backend: str) -> None:
    keeper = SimpleNamespace(store=_EndsMeanwhile(), config=SimpleNamespace(keepalive_interval=1))
    given = [item async for item in from_store(keeper, RunKey("o", "r"), 0, "p")]  # type: ignore[arg-type]
    assert given == [(1, [FRAME, END])]
