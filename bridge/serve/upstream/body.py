"""A streamed answer's body as the read loop takes it, and the idle timeout of a body read from
aiohttp's own buffer: one watch for all of them instead of a timer re-armed on every read; and
an answer read whole, within a size (``read_whole``), and one that came whole where a stream
was asked for (``whole_answer``); a stream's charset (``charset_of``); a response closed
(``close_response``).

Private names read here, of versions pinned in pyproject and checked by
``tests/test_read_path.py`` (a change makes it fail, not go slow): httpx's
``BoundAsyncStream._stream`` (the stream ``AsyncClient.send`` wraps to time the response) and
httpx-aiohttp's ``AiohttpResponseStream._aiohttp_response``.
"""

from __future__ import annotations

import asyncio
import codecs
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import suppress
from functools import partial
from typing import Any, Protocol

import aiohttp
import httpx
from httpx._client import BoundAsyncStream
from httpx_aiohttp.transport import AiohttpResponseStream

from bridge.core.errors import UpstreamProtocolError
from bridge.serve.upstream.parse import parse_json
from bridge.serve.upstream.transport import TRANSPORT_ERRORS, YieldingStream

#: What the read an ``IdleWatch`` fails raises: aiohttp's timeout (read as one), said as ours.
IDLE_MESSAGE = "Timeout on reading data from socket (the bridge's idle watch)"

#: The most one read of a body takes from aiohttp's buffer: as httpx-aiohttp's iterator takes.
PIECE = 16 * 1024

#: After the answer's end, how long its body's own end is waited for, and how many bytes after
#: it are read and dropped (``Body.settle``).
SETTLE_S = 0.1
SETTLE_BYTES = 64 * 1024


class Body:
    """A streamed response's body, a piece at a time as it arrives (``await read()``; ``b""`` at
    its end), decoded of its ``Content-Encoding``.

    An answer from aiohttp's transport with no content coding is read from aiohttp's own
    buffer, ``StreamReader.read(PIECE)``: what arrived, in one call, up to ``PIECE`` bytes (a
    bigger piece would hold the event loop longer between yields). Through httpx's response API
    it took six generator steps a token (httpx-aiohttp's, httpx's raw, bytes and text
    iterators, the transport's yielding), a third of the read path's CPU
    (``benchmarks/README.md``, issue 34). Its exceptions are aiohttp's own, which
    ``failure_kind`` reads as it reads httpx's. Anything else (httpx's transport, a recorded
    exchange, a test's transport, a compressed body) is read through ``aiter_bytes``. The
    caller lets the event loop in (``LoopTurns``): aiohttp's buffer is read without waiting
    while it holds data.

    ``waiting``: when the read now waiting began (``time.monotonic()``), ``0.0`` while none
    waits; the reader sets it around each read, and an ``IdleWatch`` reads it.

    The body is the response's from then on: ``aclose`` closes it. Read from aiohttp's buffer,
    it keeps aiohttp's answer alone and lets httpx's request and response go at once (their
    headers, URL and wrappers, about 4 KiB an open stream, ``benchmarks/README.md``, issue 44);
    its caller drops its own reference to them."""

    __slots__ = ("_answer", "_content", "_pieces", "_protocol", "_response", "read", "waiting")

    def __init__(self, response: httpx.Response) -> None:
        self._pieces: AsyncIterator[bytes] | None = None
        self._content: aiohttp.StreamReader | None = None
        self._protocol: aiohttp.client_proto.ResponseHandler | None = None
        self._answer: aiohttp.ClientResponse | None = None
        self._response: httpx.Response | None = None
        self.waiting = 0.0
        stream = response.stream
        while isinstance(stream, BoundAsyncStream | YieldingStream):  # httpx's, ours
            stream = stream._stream if isinstance(stream, BoundAsyncStream) else stream.inner
        coded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if isinstance(stream, AiohttpResponseStream) and not coded:
            answer = self._answer = stream._aiohttp_response
            content = self._content = answer.content
            connection = answer.connection
            self._protocol = connection.protocol if connection is not None else None
            self.read: Callable[[], Awaitable[bytes]] = partial(content.read, PIECE)
            response.stream = _CLOSED  # httpx's stream held its response: a cycle, let go
        else:
            self._response = response
            self._pieces = response.aiter_bytes()
            self.read = self._next

    def own_idle_timeout(self) -> bool:
        """Whether the body is read from aiohttp's buffer; if so, aiohttp's read timeout (a timer
        cancelled and made again on every network read) is off for the rest of it, and the
        caller watches it instead (``IdleWatch``). The next request on the connection sets
        aiohttp's again. (A body that has all arrived already has let its connection go.)"""
        if self._content is None:
            return False
        if self._protocol is not None:
            self._protocol.read_timeout = None
            self._protocol.start_timeout()  # with no timeout: the timer armed is cancelled
        return True

    def time_out(self) -> None:
        """Fail the waiting read as aiohttp's read timeout fails it."""
        if self._content is not None:
            self._content.set_exception(aiohttp.SocketTimeoutError(IDLE_MESSAGE))

    async def _next(self) -> bytes:
        assert self._pieces is not None
        async for piece in self._pieces:
            if piece:
                return piece
        return b""

    async def settle(self) -> None:
        """Wait for the body's end once the answer is complete (``[DONE]``): a connection goes
        back to the pool only when its body was read to its end, and most servers end it right
        after, but that end may come a read later (under load it usually does): closed at
        once, each run would open a connection of its own. What comes is dropped, unread (it
        is not the answer's); a server that holds its body open past ``SETTLE_S``, or sends
        more than ``SETTLE_BYTES``, has its connection closed as before."""
        left = SETTLE_BYTES
        with suppress(*TRANSPORT_ERRORS):  # asyncio's timeout among them
            async with asyncio.timeout(SETTLE_S):
                while left > 0:
                    piece = await self.read()
                    if not piece:
                        return
                    left -= len(piece)

    async def aclose(self) -> None:
        """Close the response: aiohttp's answer as httpx-aiohttp closes it (its connection
        back to the pool when the body was read to its end, closed otherwise), or httpx's."""
        if self._answer is not None:
            await self._answer.__aexit__(None, None, None)
            return
        try:
            if isinstance(self._pieces, AsyncGenerator):
                await self._pieces.aclose()
        finally:
            if self._response is not None:
                await close_response(self._response)


class Watched(Protocol):
    """What an ``IdleWatch`` reads and does: when the waiting read began (0.0: none waits), and
    how it fails."""

    waiting: float

    def time_out(self) -> None: ...


class IdleWatch:
    """The idle timeout of the bodies read from aiohttp's buffer: one task looks at them all, a
    few times per ``timeout``, and fails a read that has waited ``timeout`` seconds or more. A
    read costs the reader two stores (``Body.waiting``) instead of aiohttp's timer. A body
    whose client is slow waits in no read, so only the upstream's silence counts, as with
    aiohttp's own timeout."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._every = min(max(timeout / 8, 0.01), 1.0)
        self._bodies: set[Watched] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, body: Watched) -> None:
        self._bodies.add(body)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    def discard(self, body: Watched) -> None:
        self._bodies.discard(body)
        if not self._bodies and self._task is not None:
            self._task.cancel()  # nothing to watch: no task left behind
            self._task = None

    async def _watch(self) -> None:
        clock, timeout = time.monotonic, self._timeout
        while self._bodies:
            await asyncio.sleep(self._every)
            now = clock()
            for body in [body for body in self._bodies if body.waiting]:
                if now - body.waiting >= timeout:
                    body.waiting = 0.0
                    body.time_out()


async def read_whole(response: httpx.Response, limit: int, what: str) -> bytes:
    """``response``'s body, decoded, refused (``UpstreamProtocolError``) before a byte of it is
    read when its ``Content-Length`` passes ``limit`` bytes, and as soon as more than ``limit``
    arrived otherwise. ``what``: the request, in the error's words. (A compressed body is
    checked as each piece is decoded: a caller that cannot afford a piece's expansion, about a
    thousand to one, asks for none and refuses one that comes anyway.)"""
    declared = response.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise UpstreamProtocolError(
            f"the upstream's answer to {what} is {int(declared)} bytes long, more than {limit}"
        )
    raw = bytearray()
    async for piece in response.aiter_bytes():
        raw += piece
        if len(raw) > limit:
            raise UpstreamProtocolError(
                f"the upstream's answer to {what} is longer than {limit} bytes"
            )
    return bytes(raw)


#: What a closed response's stream becomes (``close_response``).
_CLOSED = httpx.ByteStream(b"")


async def close_response(response: httpx.Response) -> None:
    """Close the response, then let go of its stream: httpx's stream holds the response that
    holds it, a reference cycle that would keep the request (its body) and the response alive
    until the garbage collector runs, and cost it a pass, each request."""
    try:
        await response.aclose()
    finally:
        response.stream = _CLOSED


def charset_of(response: httpx.Response) -> str | None:
    """The charset an event stream names when it is a known one other than UTF-8 (SSE's own,
    which needs no decoding: orjson reads the bytes)."""
    try:
        name = codecs.lookup(response.charset_encoding or "utf-8").name
    except LookupError:
        return None
    return None if name == "utf-8" else name


async def whole_answer(response: httpx.Response, content_type: str, limit: int) -> dict[str, Any]:
    """A server that answers the streaming request with one JSON body (some do when tools are
    given): the translator reads a whole ``chat.completion`` (or ``response``) like a chunk, up
    to ``limit`` bytes as a line of a stream."""
    if "json" not in content_type:
        raise UpstreamProtocolError(
            f"the upstream answered with {content_type or 'no content type'!r}, not an event stream"
        )
    raw = await read_whole(
        response, limit, f"{response.request.method} {response.request.url.path}"
    )
    try:
        data = parse_json(raw)
    except ValueError as exc:
        raise UpstreamProtocolError("the upstream answered with JSON that does not parse") from exc
    if not isinstance(data, dict):
        raise UpstreamProtocolError("the upstream answered with JSON that is not an object")
    return data
