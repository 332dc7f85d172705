"""Server tools under load, over real HTTP: calls past ``max_parallel_tools`` wait their turn,
sync tools share a pool of ``tool_threads`` and a run that is gone drops its queued calls; a big
result is redacted once, in slices off the event loop, and its frame is what the encoder
writes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ag_ui.core import ToolCallResultEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bridge.config import BridgeConfig
from bridge.core.encode import encode_event
from bridge.serve.http.app import create_app
from bridge.serve.redact import MASK, Redactor
from bridge.serve.tools import results as tools_module
from bridge.serve.tools.results import ServerToolResult, tool_result_text
from servers import post, run_input, serve

SECRET = "sk-test-tool-limits-0123456789abcdef"


def calling_upstream(*calls: int, tool: str = "work") -> tuple[Starlette, list[dict[str, Any]]]:
    """An upstream whose model calls ``tool`` in one turn: its k-th such turn ``calls[k]``
    times (the last count for the turns after), with arguments ``{"n": 100 * k + i}``; it
    answers once it has the results."""
    requests: list[dict[str, Any]] = []
    turns = 0

    async def chat(request: Request) -> Response:
        body = await request.json()
        requests.append(body)
        if body["messages"][-1]["role"] == "tool":
            delta: dict[str, Any] = {"content": "done"}
            finish = "stop"
        else:
            nonlocal turns
            first, count = 100 * turns, calls[min(turns, len(calls) - 1)]
            turns += 1
            delta = {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_{first + i}",
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"n": first + i})},
                    }
                    for i in range(count)
                ]
            }
            finish = "tool_calls"
        chunks = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        ]
        frames = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
        return Response(frames + "data: [DONE]\n\n", media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]), requests


def ask() -> dict[str, Any]:
    return run_input([{"id": "u1", "role": "user", "content": "work, please"}])


def results(frames: list[dict[str, Any]]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"waited 10 s for {what}"
        time.sleep(0.01)


# --- max_parallel_tools ---------------------------------------------------------------------


def test_calls_past_max_parallel_tools_wait_their_turn() -> None:
    running: list[int] = []
    peak = 0

    async def work(n: int) -> str:
        """Works a while."""
        nonlocal peak
        running.append(n)
        peak = max(peak, len(running))
        await asyncio.sleep(0.01)
        running.remove(n)
        return f"done {n}"

    upstream, requests = calling_upstream(10)
    with serve(upstream) as upstream_url:
        config = BridgeConfig(upstream_url=f"{upstream_url}/v1", model="m", max_parallel_tools=3)
        with serve(create_app(config, tools=[work])) as bridge:
            frames = post(bridge, ask())
    assert peak == 3
    assert sorted(results(frames)) == sorted(f"done {n}" for n in range(10))
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert len(requests) == 2  # every result went upstream in one request


def test_the_limits_are_flags_and_checked() -> None:
    from bridge.cli.parser import build_parser

    args = build_parser().parse_args(
        ["serve", "--model", "m", "--max-parallel-tools", "4", "--tool-threads", "2"]
    )
    assert (args.max_parallel_tools, args.tool_threads) == (4, 2)
    defaults = build_parser().parse_args(["serve", "--model", "m"])
    assert (defaults.max_parallel_tools, defaults.tool_threads) == (16, 8)
    for field in ("max_parallel_tools", "tool_threads"):
        with pytest.raises(ValueError, match="at least 1"):
            BridgeConfig(upstream_url="http://h/v1", model="m", **{field: 0})


# --- tool_threads, and the calls of a run that is gone ---------------------------------------


def test_sync_tools_share_the_pool_and_a_gone_runs_queued_calls_never_start() -> None:
    """One thread: the first run's first call holds it; its three other calls wait in the
    pool's queue. The client leaves: those three are dropped, and the next run's call is the
    next to start."""
    started: list[int] = []
    release = threading.Event()

    def work(n: int) -> str:
        """Holds its thread until released."""
        started.append(n)
        release.wait(30)
        return f"done {n}"

    upstream, requests = calling_upstream(4, 1)
    with serve(upstream) as upstream_url:
        config = BridgeConfig(
            upstream_url=f"{upstream_url}/v1", model="m", tool_threads=1, max_parallel_tools=4
        )
        app = create_app(config, tools=[work])
        try:
            with serve(app) as bridge:
                with httpx.stream("POST", bridge, json=ask(), timeout=10) as response:
                    for line in response.iter_lines():
                        if '"TOOL_CALL_END"' in line:
                            break
                    wait_for(lambda: started == [0], "the first call to start")
                # The client is gone: its run ends, its queued calls with it.
                wait_for(lambda: app.state.bridge.active_runs == 0, "the run to end")
                release.set()
                frames = post(bridge, ask())
        finally:
            release.set()
    assert started == [0, 100]
    assert results(frames) == ["done 100"]
    assert len(requests) == 3  # the gone run never asked for a second turn


# --- big results ----------------------------------------------------------------------------


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Every text the bridge's Redactor scans: (its length, the thread's name)."""
    seen: list[tuple[int, str]] = []
    redact = Redactor.redact

    def counted(self: Redactor, text: str) -> str:
        seen.append((len(text), threading.current_thread().name))
        return redact(self, text)

    monkeypatch.setattr(Redactor, "redact", counted)
    return seen


def test_a_big_result_is_redacted_once_in_slices_off_the_event_loop(
    scans: list[tuple[int, str]],
) -> None:
    """A 3 MB result with the key at the start, in the middle and across every slice's edge:
    the client and the model's next request get it with every key masked; it was scanned once
    (not again as a frame), a slice at a time, none on the event loop's thread."""
    size = 3_000_000
    step = tools_module._SLICE
    text = list("The quick brown fox jumps over the lazy dog. " * (size // 45 + 1))[:size]
    for at in [0, size // 2, *range(step - len(SECRET) // 2, size - 100, step)]:
        text[at : at + len(SECRET)] = SECRET
    big = "".join(text)
    expected = Redactor([SECRET]).redact(big)

    def big_result() -> str:
        """A big text."""
        return big

    upstream, requests = calling_upstream(1, tool="big_result")
    with serve(upstream) as upstream_url:
        config = BridgeConfig(upstream_url=f"{upstream_url}/v1", model="m", api_key=SECRET)
        with serve(create_app(config, tools=[big_result])) as bridge:
            scans.clear()
            frames = post(bridge, ask())
            loop_thread = f"uvicorn-{bridge.rsplit(':', 1)[1]}"  # servers.serve names it so
    [content] = results(frames)
    assert content == expected
    assert SECRET not in content and content.count(MASK) == big.count(SECRET)
    assert requests[1]["messages"][-1]["content"] == content  # the same bytes upstream
    scanned = sum(length for length, _ in scans)
    assert size * 0.9 < scanned < size * 1.1  # once, not again as a frame
    assert max(length for length, _ in scans) < step + 1024  # a slice at a time
    assert loop_thread not in {name for length, name in scans if length > 10_000}


def test_a_result_with_a_lone_surrogate_is_sent_and_the_run_ends() -> None:
    """A lone surrogate cannot be written as UTF-8 (the frame's encoding failed and the client
    got a cut stream with no terminal event): it becomes U+FFFD."""

    def work(n: int) -> str:
        """Returns half of a surrogate pair."""
        return "before \ud800 after"

    upstream, requests = calling_upstream(1)
    with serve(upstream) as upstream_url:
        config = BridgeConfig(upstream_url=f"{upstream_url}/v1", model="m")
        with serve(create_app(config, tools=[work])) as bridge:
            frames = post(bridge, ask())
    assert results(frames) == ["before \ufffd after"]
    assert requests[1]["messages"][-1]["content"] == "before \ufffd after"
    assert frames[-1]["type"] == "RUN_FINISHED"


_PIECES = ["a", "b", " ", "\n", '"', "\\", "é", "\x01", "\ud800", SECRET[:9], SECRET[4:20], SECRET]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=120).map("".join))
def test_a_result_made_ready_in_slices_is_the_whole_text_redacted_and_encoded(text: str) -> None:
    """Cut anywhere, keys and pieces of keys anywhere (the slices are a few dozen characters
    here): the content is the whole text as the model reads it (a JSON string decoded), redacted
    (a lone surrogate as U+FFFD), the frame what the encoder writes for it."""
    redact = Redactor([SECRET]).redact
    event = ServerToolResult(message_id="m", tool_call_id="c", role="tool", content="")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tools_module, "_SLICE", 40)
        patch.setattr(tools_module, "BIG_RESULT", 10)
        ready = event.ready(text, redact)
    assert ready.content == redact(tool_result_text(text).replace("\ud800", "\ufffd"))
    plain = ToolCallResultEvent(
        message_id="m", tool_call_id="c", role="tool", content=ready.content
    )
    assert ready.frame == encode_event(plain)
