"""The SSE response: frames as they come, keep-alive comments in silences, a client that goes
away cancels the run (and so the upstream request), and a slow reader slows the upstream read.

Backpressure: one task reads the frames and hands each to the server, whose send waits while
the client's socket is full, so the upstream is read no faster than the client reads. Memory per
run stays flat whatever the reader's pace. (A channel between a reading and a writing task cost
a task switch and a cancel scope per frame: most of the bridge's time, by the profile.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from bridge.serve.upstream.burst import READ_BURST

#: Where the app keeps the server's own ``send`` in a request's scope (``app.BridgeApp``).
SERVER_SEND = "agui_bridge.server_send"

#: The most a burst holds back before writing anyway.
_BURST_LIMIT = 64 * 1024


class FrameBurst:
    """The frames made from one upstream network read, written to the client in one send
    (``bridge.serve.upstream.burst`` says when a read begins and ends)."""

    def __init__(self, send: Send) -> None:
        self.reading = False
        self._send = send
        self._pending: list[bytes] = []
        self._size = 0

    async def write(self, body: bytes) -> None:
        if self.reading and self._size + len(body) <= _BURST_LIMIT:
            self._pending.append(body)
            self._size += len(body)
            return
        await self.flush()
        await self._send({"type": "http.response.body", "body": body, "more_body": True})

    async def end(self) -> None:
        self.reading = False
        if self._pending:
            await self.flush()

    async def flush(self) -> None:
        if self._pending:
            pending = self._pending
            body = pending[0] if len(pending) == 1 else b"".join(pending)
            self._pending.clear()
            self._size = 0
            await self._send({"type": "http.response.body", "body": body, "more_body": True})


#: An SSE comment: ignored by every SSE client (the AG-UI client included), kept by proxies.
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class EventStreamResponse(Response):
    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncGenerator[Any, None],
        *,
        encode: Callable[[Any], str] | None = None,
        keepalive_interval: float,
        stop: anyio.Event | None = None,
        stop_frame: str = "",
        on_close: Callable[[EventStreamResponse], None] | None = None,
    ) -> None:
        """``stop``, once set, ends the stream early with ``stop_frame`` (a shutdown);
        ``on_close`` is called with the response once it is over, however it ended (even
        before its first frame: a generator that never started runs no ``finally``); by then
        ``bytes_sent``, ``client_gone`` and ``stopped`` say how."""
        # Not Response.__init__: it would declare a Content-Length for an empty body.
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)
        self._frames = frames
        self._encode = encode
        self._keepalive = keepalive_interval
        self._stop = stop
        self._stop_frame = stop_frame
        self._on_close = on_close
        self._pump_task: asyncio.Task[None] | None = None
        self._stopped = False
        self._quiet = True  # nothing written since the keep-alive timer last looked
        self.bytes_sent = 0  # the frames' bytes (keep-alive comments aside)
        self.client_gone = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            # The head through the app's middleware (CORS adds its headers there), the frames
            # with the server's own send when the app kept it: every wrapper on the way looks
            # at the head only, and each cost a coroutine step per frame.
            await self._respond(receive, send, scope.get(SERVER_SEND, send))
        finally:
            await self._frames.aclose()
            if self._on_close is not None:
                self._on_close(self)

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` ended the stream (its ``stop_frame`` in place of the run's end)."""
        return self._stopped

    async def _respond(self, receive: Receive, head: Send, send: Send) -> None:
        await head({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = False
        # A task of its own, not the request's: the request's task waits under the server's and
        # the app's layers (uvicorn's, Starlette's middleware and routing, a dozen coroutines),
        # which every token's read would resume and suspend again. An asyncio task, not one of
        # the watchers' task group: anyio's wraps it in two more.
        pump = self._pump_task = asyncio.create_task(self._pump(send))
        try:
            async with anyio.create_task_group() as tasks:
                watch = tasks.cancel_scope
                pump.add_done_callback(lambda _: watch.cancel())  # nothing more to watch for

                async def watch_disconnect() -> None:
                    nonlocal gone
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    gone = self.client_gone = True
                    watch.cancel()
                    self._end_pump()

                tasks.start_soon(watch_disconnect)
                if self._stop is not None:
                    tasks.start_soon(self._stop_producing, self._stop)
                tasks.start_soon(self._keep_alive, send)
        finally:
            if not pump.done():  # the request's task cancelled: the pump goes with it
                pump.cancel()
            await asyncio.wait([pump])  # the frames' generator is the pump's until it ends
            failure = None if pump.cancelled() else pump.exception()
        try:
            if failure is not None:
                raise failure
            if not gone:
                last = self._stop_frame.encode() if self._stopped else b""
                self.bytes_sent += len(last)
                await send({"type": "http.response.body", "body": last, "more_body": False})
        except OSError:  # the client went away while we were writing: nothing left to tell it
            self.client_gone = True

    def _end_pump(self) -> None:
        """Cancel the pump. It is no task of the watchers' group, whose cancelling would not
        reach it; nor would it reliably as one: anyio cancels a task only when it finds it waiting
        on a future not yet done, and an upstream that always has more data (read from aiohttp's
        buffer, whose every wait the network ends before anyio looks) kept it reading for nobody."""
        if self._pump_task is not None:
            self._pump_task.cancel()

    async def _pump(self, send: Send) -> None:
        """One task reads and writes: frames are handed to the server as they come (one send per
        upstream read), and the server's send waits while the client's socket is full."""
        burst = FrameBurst(send)
        READ_BURST.set(burst)  # the task's own context
        encode = self._encode
        async with aclosing(self._frames) as frames:
            async for item in frames:
                self._quiet = False
                data = (item if encode is None else encode(item)).encode()
                self.bytes_sent += len(data)
                await burst.write(data)
        await burst.end()

    async def _keep_alive(self, send: Send) -> None:
        """A keep-alive comment after each interval in which nothing was written."""
        while True:
            self._quiet = True
            await anyio.sleep(self._keepalive)
            if self._quiet:
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})

    async def _stop_producing(self, stop: anyio.Event) -> None:
        await stop.wait()
        self._stopped = True
        self._end_pump()
