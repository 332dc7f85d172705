"""The servers the HTTP benchmarks run, each an app factory for ``uvicorn --factory``.

``upstream``: a fake OpenAI-compatible server. ``POST /v1/chat/completions`` reads its orders
from the last message's content (JSON). ``{"variant": "mixed"|"content", "chunks": N,
"block": B}`` streams N pre-encoded chunks as fast as it can, in writes of about B bytes (0: a
write per frame); ``{"rate": r, "tokens": n}`` streams n content chunks at r per second, each
carrying its send time (``time.time_ns()``) as ``ts<19 digits>`` in its text.

``proxy``: a pass-through that forwards the request to the upstream with httpx and streams its
bytes back unparsed (the baseline). ``relay``: the least a Python relay on this stack does per
token, for reference: aiohttp's buffer read (``readany``) handed to the server's ``send`` as
raw ASGI, nothing parsed, no framework. ``bridge``: ``bridge.serve.http.app.create_app``
pointed at the upstream (``profiled_bridge``: the same under cProfile, for profile_bridge.py).
All read the upstream's URL from ``BENCH_UPSTREAM_URL``: uvicorn's ``--workers`` starts fresh
interpreters, so a factory's arguments can only come from the environment.

``scripted_upstream``: the demo's scripted model; ``shared_state_bridge``: the bridge before it
with ``--shared-state``, as ``agui-bridge demo`` serves it.

``otlp_sink``: an OTLP/HTTP trace receiver that counts what it is sent (``POST /v1/traces``,
answered 200 with an empty body; ``GET /count``), for observability.py's traced bridge.
"""

from __future__ import annotations

import _lsprof
import asyncio
import gzip
import itertools
import json
import logging
import os
import sys
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from translate import Stream, _chunk, _to_sse, _tokens, build_stream

from bridge import DONE
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app

UPSTREAM_URL_ENV = "BENCH_UPSTREAM_URL"
MAX_RUNS_ENV = "BENCH_MAX_RUNS"
PROFILE_OUT_ENV = "BENCH_PROFILE_OUT"
TRANSPORT_ENV = "BENCH_UPSTREAM_TRANSPORT"  # the bridge's --upstream-transport
API_KEY_ENV = "BENCH_API_KEY"  # a key for the bridge: every event it sends is redacted of it
METRICS_ENV = "BENCH_METRICS"  # "1": the bridge's --metrics (GET /metrics)
OTEL_ENV = "BENCH_OTEL"  # "1": the bridge's --otel (the exporter follows the OTEL_* variables)
RUN_LOG_ENV = "BENCH_RUN_LOG"  # "1": the run line (logger agui_bridge.runs) on, as serve has it
THREADS_ENV = "BENCH_THREADS"  # the bridge's --threads (memory, redis://…); unset: none kept
MODEL = "bench-model-8b"
VARIANTS = ("content", "mixed")
#: The fast upstream's default write size: in blocks of frames it is never what limits the
#: bridge or the proxy. Real servers write a frame per token (``block`` 0), but never at 100k
#: tokens/s.
WRITE_BLOCK = 16 * 1024
TIMESTAMP_PREFIX = b"ts"  # then time.time_ns() in 19 digits
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


# -- the streams -----------------------------------------------------------------------------
@cache
def fast_stream(variant: str, chunks: int) -> Stream:
    """``mixed``: translate.py's synthetic stream (reasoning_content, content, three parallel
    interleaved tool calls, usage); ``content``: a role chunk, content tokens, finish, usage."""
    if variant == "mixed":
        return build_stream("field", chunks)
    if variant != "content":
        raise ValueError(f"unknown variant {variant!r}")
    tokens = _tokens(chunks - 4, offset=3)
    usage = {
        "prompt_tokens": 512,
        "completion_tokens": len(tokens),
        "total_tokens": 512 + len(tokens),
    }
    body: list[dict[str, Any] | str] = [
        _chunk({"role": "assistant", "content": ""}),
        *(_chunk({"content": token}) for token in tokens),
        _chunk({}, finish_reason="stop"),
        {**_chunk({}), "choices": [], "usage": usage},
        DONE,
    ]
    return Stream(
        variant=variant,
        chunks=body,
        sse=_to_sse(body),
        reasoning="",
        text="".join(tokens),
        arguments={},
    )


@cache
def _blocks(variant: str, chunks: int, block: int) -> list[bytes]:
    sse = fast_stream(variant, chunks).sse
    blocks: list[bytes] = []
    start = 0
    while start < len(sse):
        end = sse.find(b"\n\n", start + max(block - 2, 0))
        end = len(sse) if end < 0 else end + 2
        blocks.append(sse[start:end])
        start = end
    return blocks


def _frame(chunk: dict[str, Any] | str) -> bytes:
    data = chunk if isinstance(chunk, str) else json.dumps(chunk, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


_ROLE = _frame(_chunk({"role": "assistant", "content": ""}))
_FINISH = _frame(_chunk({}, finish_reason="stop")) + _frame(DONE)
_COMMENT = b": keep-alive\n\n"  # what servers send in a silence (an SSE comment)
_TOKEN_HEAD, _TOKEN_TAIL = _frame(_chunk({"content": "@TS@"})).split(b"@TS@")


def token_frame(sent_ns: int) -> bytes:
    return b"".join((_TOKEN_HEAD, TIMESTAMP_PREFIX, b"%d " % sent_ns, _TOKEN_TAIL))


# -- the upstream ----------------------------------------------------------------------------
def upstream() -> Any:
    """Raw ASGI, so that the upstream costs as little as possible."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] == "/health":
            await _respond(send, 200, b'{"status":"ok"}')
            return
        if scope["path"] != "/v1/chat/completions" or scope["method"] != "POST":
            await _respond(send, 404, b'{"error":{"message":"not found"}}')
            return
        orders = _orders(await _read_body(receive))
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        if "idle" in orders:
            await _idle(send, float(orders["idle"]), float(orders["keepalive"]))
        elif "rate" in orders:
            await _paced(send, float(orders["rate"]), int(orders["tokens"]))
        else:
            for block in _blocks(orders["variant"], int(orders["chunks"]), int(orders["block"])):
                await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def _orders(raw: bytes) -> dict[str, Any]:
    content = json.loads(raw)["messages"][-1]["content"]
    orders: dict[str, Any] = json.loads(content)
    return orders


async def _paced(send: Send, rate: float, tokens: int) -> None:
    """``tokens`` chunks on a fixed schedule (no drift: each waits for its own time)."""
    await send({"type": "http.response.body", "body": _ROLE, "more_body": True})
    start = time.monotonic()
    for number in range(tokens):
        delay = start + (number + 1) / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        body = token_frame(time.time_ns())
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": _FINISH, "more_body": True})


async def _idle(send: Send, seconds: float, keepalive: float) -> None:
    """Nothing but an SSE comment every ``keepalive`` seconds for ``seconds``, then one token:
    a model that thinks (or waits in a queue) before it answers, as servers keep such a stream
    alive (idle_streams.py)."""
    await send({"type": "http.response.body", "body": _ROLE, "more_body": True})
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(keepalive, left))
        if end - time.monotonic() > 0:
            await send({"type": "http.response.body", "body": _COMMENT, "more_body": True})
    body = token_frame(time.time_ns())
    await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": _FINISH, "more_body": True})


async def _read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


async def _respond(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the pass-through proxy and the bridge ---------------------------------------------------
def proxy() -> Starlette:
    """Forwards ``POST /`` (a chat completion body) to the upstream, bytes unparsed."""
    target = f"{os.environ[UPSTREAM_URL_ENV]}/v1/chat/completions"
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(30.0, read=300.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
    )

    async def forward(request: Request) -> Response:
        upstream_request = client.build_request(
            "POST",
            target,
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        response = await client.send(upstream_request, stream=True)
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            media_type=response.headers.get("content-type"),
            background=BackgroundTask(response.aclose),
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    return Starlette(
        routes=[Route("/", forward, methods=["POST"]), Route("/health", health)],
        lifespan=lifespan,
    )


def relay() -> ASGIApp:
    """``POST /``: the upstream's answer relayed as it arrives: aiohttp's buffer to the server's
    ``send``, nothing parsed, no framework (the floor the bridge's read and write paths sit on)."""
    import aiohttp

    target = f"{os.environ[UPSTREAM_URL_ENV]}/v1/chat/completions"
    sessions: list[aiohttp.ClientSession] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            for session in sessions:
                await session.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] == "/health":
            await _respond(send, 200, b"{}")
            return
        body = await _read_body(receive)
        if not sessions:
            sessions.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        headers = {"content-type": "application/json"}
        async with sessions[0].post(target, data=body, headers=headers) as response:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            while piece := await response.content.readany():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def bridge() -> Starlette:
    config = BridgeConfig(
        upstream_url=f"{os.environ[UPSTREAM_URL_ENV]}/v1",
        model=MODEL,
        max_concurrent_runs=int(os.environ.get(MAX_RUNS_ENV, "512")),
        upstream_transport=os.environ.get(TRANSPORT_ENV, "aiohttp"),  # type: ignore[arg-type]
        api_key=os.environ.get(API_KEY_ENV) or None,
        metrics=os.environ.get(METRICS_ENV) == "1",
        otel=os.environ.get(OTEL_ENV) == "1",
        threads=os.environ.get(THREADS_ENV) or None,
    )
    if os.environ.get(RUN_LOG_ENV) == "1":
        # What `agui-bridge serve` sets up: the bridge's loggers at INFO on stderr (here the
        # harness's log file), so that every run writes its line.
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        logger = logging.getLogger("agui_bridge")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return create_app(config)


def scripted_upstream() -> Starlette:
    """The demo's scripted model (``agui-bridge scripted-upstream``): what a user types goes to
    it, "… patch: [ … ]" included (state_patch_stall.py)."""
    return create_scripted_upstream()


def shared_state_bridge() -> Starlette:
    """The bridge with ``--shared-state`` before the scripted model, as ``agui-bridge demo``
    serves it."""
    config = BridgeConfig(
        upstream_url=f"{os.environ[UPSTREAM_URL_ENV]}/v1",
        model=DEFAULT_SCRIPTED_MODEL,
        shared_state=True,
        tool_timeout=300,  # the patch before the change took seconds: let it finish
    )
    return create_app(config)


def pydantic_ai() -> Starlette:
    """The peer users would pick: pydantic-ai's AG-UI adapter (``AGUIAdapter``) over its
    OpenAI chat model pointed at the same upstream, streaming. An optional install, for the
    benchmark only: ``pip install 'pydantic-ai-slim[ag-ui,openai]'``."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    provider = OpenAIProvider(base_url=f"{os.environ[UPSTREAM_URL_ENV]}/v1", api_key="bench")
    agent = Agent(OpenAIChatModel(MODEL, provider=provider))

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/", run, methods=["POST"]), Route("/health", health)])


def otlp_sink() -> Any:
    """Accepts OTLP/HTTP trace exports (protobuf, gzip or deflate) at ``POST /v1/traces`` and
    answers 200 with an empty body (an empty ``ExportTraceServiceResponse``); counts the exports
    and the spans in them: ``GET /count`` → ``{"exports": n, "spans": n}``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    counts = {"exports": 0, "spans": 0}
    decompress = {"": bytes, "gzip": gzip.decompress, "deflate": zlib.decompress}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path, method = scope["path"], scope["method"]
        if path == "/health":
            await _respond(send, 200, b'{"status":"ok"}')
        elif path == "/count":
            await _respond(send, 200, json.dumps(counts).encode())
        elif path == "/v1/traces" and method == "POST":
            headers = dict(scope["headers"])
            encoding = headers.get(b"content-encoding", b"").decode().strip().lower()
            body = decompress[encoding](await _read_body(receive))
            export = ExportTraceServiceRequest.FromString(body)
            counts["exports"] += 1
            counts["spans"] += sum(
                len(scoped.spans) for spans in export.resource_spans for scoped in spans.scope_spans
            )
            headers_out = [(b"content-type", b"application/x-protobuf")]
            await send({"type": "http.response.start", "status": 200, "headers": headers_out})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _respond(send, 404, b'{"error":{"message":"not found"}}')

    return app


def profiled_bridge() -> Any:
    """The bridge in a process run under ``python -m cProfile``: ``POST /profile/start`` forgets
    what was counted so far (start-up, warm-up), ``POST /profile/stop`` writes the stats to the
    file named by ``BENCH_PROFILE_OUT``.

    The profiler must be on before the event loop starts: CPython 3.11 marks only the calling
    C frame as traced, so a profiler switched on inside a request never sees the other tasks.
    """
    inner = bridge()
    # Its class is __main__.Profile (cProfile runs as __main__), a subclass of _lsprof.Profiler.
    active = sys.getprofile()
    if not isinstance(active, _lsprof.Profiler):
        raise RuntimeError("run this app under python -m cProfile")
    profiler: Any = active
    out = os.environ[PROFILE_OUT_ENV]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        if scope["type"] == "http" and path in ("/profile/start", "/profile/stop"):
            if path == "/profile/start":
                profiler.clear()
            else:
                profiler.disable()
                profiler.dump_stats(out)
            await _respond(send, 200, b'{"status":"ok"}')
            return
        await inner(scope, receive, send)

    return app


# -- what clients send -----------------------------------------------------------------------
_RUNS = itertools.count()


def run_input(orders: dict[str, Any], run: int | None = None) -> dict[str, Any]:
    """A RunAgentInput for the bridge whose user message carries the upstream's orders; each a
    run and a thread of its own unless ``run`` is given (a bridge keeping threads refuses a
    second run of an id that goes on)."""
    number = next(_RUNS) if run is None else run
    return {
        "threadId": f"bench-thread-{number}",
        "runId": f"bench-run-{number}",
        "messages": [{"id": "u", "role": "user", "content": json.dumps(orders)}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


def chat_body(orders: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body for the proxy (or the upstream itself) with the same orders."""
    return {
        "model": MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": json.dumps(orders)}],
    }
