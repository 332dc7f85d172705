"""Issue 15: the aiohttp transport under httpx's API keeps what httpx's gave: error codes (see
tests/test_faults.py, run through both transports), the proxy environment variables, TLS
verification, no cap on connections, a bounded read buffer (tests/test_resilience.py)."""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import replace
from typing import Any

import aiohttp
import httpx
import pytest

from bridge.serve.http.app import create_app
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.sessions import AiohttpHeaders
from bridge.serve.upstream.transport import AiohttpClient, failure_kind
from servers import forward_proxy, post, run_input, scripted_config, scripted_stack, serve


def _wrapped(cause: BaseException, outer: type[httpx.HTTPError] = httpx.ConnectTimeout) -> Any:
    # httpx-aiohttp raises an httpx error "from" the aiohttp one, sometimes the wrong kind.
    error = outer("wrapped")
    error.__cause__ = cause
    return error


class _Key:
    host, port, is_ssl, ssl, proxy, proxy_auth, proxy_headers_hash = (
        "h",
        1,
        False,
        None,
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (_wrapped(aiohttp.ClientConnectorError(_Key(), OSError(111, "refused"))), "connect"),  # type: ignore[arg-type]
        (_wrapped(aiohttp.ConnectionTimeoutError()), "connect_timeout"),
        (_wrapped(aiohttp.SocketTimeoutError(), httpx.ReadTimeout), "read_timeout"),
        (_wrapped(aiohttp.ServerDisconnectedError()), "closed"),
        (_wrapped(aiohttp.ClientPayloadError("cut"), httpx.ReadError), "closed"),
        (aiohttp.ClientOSError(104, "reset"), "closed"),
        (TimeoutError(), "read_timeout"),
        (httpx.ConnectError("refused"), "connect"),
        (httpx.ConnectTimeout("slow"), "connect_timeout"),
        (httpx.ReadTimeout("silent"), "read_timeout"),
        (httpx.RemoteProtocolError("cut"), "closed"),
        (httpx.UnsupportedProtocol("ftp"), "other"),
    ],
)
def test_failure_kind_reads_the_transports_own_exception(exc: BaseException, kind: str) -> None:
    assert failure_kind(exc) == kind


async def _client_facts(client: UpstreamClient) -> tuple[int, ssl.SSLContext, int]:
    transport = client._client._transport.inner  # type: ignore[attr-defined]  # under _Yielding
    session = transport.get_client()  # type: ignore[attr-defined]
    try:
        return session.connector.limit, transport.ssl_context, session._read_bufsize  # type: ignore[attr-defined,union-attr]
    finally:
        await session.close()


def test_no_connection_cap_and_tls_verified() -> None:
    client = UpstreamClient(scripted_config("https://127.0.0.1:9"))
    assert isinstance(client._client, AiohttpClient)
    limit, context, bufsize = asyncio.run(_client_facts(client))
    asyncio.run(client.aclose())
    assert limit == 0  # aiohttp's default would queue the 101st stream
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert bufsize == 32 * 1024


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_the_proxy_environment_is_honoured(transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with forward_proxy() as (proxy_url, seen), scripted_stack() as stack:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        # The proxy notes the first request of a connection only: no GET /props before.
        config = replace(
            stack.config,
            upstream_transport=transport,  # type: ignore[arg-type]
            reasoning_scope="current-turn",
        )
        with serve(create_app(config)) as bridge:
            frames = post(f"{bridge}/", run_input())
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert any(line.startswith(f"POST {stack.upstream_url}/v1/chat/completions") for line in seen)


def test_headers_go_to_aiohttp_as_sent_each_repeated_one_made_once() -> None:
    """Issue 44: aiohttp's answer holds its request's headers for the stream's life, so what
    every request repeats is made once (names as aiohttp's own ``istr``); credentials, lengths
    and trace context are made per request and never kept; repeated names stay separate."""
    from multidict import istr

    sent = [
        ("User-Agent", "agui-bridge"),
        ("Authorization", "Bearer sk-1"),
        ("Api-Key", "azure-key-1"),
        ("X-Tag", "a"),
        ("x-tag", "b"),
        ("Content-Length", "12"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ]
    headers = AiohttpHeaders()
    first, second = headers.of(httpx.Headers(sent)), headers.of(httpx.Headers(sent))
    assert list(first.items()) == sent == list(second.items())
    assert all(type(name) is istr for name in first)
    assert first["User-Agent"] is second["User-Agent"]
    assert [first.getall("X-Tag")[i] is second.getall("X-Tag")[i] for i in (0, 1)] == [True] * 2
    alone = ("Authorization", "Api-Key", "Content-Length", "traceparent")
    assert [first[name] is second[name] for name in alone] == [False] * 4
    kept = {value for _, value in headers._pairs.values()}
    assert not kept & {"Bearer sk-1", "azure-key-1", "12"}


def test_a_callers_own_header_values_cannot_grow_what_is_kept() -> None:
    headers = AiohttpHeaders()
    for i in range(3 * AiohttpHeaders.LIMIT + 7):
        headers.of(httpx.Headers({f"X-Name-{i}": str(i)}))
        assert len(headers._pairs) <= AiohttpHeaders.LIMIT
        assert len(headers._names) <= AiohttpHeaders.LIMIT


def _ending_late(hold: float, peers: list[tuple[str, int]], ended: list[bool]) -> Any:
    """An upstream whose every answer ends its body ``hold`` seconds after its ``[DONE]``
    (``ended`` notes each end), noting the address each request came from (``peers``)."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    word = {**chunk, "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
    stop = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    frames = f"data: {json.dumps(word)}\n\ndata: {json.dumps(stop)}\n\ndata: [DONE]\n\n"

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":  # GET /props: none here
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        peers.append(tuple(scope["client"]))
        while (await receive()).get("more_body"):
            pass
        head = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": frames.encode(), "more_body": True})
        await asyncio.sleep(hold)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        ended.append(True)

    return upstream


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_body_that_ends_a_moment_after_its_answer_keeps_its_connection(transport: str) -> None:
    """A server whose body ends a read after ``[DONE]`` (as under load most do) has each run
    on the connection the first opened: closed at once, before its end, each run opened one."""
    peers: list[tuple[str, int]] = []
    with serve(_ending_late(0.02, peers, [])) as upstream:
        config = replace(scripted_config(upstream), upstream_transport=transport)  # type: ignore[arg-type]
        with serve(create_app(config)) as bridge:
            ends = [post(f"{bridge}/", run_input())[-1]["type"] for _ in range(4)]
    assert ends == ["RUN_FINISHED"] * 4
    assert len(peers) == 4 and len(set(peers)) == 1, peers


def test_a_body_held_open_after_its_answer_does_not_hold_the_run() -> None:
    """A server that holds its body open after ``[DONE]``: the run ends while it still holds
    it (the wait for its end is short), and the next run opens a connection of its own."""
    peers: list[tuple[str, int]] = []
    ended: list[bool] = []
    with (
        serve(_ending_late(3, peers, ended)) as upstream,
        serve(create_app(scripted_config(upstream))) as bridge,
    ):
        ends = [post(f"{bridge}/", run_input())[-1]["type"] for _ in range(2)]
        held = not ended
    assert ends == ["RUN_FINISHED"] * 2
    assert held  # both runs ended while their bodies were still open
    assert len(set(peers)) == 2, peers
