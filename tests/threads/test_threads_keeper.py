"""Where a kept run's thread is made (issue 42; README "Threads"): on the event loop when the
run's input and its frames are as small as a body parsed there, in a worker thread when either
is bigger (a thread of megabytes is never folded on the loop), and when the body's size is not
known (a chunked body)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from ag_ui.core import RunAgentInput, RunErrorEvent, UserMessage

from bridge.config import BridgeConfig
from bridge.core.encode import encode_event
from bridge.serve.threads.keeper import OFF_LOOP_BYTES, ThreadKeeper
from bridge.serve.threads.stores import thread_store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _made_in(input_bytes: int | None, frame_chars: int) -> list[str]:
    """Run a kept run writing one frame of ``frame_chars`` characters; where each of its two
    documents (as it began, as it ended) was made: ``loop`` or ``worker``."""
    config = BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model="m", threads="memory")
    keeper = ThreadKeeper(config, thread_store("memory", ttl=60), lambda text: text)
    loop_thread = threading.get_ident()
    where: list[str] = []
    making = keeper._document

    def spied(*args: Any) -> Any:
        where.append("loop" if threading.get_ident() == loop_thread else "worker")
        return making(*args)

    keeper._document = spied  # type: ignore[method-assign]
    run_input = RunAgentInput(
        thread_id="t",
        run_id="r",
        messages=[UserMessage(id="u", role="user", content="Hi")],
        tools=[],
        context=[],
        state={},
        forwarded_props={},
    )
    live = keeper.begin(run_input, "owner", input_bytes)
    frame = "data: " + '{"type":"CUSTOM","name":"x","value":"' + "x" * frame_chars + '"}\n\n'

    async def run() -> None:
        live.add(frame)
        await live.flush()

    live.start(
        run,
        timeout=10,
        end_with=lambda events: live.add("".join(map(encode_event, events))),
        cancel_ends=lambda _: keeper.cancel_ends(live, run_input),
        timed_out=lambda: RunErrorEvent(message="late"),
    )
    await live.saved
    await keeper.aclose()
    return where


async def test_a_small_run_is_made_on_the_loop() -> None:
    assert await _made_in(2_000, 100) == ["loop", "loop"]


async def test_a_big_input_or_an_unknown_one_is_made_in_a_worker_thread() -> None:
    assert await _made_in(OFF_LOOP_BYTES + 1, 100) == ["worker", "worker"]
    assert await _made_in(None, 100) == ["worker", "worker"]


async def test_big_frames_are_folded_in_a_worker_thread() -> None:
    assert await _made_in(2_000, OFF_LOOP_BYTES + 1) == ["loop", "worker"]
