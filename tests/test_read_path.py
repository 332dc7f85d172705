"""Issue 34: the upstream's event stream read as bytes, with no layer more than it needs.

- an answer of aiohttp's transport is read from aiohttp's own buffer: the private names this
  leans on (httpx's ``BoundAsyncStream._stream``, httpx-aiohttp's
  ``AiohttpResponseStream._aiohttp_response``) still hold, or this fails rather than the read
  path going slow unnoticed;
- anything else (httpx's transport, a compressed body, a recorded exchange) reads the same
  bytes through httpx's response API;
- an upstream that names a charset other than UTF-8 is read in it;
- middleware an application adds to the bridge's app sees the run's frames.
"""

from __future__ import annotations

import gzip
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
from bridge.serve.http.app import create_app
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.transport import Body, client_class
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

        return StreamingResponse(pieces(), media_type=media, headers=headers)

    return Starlette(routes=[Route("/v1/chat/completions", sse, methods=["POST", "GET"])])


async def _read(url: str, transport: str) -> tuple[bool, bytes]:
    """Whether ``Body`` reads aiohttp's buffer, and the bytes it read."""
    async with client_class(transport)() as client:  # type: ignore[call-arg]
        request = client.build_request("GET", url)
        response = await client.send(request, stream=True)
        try:
            body = Body(response)
            read = getattr(body.read, "func", None)  # functools.partial(StreamReader.read, …)
            direct = getattr(read, "__self__", None).__class__.__name__ == "StreamReader"
            pieces = []
            while piece := await body.read():
                pieces.append(piece)
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
