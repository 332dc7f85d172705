"""A real misbehaving OpenAI-compatible upstream: raw asyncio TCP on 127.0.0.1, so every byte,
every pause and every close is the test's to choose.

The bridge forwards only ``model`` (and allow-listed sampling fields), so the fault rides in the
model name: ``fault_model("cut", k=7)`` is ``"fault:cut:k=7"``. ``k`` is the index of the frame
where the fault strikes, among the chunks of ``stream_chunks()`` followed by ``[DONE]``: frames
``0 … k-1`` go out whole first (``k = FRAMES`` strikes after ``[DONE]``).

Stream modes (HTTP 200, ``text/event-stream``, chunked):
  ``ok``        the whole stream, ``[DONE]``, and the connection kept for the next request
  ``cut``       half of chunk ``k``, then the connection closed (no final HTTP chunk)
  ``eof``       a close-delimited body: half of chunk ``k``, then a clean EOF
  ``reset``     chunk ``k`` never comes: the connection is reset (RST)
  ``silence``   nothing more, the connection held open until the client leaves
  ``error``     ``{"error": {"message", "type", "code"}}`` in place of chunk ``k``
  ``malformed`` a data line that is not JSON in place of chunk ``k``
  ``longline``  a valid chunk whose line is ``line`` bytes long, in place of chunk ``k``
Before streaming:
  ``status``    HTTP ``code`` with a ``body`` of ``json``, ``html`` or ``empty``, ``retry_after``
                if given, a ``long`` message if asked; with ``times=n`` only the first n
                requests for that model fail (then it streams as ``ok``)
  ``html``      HTTP 200 with ``text/html``
  ``hang``      no answer at all, until the client leaves
  ``drop``      the connection closed without an answer (with ``times`` as for ``status``)
Any mode takes ``n`` (text chunks in the stream), ``delay`` (seconds between chunks), ``wait``
(silence before the first chunk), ``width`` (each text chunk that many characters, its token
repeated), ``joined=1`` (the frames before the fault and the fault in one
write, so the bridge reads them in one piece) and ``sndbuf`` (the socket's send buffer).
Anything but a POST (the bridge's ``GET /props``, say) gets HTTP 404 on a connection then
closed, and is not noted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from http import HTTPStatus
from typing import Any, TypeVar

REASONING = ["The user", " wants", " the weather", " in Paris;", " I should", " call", " the tool."]
TEXT = ["Let me", " check", " the weather", " in Paris", " for you", "."]
TOOL_ARGS = ['{"ci', 'ty": ', '"Par', 'is"}']
TOOL_NAME = "get_weather"
UPSTREAM_ERROR = "the model server ran out of memory (CUDA error 2) while generating"
HTML_PAGE = (
    "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"
)

T = TypeVar("T")


@dataclass(frozen=True)
class Plan:
    """What the upstream does with one request, read from its model name."""

    mode: str = "ok"
    k: int = 0
    n: int = len(TEXT)
    delay: float = 0.0
    wait: float = 0.0
    line: int = 8192
    code: int = 500
    body: str = "json"
    long: int = 0  # the error message's length, when a long one is wanted
    retry_after: str = ""
    times: int = 0
    sndbuf: int = 0
    joined: int = 0  # 1: everything up to the fault in one write (one read for the bridge)
    width: int = 0  # each text chunk this many characters (0: the tokens as they are)

    @classmethod
    def parse(cls, model: str) -> Plan:
        head, mode, *params = model.split(":")
        if head != "fault":
            raise ValueError(f"not a fault model: {model!r}")
        types = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for param in params:
            key, _, raw = param.partition("=")
            kind = types[key]
            values[key] = int(raw) if kind == "int" else float(raw) if kind == "float" else raw
        return cls(mode=mode, **values)


def fault_model(mode: str, **params: Any) -> str:
    """The model name that asks the faulty upstream for ``mode`` (see the module docstring)."""
    Plan(mode=mode, **params)  # a typo in a parameter fails here, not in the server thread
    return ":".join(["fault", mode, *(f"{key}={value}" for key, value in params.items())])


def _delta(**delta: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-faulty",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "faulty",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def iter_chunks(n: int = len(TEXT), width: int = 0) -> Iterator[dict[str, Any]]:
    """The base stream: reasoning tokens, ``n`` text tokens (each ``width`` characters, when
    given), one tool call, finish, usage. Lazy: a long stream must not stall the server's loop
    while it is built."""
    yield from (_delta(reasoning_content=token) for token in REASONING)
    tokens = itertools.islice(itertools.cycle(TEXT), n)
    if width:
        tokens = ((token * (width // len(token) + 1))[:width] for token in tokens)
    yield from (_delta(content=token) for token in tokens)
    call = {"index": 0, "id": "call_1", "type": "function"}
    yield _delta(tool_calls=[{**call, "function": {"name": TOOL_NAME, "arguments": ""}}])
    yield from (_delta(tool_calls=[{"index": 0, "function": {"arguments": a}}]) for a in TOOL_ARGS)
    finish = _delta()
    finish["choices"][0]["finish_reason"] = "tool_calls"
    yield finish
    usage = {**_delta(), "choices": []}
    usage["usage"] = {"prompt_tokens": 11, "completion_tokens": 7 + n + 5, "total_tokens": 23 + n}
    yield usage


def stream_chunks(n: int = len(TEXT)) -> list[dict[str, Any]]:
    return list(iter_chunks(n))


def _frames(n: int, width: int = 0) -> Iterator[bytes]:
    """The stream on the wire: each chunk as an SSE event, then ``[DONE]``."""
    yield from (_sse(json.dumps(chunk)) for chunk in iter_chunks(n, width))
    yield _sse("[DONE]")


#: Frames of the base stream (its chunks and ``[DONE]``): ``k`` runs from 0 to ``FRAMES``.
FRAMES = len(stream_chunks()) + 1
#: Index of the chunk carrying ``finish_reason``: a fault at a later ``k`` strikes after the
#: answer was complete.
FINISH_INDEX = FRAMES - 3


@dataclass(frozen=True)
class Streamed:
    """What a run shows of the answer: reasoning, text and tool-call arguments."""

    reasoning: str = ""
    text: str = ""
    args: str = ""


def streamed(chunks: list[dict[str, Any]]) -> Streamed:
    """What these upstream chunks say, joined: the answer a client must see from them."""
    parts: dict[str, list[str]] = {"reasoning": [], "text": [], "args": []}
    for chunk in chunks:
        for choice in chunk.get("choices", []):
            delta = choice["delta"]
            parts["reasoning"].append(delta.get("reasoning_content", ""))
            parts["text"].append(delta.get("content", ""))
            for call in delta.get("tool_calls", []):
                parts["args"].append(call["function"].get("arguments", ""))
    return Streamed(**{key: "".join(values) for key, values in parts.items()})


def _sse(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


@dataclass
class UpstreamRequest:
    """One request the upstream received, and what became of its connection."""

    model: str
    body: dict[str, Any]
    received_at: float
    peer_port: int  # the bridge's end of the connection
    chunks_sent: int = 0
    bytes_sent: int = 0  # the HTTP framing included
    finished: bool = False
    peer_closed_at: float | None = None  # the bridge closed (EOF or reset) while we streamed


class _PeerClosed(Exception):
    pass


@dataclass
class FaultyUpstream:
    """The server; ``with faulty_upstream() as upstream:`` runs it in a thread of its own."""

    requests: list[UpstreamRequest] = field(default_factory=list)
    connections_open: int = 0
    _counts: Counter[str] = field(default_factory=Counter)
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    port: int = 0

    @property
    def url(self) -> str:
        """The base URL for ``BridgeConfig.upstream_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def requests_for(self, model: str) -> list[UpstreamRequest]:
        return [r for r in self.requests if r.model == model]

    def reset(self) -> None:
        self.call(self._reset)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` in the server's loop (so its state is read between two of its steps)."""
        assert self._loop is not None

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    def _reset(self) -> None:
        self.requests.clear()
        self._counts.clear()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections_open += 1
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, _PeerClosed):
            pass
        except asyncio.CancelledError:
            pass  # stopped by ``_stop``: ending quietly spares asyncio's callback a traceback
        finally:
            self.connections_open -= 1
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; ``True`` when the connection may carry another."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed an idle pooled connection
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        body = json.loads(await reader.readexactly(length)) if length else {}
        if not head.startswith(b"POST "):  # the bridge's GET /props, say: none here
            missing = b'{"error": {"message": "Not Found", "code": 404}}'
            closing = {"Connection": "close"}  # the runs' requests count their own connections
            writer.write(_head(404, "application/json", len(missing), closing) + missing)
            await writer.drain()
            return False
        model = str(body.get("model", ""))
        record = UpstreamRequest(
            model=model,
            body=body,
            received_at=time.monotonic(),
            peer_port=writer.get_extra_info("peername")[1],
        )
        self.requests.append(record)
        self._counts[model] += 1
        plan = Plan.parse(model)
        if plan.sndbuf:
            writer.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, plan.sndbuf
            )
            # No buffer of our own either: what ``bytes_sent`` counts is in the kernel.
            writer.transport.set_write_buffer_limits(high=0)
        if plan.mode in ("status", "drop"):
            if plan.times and self._counts[model] > plan.times:
                plan = replace(plan, mode="ok")
            elif plan.mode == "drop":  # as a server closing an idle keep-alive connection
                return False
            else:
                await self._send_status(writer, plan)
                return True
        if plan.mode == "hang":  # not even the status line
            await reader.read(1)
            record.peer_closed_at = time.monotonic()
            return False
        if plan.mode == "html":
            await self._send(writer, record, _head(200, "text/html", len(HTML_PAGE)))
            await self._send(writer, record, HTML_PAGE.encode())
            return False
        # Watch the socket while streaming: the bridge closing it is the event the tests time.
        watch = asyncio.ensure_future(reader.read(1))
        stream = asyncio.ensure_future(self._stream(writer, record, plan, watch))
        try:
            done, _ = await asyncio.wait({watch, stream}, return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                record.peer_closed_at = time.monotonic()
                stream.cancel()
                return False
            keep = stream.result()
        finally:
            for task in (watch, stream):
                task.cancel()
            await asyncio.gather(watch, stream, return_exceptions=True)
        return keep

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        record: UpstreamRequest,
        plan: Plan,
        watch: asyncio.Future[bytes],
    ) -> bool:
        chunked = plan.mode != "eof"
        await self._send(writer, record, _stream_head(chunked))

        async def out(data: bytes) -> None:
            if data:  # an empty HTTP chunk would end the body
                await self._send(writer, record, _http_chunk(data) if chunked else data)

        if plan.wait:
            await asyncio.sleep(plan.wait)
        strike = -1 if plan.mode == "ok" else plan.k
        before: list[bytes] = []  # with ``joined``: held back to go out with the fault
        struck = b""  # the frame the fault replaces (none when it strikes after [DONE])
        for index, frame in enumerate(_frames(plan.n, plan.width)):
            if index == strike:
                struck = frame
                break
            if plan.joined:
                before.append(frame)
                continue
            if plan.delay and index:
                await asyncio.sleep(plan.delay)
            await out(frame)
            record.chunks_sent += 1
        bad = _bad_frame(plan, struck)
        if plan.joined:  # one write, one HTTP chunk: the bridge reads it all in one piece
            await out(b"".join(before) + bad)
            record.chunks_sent = len(before)
        elif bad:
            await out(bad)
        if plan.mode in ("cut", "eof"):
            return False
        if plan.mode == "reset":
            await asyncio.sleep(0.05)  # let the bridge read what went before: RST drops it
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if plan.mode == "silence":
            await watch  # until the bridge gives up and closes
            return False
        await self._send(writer, record, b"0\r\n\r\n")
        record.finished = plan.mode == "ok"
        return record.finished

    async def _send_status(self, writer: asyncio.StreamWriter, plan: Plan) -> None:
        if plan.body == "json":
            message = upstream_message(status_message(plan.code), plan.long)
            error = {"message": message, "type": "server_error", "code": plan.code}
            body, kind = json.dumps({"error": error}).encode(), "application/json"
        elif plan.body == "html":
            body, kind = HTML_PAGE.encode(), "text/html"
        else:
            body, kind = b"", ""
        extra = {"Retry-After": plan.retry_after} if plan.retry_after else {}
        writer.write(_head(plan.code, kind, len(body), extra) + body)
        await writer.drain()

    async def _send(
        self, writer: asyncio.StreamWriter, record: UpstreamRequest, data: bytes
    ) -> None:
        if writer.is_closing():
            raise _PeerClosed
        writer.write(data)
        await writer.drain()
        record.bytes_sent += len(data)


def _stream_head(chunked: bool) -> bytes:
    framing = "Transfer-Encoding: chunked" if chunked else "Connection: close"
    return f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{framing}\r\n\r\n".encode()


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@functools.cache
def frame_ends(n: int) -> list[int]:
    """Where each frame of an ``ok`` stream of ``n`` text chunks ends, in bytes from the start
    of the response: how far into the stream a reader that has read so many bytes is."""
    ends, total = [], len(_stream_head(True))
    for frame in _frames(n):
        total += len(_http_chunk(frame))
        ends.append(total)
    return ends


def _bad_frame(plan: Plan, struck: bytes) -> bytes:
    """What goes out in place of frame ``k`` (``struck``)."""
    mode = plan.mode
    if mode in ("cut", "eof"):  # half a line: it must not reach the client
        return struck[: len(struck) // 2]
    if mode == "error":
        error = {"message": upstream_message(UPSTREAM_ERROR, plan.long), "code": 500}
        return _sse(json.dumps({"error": {**error, "type": "server_error"}}))
    if mode == "malformed":
        return b'data: {"choices": [{"index": 0, "delta": {"content": "oo\n\n'
    if mode == "longline":
        return _sse(json.dumps(_delta(content="x" * plan.line)))
    if mode in ("ok", "reset", "silence"):
        return b""
    raise ValueError(f"unknown fault mode {mode!r}")


def upstream_message(message: str, long: int = 0) -> str:
    """The error message the upstream sends: ``message``, repeated to ``long`` characters."""
    if not long:
        return message
    return " ".join(itertools.repeat(message, long // len(message) + 1))[:long]


def status_message(code: int) -> str:
    """The base of the message in a JSON error body for HTTP ``code``."""
    return f"{HTTPStatus(code).phrase}: the model is busy (fault {code})"


def _head(
    status: int, content_type: str, length: int, extra: dict[str, str] | None = None
) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Content-Length: {length}"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    lines += [f"{name}: {value}" for name, value in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@contextlib.contextmanager
def faulty_upstream() -> Iterator[FaultyUpstream]:
    """Run a ``FaultyUpstream`` on a free port of 127.0.0.1 in its own thread and loop."""
    upstream = FaultyUpstream()
    loop = asyncio.new_event_loop()
    upstream._loop = loop
    thread = threading.Thread(target=loop.run_forever, name="faulty-upstream", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(upstream._start(), loop).result(timeout=10)
        yield upstream
    finally:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(upstream._stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@contextlib.contextmanager
def refusing_upstream() -> Iterator[str]:
    """An upstream URL where nothing listens: the port is held (bound, not listening), so every
    connection is refused and no other server can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
