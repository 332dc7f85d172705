"""Issue 34: the upstream's event stream read as bytes, with no layer more than it needs.

- an answer of aiohttp's transport is read from aiohttp's own buffer: the private names this
  leans on (httpx's ``BoundAsyncStream._stream``, httpx-aiohttp's
  ``AiohttpResponseStream._aiohttp_response``) still hold, or this fails rather than the read
  path going slow unnoticed;
- anything else (httpx's transport, a compressed body, a recorded exchange) reads the same
  bytes through httpx's response API;
- an upstream that names a charset other than UTF-8 is read in it;
- middleware an application adds to the bridge's app sees the run's frames;
- a body read from aiohttp's buffer has aiohttp's read timeout (a timer re-armed on every read)
  off, and the bridge's own idle watch instead, which fails only a read that waits.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agui_rules import check_frames, parse_body
from bridge.cli.demo import create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.core.errors import UpstreamTimeoutError
from bridge.serve.http.app import create_app
from bridge.serve.upstream.body import IDLE_MESSAGE, Body, IdleWatch
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.transport import client_class
from servers import post, run_input, scripted_config, serve

CHUNKS = [
    {"choices": [{"index": 0, "delta": {"content": text}}]} for text in ("Grüße", " aus", " Köln")
]


def _body(charset: str = "utf-8") -> bytes:
    import json

    frames = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in CHUNKS]
    return ("".join(frames) + "data: [DONE]\n\n").encode(charset)


def _upstream() -> Starlette:
    async def sse(request: Request) -> Response:
        coding = request.query_params.get("coding")
        charset = request.query_params.get("charset", "utf-8")
        body = _body(charset)
        headers = {}
        if coding == "gzip":
            body, headers = gzip.compress(body), {"content-encoding": "gzip"}
        media = "text/event-stream" + (f"; charset={charset}" if charset != "utf-8" else "")

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 7):  # small writes: many reads
                yield body[start : start + 7]
                await anyio.sleep(0.005)  # the answer still coming as it is read

        return StreamingResponse(pieces(), media_type=media, headers=headers)

    return Starlette(routes=[Route("/v1/chat/completions", sse, methods=["POST", "GET"])])


async def _read(url: str, transport: str) -> tuple[bool, bytes]:
    """Whether ``Body`` reads aiohttp's buffer, and the bytes it read. Read so, it keeps its own
    idle timeout: aiohttp's timer is off and stays off to its end."""
    async with client_class(transport)() as client:  # type: ignore[arg-type]
        request = client.build_request("GET", url, timeout=httpx.Timeout(30.0))
        response = await client.send(request, stream=True)
        try:
            body = Body(response)
            read = getattr(body.read, "func", None)  # functools.partial(StreamReader.read, …)
            direct = getattr(read, "__self__", None).__class__.__name__ == "StreamReader"
            assert body.own_idle_timeout() is direct
            protocol = body._protocol
            pieces = []
            while piece := await body.read():
                pieces.append(piece)
                if direct:  # aiohttp's names for its read timer: a change fails here
                    assert protocol is not None
                    assert protocol.read_timeout is None
                    assert protocol._read_timeout_handle is None
            await body.aclose()
        finally:
            await response.aclose()
    return direct, b"".join(pieces)


@pytest.mark.parametrize(
    ("transport", "query", "direct"),
    [
        ("aiohttp", "", True),  # the path every token takes by default
        ("aiohttp", "?coding=gzip", False),  # decoded by httpx
        ("httpx", "", False),
        ("httpx", "?coding=gzip", False),
    ],
)
def test_the_body_is_read_from_aiohttps_buffer_when_it_can_be(
    transport: str, query: str, direct: bool
) -> None:
    with serve(_upstream()) as url:
        read_direct, data = anyio.run(_read, f"{url}/v1/chat/completions{query}", transport)
    assert read_direct is direct
    assert data == _body()  # the same bytes, decoded, either way


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
@pytest.mark.parametrize("charset", ["utf-8", "iso-8859-1"])
def test_an_event_stream_in_another_charset_is_read_in_it(transport: str, charset: str) -> None:
    async def chunks(url: str) -> list[Any]:
        config = BridgeConfig(upstream_url=f"{url}/v1", model="m", upstream_transport=transport)  # type: ignore[arg-type]
        client = UpstreamClient(config)
        try:
            body = {"model": "m", "messages": [], "stream": True}
            path = f"/chat/completions?charset={charset}"
            return [item async for item in client.stream(body, path)]
        finally:
            await client.aclose()

    with serve(_upstream()) as url:
        received = anyio.run(chunks, url)
    assert [c for c in received if c != "[DONE]"] == CHUNKS


class _CountBodies:
    """An application's own middleware, which reads every body message of every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.bodies: list[bytes] = []
        _CountBodies.last = self

    last: _CountBodies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counting(message: Message) -> None:
            if message["type"] == "http.response.body":
                self.bodies.append(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, counting)


def test_middleware_an_app_adds_sees_the_runs_frames() -> None:
    with serve(create_scripted_upstream()) as upstream_url:
        app = create_app(scripted_config(upstream_url))
        app.add_middleware(_CountBodies)
        with serve(app) as url:
            frames = post(url, run_input())
            seen = b"".join(_CountBodies.last.bodies).decode()
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert seen.count("data: ") == len(frames)


def test_a_runs_head_still_goes_through_the_bridges_cors() -> None:
    """The frames skip the app's own middleware; the head does not: CORS still answers."""
    with serve(create_scripted_upstream()) as upstream_url:
        app = create_app(scripted_config(upstream_url, cors_origins=("https://app.example",)))
        with serve(app) as url:
            response = httpx.post(
                url, json=run_input(), headers={"Origin": "https://app.example"}, timeout=30
            )
    assert response.headers["access-control-allow-origin"] == "https://app.example"
    frames = check_frames(parse_body(response.text))
    assert frames[-1]["type"] == "RUN_FINISHED"


class _Read:
    def __init__(self, waiting: float) -> None:
        self.waiting = waiting
        self.timed_out = 0
        self.failed: anyio.Event | None = None  # set at its first time out, when given

    def time_out(self) -> None:
        self.timed_out += 1
        if self.failed is not None:
            self.failed.set()


def test_the_idle_watch_fails_only_a_read_that_has_waited_its_timeout() -> None:
    async def watch() -> tuple[_Read, _Read, _Read]:
        # The timeout is far longer than the test (a loaded machine may hold this task for
        # a while): the read waiting since now must not reach it, the one waiting since long
        # before must, at one of the watch's looks (every timeout / 8).
        idle = IdleWatch(5.0)
        # Waiting since long ago; not waiting (its client is slow: the run is writing); waiting
        # since now, and its data comes in time.
        silent, writing, answered = _Read(time.monotonic() - 60), _Read(0.0), _Read(0.0)
        for read in (silent, writing, answered):
            idle.add(read)
        silent.failed = anyio.Event()
        answered.waiting = time.monotonic()
        with anyio.fail_after(30):
            await silent.failed.wait()
        answered.waiting = 0.0  # a piece arrived
        for read in (silent, writing, answered):
            idle.discard(read)
        return silent, writing, answered

    silent, writing, answered = anyio.run(watch)
    assert (silent.timed_out, writing.timed_out, answered.timed_out) == (1, 0, 0)


def test_an_upstream_silent_mid_answer_fails_on_the_bridges_own_idle_timeout() -> None:
    """aiohttp's read timeout is off for the body: the watch fails the read, as aiohttp would."""

    async def silent(request: Request) -> Response:
        async def pieces() -> AsyncIterator[bytes]:
            yield _body().split(b"\n\n")[0] + b"\n\n"
            await anyio.sleep(30)

        return StreamingResponse(pieces(), media_type="text/event-stream")

    async def stream(url: str) -> tuple[list[Any], BaseException | None, float]:
        config = BridgeConfig(upstream_url=f"{url}/v1", model="m", idle_timeout=0.3)
        client = UpstreamClient(config)
        taken: list[Any] = []
        began = time.monotonic()
        try:

            def take(chunk: Any) -> bool:
                taken.append(chunk)
                return False

            await client.stream_into({"model": "m"}, take)
        except UpstreamTimeoutError as exc:
            return taken, exc, time.monotonic() - began
        finally:
            await client.aclose()
        return taken, None, time.monotonic() - began

    app = Starlette(routes=[Route("/v1/chat/completions", silent, methods=["POST"])])
    with serve(app) as url:
        taken, error, seconds = anyio.run(stream, url)
    assert taken == CHUNKS[:1]
    assert error is not None and "sent nothing for 0.3 s" in str(error)
    assert str(error.__cause__) == IDLE_MESSAGE  # the bridge's watch, not aiohttp's timer
    assert 0.3 <= seconds < 2
