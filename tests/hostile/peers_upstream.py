"""A hostile OpenAI-compatible upstream, raw asyncio TCP on 127.0.0.1 in a thread of its own:
every byte, pause and close is the test's to choose (issue 40, findings 5 and 6).

Chat completions: each connection's first request is answered (a short event stream, with
``Connection: keep-alive``), after ``fill`` connections are open (so that a bridge's pool holds
that many). A later request on the same connection is read whole, then the connection closed
unanswered (``reused="close"``): the model may have run in full, and no answer came. With
``new="close"`` a connection's first request is read and closed too.

What an answered completion is, ``answer`` says: ``stream`` (the event stream), ``nested_chunk``
(a chunk of 100,000 nested arrays in it), ``nested_error`` (HTTP 500 whose JSON body nests
them), ``big_json`` (one whole JSON answer of 2 MB, with no ``Content-Length``).

``GET /props`` answers as ``props`` says (``PROPS_MODES``); ``GET /models`` lists ``MODEL``.
Every request is noted (``requests``: ``"METHOD /path"``, and for a completion the last
message's text, which names the run); ``sent`` counts the bytes of ``/props`` bodies written
before the bridge closed the connection.
"""

from __future__ import annotations

import asyncio
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

MODEL = "hostile"
WORDS = ["Hello", " there"]

#: ``/props``: ``ok`` (a template that drops earlier reasoning), ``preserves`` (one that keeps
#: it), ``drip`` (headers, then one byte every ``drip`` seconds, of ``drip_size`` and a few),
#: ``nested`` (a 200 KB body of 100,000 nested arrays), ``huge`` (200 MB with its
#: Content-Length), ``huge_chunked`` (200 MB, chunked: no length told), ``gzip_bomb`` (256 MB of
#: zeros as about 250 KB of gzip).
PROPS_MODES = ("ok", "preserves", "drip", "nested", "huge", "huge_chunked", "gzip_bomb")
HUGE = 200 * 1024 * 1024
BOMB = 256 * 1024 * 1024


@dataclass
class HostileUpstream:
    fill: int = 1
    reused: str = "close"  # answer | close
    new: str = "answer"  # answer | close
    answer: str = "stream"
    props: str = "ok"
    drip: float = 0.25
    drip_size: int = 1000
    requests: list[str] = field(default_factory=list)
    completions: list[str] = field(default_factory=list)  # the run each completion named
    connections: int = 0
    sent: int = 0  # bytes of /props bodies written
    port: int = 0
    _filled: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def completions_of(self, run: str) -> int:
        """How many times the completion of the run named ``run`` was asked for."""
        return self.completions.count(run)

    def set(self, **changes: Any) -> None:
        """Change the behaviour between two of the server's steps."""
        assert self._loop is not None

        async def change() -> None:
            for key, value in changes.items():
                setattr(self, key, value)

        asyncio.run_coroutine_threadsafe(change(), self._loop).result(timeout=10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None and self._filled is not None
        self._handlers.add(task)
        self.connections += 1
        if self.connections >= self.fill:
            self._filled.set()
        served = 0
        try:
            while (request := await _read_request(reader)) is not None:
                method, path, body = request
                self.requests.append(f"{method} {path}")
                if method == "POST" and path.endswith("/chat/completions"):
                    self.completions.append(_run_named(body))
                    if (self.reused if served else self.new) == "close":
                        break  # read whole, then closed unanswered
                    with suppress(TimeoutError):
                        async with asyncio.timeout(10):
                            await self._filled.wait()
                    writer.write(_completion(self.answer))
                elif method == "GET" and path.partition("?")[0] == "/props":
                    if not await self._props(writer):
                        break  # a hostile answer: the connection ends with it
                elif method == "GET" and path.endswith("/models"):
                    writer.write(_whole({"object": "list", "data": [{"id": MODEL}]}))
                else:
                    writer.write(
                        _whole({"error": {"message": "not found"}}, status="404 Not Found")
                    )
                await writer.drain()
                served += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # stopped with the server
        finally:
            writer.close()
            self._handlers.discard(task)

    async def _props(self, writer: asyncio.StreamWriter) -> bool:
        """Answer ``GET /props`` as ``props`` says; whether the connection may serve more."""
        mode = self.props
        if mode in ("ok", "preserves"):
            caps = {"supports_preserve_reasoning": mode == "preserves"}
            writer.write(_whole({"build_info": "b1-hostile", "chat_template_caps": caps}))
            return True
        elif mode == "drip":
            body = json.dumps({"build_info": "b" + "x" * self.drip_size}).encode()
            writer.write(_head("application/json", f"Content-Length: {len(body)}"))
            for byte in body:
                writer.write(bytes([byte]))
                await writer.drain()
                self.sent += 1
                await asyncio.sleep(self.drip)
        elif mode == "nested":
            writer.write(_whole(None, raw=NESTED))
            return True
        elif mode in ("huge", "huge_chunked"):
            chunked = mode == "huge_chunked"
            framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {HUGE}"
            writer.write(_head("application/json", framing))
            piece = b'{"a":"' + b"x" * (64 * 1024 - 6)
            while self.sent < HUGE:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                await writer.drain()
                self.sent += len(piece)
        elif mode == "gzip_bomb":
            body = gzip_bomb()
            framing = f"Content-Length: {len(body)}\r\nContent-Encoding: gzip"
            writer.write(_head("application/json", framing) + body)
            await writer.drain()
            self.sent += len(body)
        else:
            raise ValueError(f"no such /props mode: {mode!r}")
        return False


_BOMB: list[bytes] = []


def gzip_bomb() -> bytes:
    """``BOMB`` bytes of zeros, gzipped (made once)."""
    if not _BOMB:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = bytes(1024 * 1024)
        _BOMB.append(
            b"".join(packer.compress(block) for _ in range(BOMB // len(block))) + packer.flush()
        )
    return _BOMB[0]


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return method, path, await reader.readexactly(length)


def _run_named(body: bytes) -> str:
    messages = json.loads(body).get("messages") or [{}]
    content = messages[-1].get("content")
    return content if isinstance(content, str) else ""


NESTED = b"[" * 100_000 + b"]" * 100_000


def _completion(answer: str) -> bytes:
    if answer == "nested_error":
        return _whole(None, raw=b'{"error": ' + NESTED + b"}", status="500 Internal Server Error")
    if answer == "big_json":
        message = {"role": "assistant", "content": "x" * 2 * 1024 * 1024}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        data = json.dumps({"object": "chat.completion", "choices": [choice]}).encode()
        pieces = (data[i : i + 65536] for i in range(0, len(data), 65536))
        framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
        return _head("application/json", "Transfer-Encoding: chunked") + framed + b"0\r\n\r\n"
    frames = []
    for i, word in enumerate(WORDS):
        delta = {"role": "assistant", "content": word} if i == 0 else {"content": word}
        frames.append({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    frames.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    # No [DONE]: the bridge reads on to the body's end, so that httpx's transport too keeps the
    # connection (it closes one whose answer was left unread).
    events = [f"data: {json.dumps(frame)}\n\n".encode() for frame in frames]
    if answer == "nested_chunk":
        events.insert(1, b'data: {"choices": ' + NESTED + b"}\n\n")
    body = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in events) + b"0\r\n\r\n"
    return _head("text/event-stream", "Transfer-Encoding: chunked") + body


def _head(content_type: str, framing: str, status: str = "200 OK") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{framing}\r\n"
        "Connection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
    ).encode()


def _whole(data: Any, *, raw: bytes | None = None, status: str = "200 OK") -> bytes:
    body = raw if raw is not None else json.dumps(data).encode()
    return _head("application/json", f"Content-Length: {len(body)}", status) + body


@contextmanager
def hostile_upstream(**settings: Any) -> Iterator[HostileUpstream]:
    """The server, in a thread of its own, stopped on leaving."""
    upstream = HostileUpstream(**settings)
    loop = upstream._loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="hostile-upstream", daemon=True)
    thread.start()

    async def start() -> asyncio.Server:
        upstream._filled = asyncio.Event()
        return await asyncio.start_server(upstream._handle, "127.0.0.1", 0)

    async def stop(server: asyncio.Server) -> None:
        server.close()
        for task in list(upstream._handlers):
            task.cancel()
        await asyncio.gather(*upstream._handlers, return_exceptions=True)

    try:
        server = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
        upstream.port = server.sockets[0].getsockname()[1]
        try:
            yield upstream
        finally:
            asyncio.run_coroutine_threadsafe(stop(server), loop).result(timeout=10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
