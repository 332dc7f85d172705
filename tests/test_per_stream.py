"""What an open stream holds for its life (issue 44): nothing bigger than it needs to be, and
nothing made per stream that every stream could share."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest

from bridge.config import BridgeConfig
from bridge.core.markers import marker_set
from bridge.core.reasoning_tags import ReasoningTagFilter
from bridge.core.text_tools.filter import TextToolCalls
from bridge.serve.http import app as app_module
from bridge.serve.http.app import create_app
from bridge.serve.http.runs import run
from bridge.serve.http.stream import EventStreamResponse
from bridge.serve.upstream.client import request_body
from faulty_upstream import fault_model, faulty_upstream
from servers import LoopProbe, run_input, serve


def _held_bytes(make: object) -> int:
    """The bytes still allocated after ``make()``, its result kept."""
    assert callable(make)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = make()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return after - before


def test_the_upstream_request_body_holds_its_size_not_its_encoders_buffer() -> None:
    small = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    big = {**small, "messages": [{"role": "user", "content": "x" * 100_000}]}
    for body in (small, big):
        data = request_body(body)
        # orjson's own bytes keep the buffer they were written in: 4 KiB for a small body,
        # ten times the size of one of 100 KiB.
        assert _held_bytes(lambda body=body: request_body(body)) < len(data) + 256


def test_every_streams_filters_share_the_markers_they_look_for() -> None:
    """The reasoning-tag filter's and the text tool parsers' marker sets are made once per set
    of markers, not once per stream (they were 1.5 and 0.9 KiB a stream)."""
    assert marker_set(["<think>", "</think>"]) is marker_set(("<think>", "</think>"))
    ReasoningTagFilter(), TextToolCalls()  # what is made once, made
    reasoning = _held_bytes(lambda: [ReasoningTagFilter() for _ in range(100)]) / 100
    tools = _held_bytes(lambda: [TextToolCalls() for _ in range(100)]) / 100
    assert reasoning < 512  # 1,534 bytes each with sets of their own
    assert tools < 1536  # 2,064


# -- streams whose upstream is silent --------------------------------------------------------

STREAMS = 12
#: A keep-alive comment's send: a task that lives until the comment is written.
KEEPALIVE_SEND = "EventStreamResponse._send_keep_alive"
KEEPALIVE = 0.25


#: A first chunk, then nothing until the client leaves: a model that thinks for minutes.
SILENT = fault_model("silence", k=1)


@contextmanager
def _silent_bridge() -> Iterator[tuple[LoopProbe, str]]:
    """A bridge whose upstream is ``SILENT``, served on the stdlib's loop (whose timers a test
    can count): the probe of its loop, and its URL."""
    with faulty_upstream() as upstream:
        config = BridgeConfig(upstream_url=upstream.url, model=SILENT, keepalive_interval=KEEPALIVE)
        app = LoopProbe(create_app(config))
        with serve(app, loop="asyncio") as url:
            yield app, url


def _tasks_and_timers() -> tuple[int, int]:
    """The running loop's tasks (not the caller's, nor a keep-alive comment's send a tick may
    have just begun) and its timers (the stdlib's loop: its timers can be seen)."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, asyncio.BaseEventLoop)
    timers = [t for t in loop._scheduled if not t.cancelled()]
    tasks = [
        t
        for t in asyncio.all_tasks()
        if t is not asyncio.current_task()
        and getattr(t.get_coro(), "__qualname__", "") != KEEPALIVE_SEND
    ]
    return len(tasks), len(timers)


class _Streams:
    """Streams of the bridge's, each counting its keep-alive comments; ``kept`` is set once
    every stream opened has had two."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url, self.client = url, client
        self.comments: list[int] = []
        self.kept = anyio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def open(self, count: int) -> None:
        first = len(self.comments)
        self.comments += [0] * count
        self.kept = anyio.Event()
        self.tasks += [asyncio.create_task(self._stream(first + i)) for i in range(count)]

    async def _stream(self, i: int) -> None:
        body = run_input([{"id": "u", "role": "user", "content": "think"}])
        async with self.client.stream("POST", f"{self.url}/", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith(": keep-alive"):
                    self.comments[i] += 1
                    if min(self.comments) >= 2:
                        self.kept.set()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.mark.anyio
async def test_a_silent_stream_holds_no_timer_and_one_task_of_its_own() -> None:
    """While their upstream says nothing, open streams cost no timer each (one keep-alive timer
    serves them all) and one task each beside the request's, which makes the frames (the watch
    for its client leaving); each still gets its keep-alive comments."""
    with _silent_bridge() as (app, url):
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64)) as c:
            streams = _Streams(url, c)
            streams.open(1)  # the app's lazy start-up (its upstream client, its watches)
            with anyio.fail_after(20):
                await streams.kept.wait()
            tasks_one, timers_one = app.call(_tasks_and_timers)
            streams.open(STREAMS)
            with anyio.fail_after(20):
                await streams.kept.wait()  # every stream open, and kept alive
            tasks_all, timers_all = app.call(_tasks_and_timers)
            await streams.close()
    assert (tasks_all - tasks_one) / STREAMS <= 2  # the request's (its frames), the watch
    assert timers_all - timers_one <= 1  # a keep-alive send may be between two ticks


def _coroutines(task: asyncio.Task[Any]) -> Iterator[Any]:
    """The coroutines a task waits in, outermost first."""
    coro: Any = task.get_coro()
    while coro is not None and hasattr(coro, "cr_code"):
        yield coro
        coro = coro.cr_await


def _chain(task: asyncio.Task[Any]) -> list[str]:
    """The modules and names of the coroutines a task waits in, outermost first."""
    return [
        f"{c.cr_frame.f_globals.get('__name__')}.{c.cr_code.co_qualname}" for c in _coroutines(task)
    ]


def _request_chains() -> list[list[str]]:
    chains = [_chain(task) for task in asyncio.all_tasks()]
    return [
        chain for chain in chains if any("EventStreamResponse.__call__" in name for name in chain)
    ]


@pytest.mark.anyio
async def test_a_runs_request_waits_in_no_starlette_layer_and_five_frames_of_ours() -> None:
    """With no middleware, a run's request goes straight to its route: the task that waits
    for the whole stream holds none of Starlette's error and exception middleware's and
    router's frames, and five of the bridge's (the app, the response, the run, its turn, the
    read), each resumed at every token."""
    with _silent_bridge() as (app, url):
        async with httpx.AsyncClient(timeout=30) as client:
            streams = _Streams(url, client)
            streams.open(1)
            with anyio.fail_after(20):
                await streams.kept.wait()
            chains = app.call(_request_chains)
            await streams.close()
    assert len(chains) == 1
    assert not [name for name in chains[0] if name.startswith("starlette.")], chains[0]
    # And in no more frames of the bridge's than it needs: each is resumed at every token.
    assert [name for name in chains[0] if name.startswith("bridge.")] == [
        "bridge.serve.http.app.BridgeApp.__call__",
        "bridge.serve.http.stream.EventStreamResponse.__call__",
        "bridge.serve.run.loop._run",
        "bridge.serve.run.turn.Turn.run",
        "bridge.serve.upstream.client.UpstreamClient.stream_into",
    ]


def test_a_run_that_fails_unexpectedly_is_answered_500(monkeypatch: pytest.MonkeyPatch) -> None:
    """Straight to its route, a run that raises what nobody expected is still answered 500
    (by the server, as Starlette's error middleware would), and the next one is served."""
    calls = []

    async def broken(bridge: Any, request: Any) -> Any:
        calls.append(request)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return await run(bridge, request)

    monkeypatch.setattr(app_module, "run", broken)
    with _silent_bridge() as (_, url):
        body = run_input([{"id": "u", "role": "user", "content": "hi"}])
        assert httpx.post(f"{url}/", json=body, timeout=10).status_code == 500
        with httpx.stream("POST", f"{url}/", json=body, timeout=10) as response:
            assert response.status_code == 200


def _held_for_open_streams() -> dict[str, Any]:
    """What the open streams hold: httpx's requests and responses to the upstream, the tool
    loops and the run inputs with their conversation alive in the process (the test's own
    client's requests, to the bridge, aside), and the upstream read's last chunk, per stream."""
    import gc

    import aiohttp
    from ag_ui.core import RunAgentInput

    from bridge.serve.run.loop import ToolLoop

    def upstream(request: httpx.Request) -> bool:
        return request.url.path.endswith("/chat/completions")

    gc.collect()
    counts = {"httpx.Request": 0, "httpx.Response": 0, "ToolLoop": 0, "conversation": 0}
    counts["producer"] = 0  # a response still holding what made its frames' coroutine
    agents: set[int] = set()  # the user-agent values the open answers' requests hold
    for thing in gc.get_objects():
        if isinstance(thing, aiohttp.ClientResponse) and not thing.closed:
            agents |= {id(v) for k, v in thing.request_info.headers.items() if k == "User-Agent"}
        if isinstance(thing, httpx.Request) and upstream(thing):
            counts["httpx.Request"] += 1
        elif isinstance(thing, httpx.Response) and upstream(thing.request):
            counts["httpx.Response"] += 1
        elif isinstance(thing, ToolLoop):
            counts["ToolLoop"] += 1
        elif isinstance(thing, RunAgentInput) and thing.messages:
            counts["conversation"] += 1
        elif isinstance(thing, EventStreamResponse) and thing._produce is not None:
            counts["producer"] += 1
    reads = []
    for task in asyncio.all_tasks():
        for coro in _coroutines(task):
            if coro.cr_code.co_name == "stream_into":
                reads.append({k: coro.cr_frame.f_locals.get(k) for k in ("item", "data", "piece")})
    return {**counts, "reads": reads, "user-agents": len(agents)}


@pytest.mark.anyio
async def test_an_open_stream_holds_no_httpx_message_tool_loop_input_last_chunk_nor_own_headers() -> (
    None
):
    """While the upstream is silent after its first chunk, each open stream holds aiohttp's
    answer alone (not httpx's request and response over it); when the bridge has no server
    tools, no tool loop (its request builders went with the first request) and no validated
    conversation (the run keeps its input's ids); and not the chunk it read last while it
    waits for the next; and the headers every request repeats made once, not once a stream
    (aiohttp's answer holds its request's headers for its life)."""
    with _silent_bridge() as (app, url):
        # What the process holds already (earlier tests' objects, in the same process).
        before = app.call(_held_for_open_streams)
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64)) as c:
            streams = _Streams(url, c)
            streams.open(STREAMS)
            with anyio.fail_after(20):
                await streams.kept.wait()
            held = app.call(_held_for_open_streams)
            await streams.close()
    assert len(held["reads"]) == STREAMS  # every stream waits on its upstream's next read
    kept = ("httpx.Request", "httpx.Response", "ToolLoop", "conversation", "producer")
    assert [held[name] - before[name] <= 0 for name in kept] == [True] * len(kept), held
    assert all(read == {"item": None, "data": b"", "piece": b""} for read in held["reads"]), held
    assert held["user-agents"] == 1, held  # one per stream: 12
