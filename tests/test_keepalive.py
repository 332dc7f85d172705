"""Issue 30: an upstream that says keep-alive but closes after each answer, as llama.cpp's
``llama-server`` does after a streamed one.

The server here is raw asyncio on 127.0.0.1 and makes the race certain: it answers the first
request of each connection (``Connection: keep-alive``, ``Keep-Alive: timeout=5, max=100``) and
closes the connection, unanswered, when a second request comes on it. A request sent on such a
pooled connection is sent again at once on a new one, made for it and not kept; that is no
retry of a failing server.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from bridge.cli.doctor import diagnose, probes
from bridge.config import BridgeConfig, UpstreamTransport
from bridge.core.errors import UpstreamConnectionError
from bridge.core.translate import DONE
from bridge.serve.redact import Redactor
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.record import Recorder
from helpers import CountedObservation
from servers import run_input

TRANSPORTS = ["aiohttp", "httpx"]
CLOSED = "closed the connection without answering"
WORDS = ["Hello", " there"]


class OneAnswerPerConnection:
    """The server, in a thread of its own: ``with OneAnswerPerConnection() as upstream:``.

    ``answers=False``: every connection, a new one too, is closed without an answer."""

    def __init__(self, *, answers: bool = True) -> None:
        self.answers = answers
        self.connections = 0  # accepted
        self.requests: list[str] = []  # "METHOD /path", as received
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._handlers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> OneAnswerPerConnection:
        self._thread.start()
        try:
            self._server = self._call(asyncio.start_server(self._accepted, "127.0.0.1", 0))
        except BaseException:
            self._stop_loop()
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._call(self._close())
        finally:
            self._stop_loop()

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        try:
            answered = False
            while (request := await _request_line(reader)) is not None:
                self.requests.append(request)
                if answered or not self.answers:
                    break  # llama-server serves no second request on a connection
                writer.write(_answer(*request.split(" ")))
                await writer.drain()
                answered = True
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)


async def _request_line(reader: asyncio.StreamReader) -> str | None:
    """``METHOD /path`` of the next request, its body read; ``None`` when the client closed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = next(
        (
            int(line.split(":", 1)[1])
            for line in lines
            if line.lower().startswith("content-length:")
        ),
        0,
    )
    await reader.readexactly(length)
    return f"{method} {path}"


def _answer(method: str, path: str) -> bytes:
    """What llama-server answers, each with its promise of keep-alive: a chat completion as a
    chunked event stream, the models list, ``/props``; a 404 for anything else."""
    path = path.partition("?")[0]
    if method == "POST" and path.endswith("/chat/completions"):
        body = b"".join(_chunked(_sse(chunk)) for chunk in _chunks())
        # [DONE] and the body's end in one write: the client has the whole answer at once.
        body += _chunked(_sse("[DONE]")) + b"0\r\n\r\n"
        return _head(200, "text/event-stream", "Transfer-Encoding: chunked") + body
    if method == "GET" and path.endswith("/models"):
        models = {"object": "list", "data": [{"id": "liar", "object": "model"}]}
        return _whole(200, models)
    if method == "GET" and path == "/props":
        return _whole(200, {"build_info": "b1-liar"})
    return _whole(404, {"error": {"code": 404, "message": "File Not Found"}})


def _chunks() -> Iterator[str]:
    for i, word in enumerate(WORDS):
        delta = {"role": "assistant", "content": word} if i == 0 else {"content": word}
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        yield json.dumps(
            {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}
        )
    finish = {"index": 0, "delta": {}, "finish_reason": "stop"}
    yield json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [finish]})


def _sse(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: int, content_type: str, framing: str) -> bytes:
    reason = {200: "OK", 404: "Not Found"}[status]
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n{framing}\r\n"
        "Connection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
    ).encode()


def _whole(status: int, data: dict[str, Any]) -> bytes:
    body = json.dumps(data).encode()
    return _head(status, "application/json", f"Content-Length: {len(body)}") + body


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def upstream() -> Iterator[OneAnswerPerConnection]:
    with OneAnswerPerConnection() as server:
        yield server


def _config(url: str, transport: UpstreamTransport, **overrides: Any) -> BridgeConfig:
    return BridgeConfig(upstream_url=url, model="liar", upstream_transport=transport, **overrides)


async def _streamed(client: UpstreamClient, observe: CountedObservation | None = None) -> str:
    body = {"model": "liar", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    text = ""
    async for chunk in client.stream(body, observe=observe):  # type: ignore[arg-type]
        if chunk == DONE:
            continue
        assert isinstance(chunk, dict)
        text += "".join(c["delta"].get("content") or "" for c in chunk["choices"])
    return text


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_streams_back_to_back_need_no_retry(
    upstream: OneAnswerPerConnection, transport: UpstreamTransport
) -> None:
    client = UpstreamClient(_config(upstream.url, transport, retries=0))
    try:
        texts = [await _streamed(client) for _ in range(4)]
    finally:
        await client.aclose()
    assert texts == ["".join(WORDS)] * 4
    # The second and fourth went out on the pooled connection, were closed unanswered and were
    # sent again on a connection made for the resend, which is not kept: the third found the
    # pool empty and made one of its own.
    assert upstream.requests == ["POST /v1/chat/completions"] * 6
    assert upstream.connections == 4


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_resend_is_no_retry(
    upstream: OneAnswerPerConnection, transport: UpstreamTransport
) -> None:
    client = UpstreamClient(_config(upstream.url, transport, retries=2))
    observations = [CountedObservation() for _ in range(3)]
    try:
        for observe in observations:
            assert await _streamed(client, observe) == "".join(WORDS)
    finally:
        await client.aclose()
    assert [(o.statuses, o.retries) for o in observations] == [([200], 0)] * 3
    # The second met the pooled connection closed and was resent (counted once); the resend's
    # connection is not kept, so the third made one of its own.
    assert [o.resends for o in observations] == [0, 1, 0]
    assert upstream.connections == 3


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_that_never_answers_still_fails_after_its_retries(
    transport: UpstreamTransport,
) -> None:
    with OneAnswerPerConnection(answers=False) as upstream:
        config = _config(upstream.url, transport, retries=2, retry_backoff=0.001)
        client = UpstreamClient(config)
        observe = CountedObservation()
        try:
            with pytest.raises(UpstreamConnectionError, match=CLOSED) as failed:
                await _streamed(client, observe)
        finally:
            await client.aclose()
    assert failed.value.reason == "closed"
    assert (observe.statuses, observe.retries) == ([], 2)
    # Each attempt on a new connection (the one before closed unanswered): no resend at once.
    assert upstream.connections == 3
    assert upstream.requests == ["POST /v1/chat/completions"] * 3


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_record_shows_one_exchange_per_request(
    upstream: OneAnswerPerConnection, transport: UpstreamTransport, tmp_path: Path
) -> None:
    config = _config(upstream.url, transport, retries=1, retry_backoff=0.001)
    recorder = Recorder(tmp_path, config, Redactor([]))
    client = UpstreamClient(config, wrap=recorder.wrap)
    try:
        with recorder.run(RunAgentInput.model_validate(run_input())):
            for _ in range(2):
                assert await _streamed(client) == "".join(WORDS)
    finally:
        await client.aclose()
    exchanges = [
        (line["type"], line["exchange"]) for line in _record(tmp_path) if "exchange" in line
    ]
    # The closed connection was the pool's, not the upstream's answer: a replay must not see it.
    assert [(kind, n) for kind, n in exchanges if kind != "read"] == [
        ("request", 1),
        ("response", 1),
        ("end", 1),
        ("request", 2),
        ("response", 2),
        ("end", 2),
    ]
    assert upstream.requests == ["POST /v1/chat/completions"] * 3


def _record(folder: Path) -> list[dict[str, Any]]:
    """The lines of the one run recorded in ``folder``."""
    (path,) = folder.iterdir()
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_doctor_probes_after_streamed_answers(
    upstream: OneAnswerPerConnection, transport: UpstreamTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = probes._config  # the doctor's settings (retries=0) on the transport under test
    monkeypatch.setattr(
        probes, "_config", lambda *args: replace(made(*args), upstream_transport=transport)
    )
    report = asyncio.run(diagnose(upstream.url))
    failures = [probe for probe in report["probes"] if not probe["ok"]]
    assert not [probe for probe in failures if CLOSED in probe["message"]], failures
    assert report["usable"] is True and report["model"] == "liar"
    assert report["server"] == "llama.cpp (build b1-liar)"  # GET /props, after GET /models
    assert report["responses_api"] is False  # POST /responses: 404
    assert [probe["probe"] for probe in report["probes"]][:5] == [
        "models",
        "plain",
        "tools",
        "tools_forced",  # the answer had no call: asked again with tool_choice required
        "responses",
    ]
