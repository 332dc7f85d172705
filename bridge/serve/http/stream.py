"""The SSE response: frames as they come, keep-alive comments in silences, a client that goes
away cancels the run (and so the upstream request), and a slow reader slows the upstream read.

Backpressure: one task makes the frames (the run, driven by its upstream reads) and hands them
to the server, whose send waits while the client's socket is full, so the upstream is read no
faster than the client reads. Memory per run stays flat whatever the reader's pace. (A channel
between a reading and a writing task cost a task switch and a cancel scope per frame: most of
the bridge's time, by the profile.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

#: Where the app keeps the server's own ``send`` in a request's scope (``app.BridgeApp``).
SERVER_SEND = "agui_bridge.server_send"


class FrameSink:
    """Frames held as they are made, sent together when flushed: the frames of one upstream
    network read leave in one send (the read flushes before it waits again). ``size``: the
    bytes of every frame added."""

    __slots__ = ("_pending", "_send", "size")

    def __init__(self, send: Send) -> None:
        self._send = send
        self._pending: list[bytes] = []
        self.size = 0

    def add(self, frame: str) -> None:
        data = frame.encode()
        self.size += len(data)
        self._pending.append(data)

    async def flush(self) -> None:
        pending = self._pending
        if pending:
            body = pending[0] if len(pending) == 1 else b"".join(pending)
            pending.clear()
            await self._send({"type": "http.response.body", "body": body, "more_body": True})


#: What writes a response's frames: called once, in the task that writes them, with their sink.
Produce = Callable[[FrameSink], Awaitable[None]]


#: An SSE comment: ignored by every SSE client (the AG-UI client included), kept by proxies.
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class EventStreamResponse(Response):
    media_type = "text/event-stream"

    def __init__(
        self,
        produce: Produce,
        *,
        keepalive_interval: float,
        stop: anyio.Event | None = None,
        stop_frame: str = "",
        on_close: Callable[[EventStreamResponse], None] | None = None,
    ) -> None:
        """``produce`` writes the frames (called once the head is out); ``stop``, once set,
        ends the stream early with ``stop_frame`` (a shutdown); ``on_close`` is called with the
        response once it is over, however it ended (even before its first frame); by then
        ``bytes_sent``, ``client_gone`` and ``stopped`` say how."""
        # Not Response.__init__: it would declare a Content-Length for an empty body.
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)
        self._produce = produce
        self._keepalive = keepalive_interval
        self._stop = stop
        self._stop_frame = stop_frame
        self._on_close = on_close
        self._pump_task: asyncio.Task[None] | None = None
        self._stopped = False
        self._sink: FrameSink | None = None
        self._last = 0  # the bytes of the stream's last frame (a shutdown's)
        self.client_gone = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            # The head through the app's middleware (CORS adds its headers there), the frames
            # with the server's own send when the app kept it: every wrapper on the way looks
            # at the head only, and each cost a coroutine step per frame.
            await self._respond(receive, send, scope.get(SERVER_SEND, send))
        finally:
            if self._on_close is not None:
                self._on_close(self)

    @property
    def bytes_sent(self) -> int:
        """The frames' bytes (keep-alive comments aside)."""
        return (self._sink.size if self._sink is not None else 0) + self._last

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` ended the stream (its ``stop_frame`` in place of the run's end)."""
        return self._stopped

    async def _respond(self, receive: Receive, head: Send, send: Send) -> None:
        await head({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = False
        # A task of its own, not the request's: the request's task waits under the server's and
        # the app's layers (uvicorn's, Starlette's middleware and routing, a dozen coroutines),
        # which every token's read would resume and suspend again. A plain asyncio task (anyio's
        # wrap it in two more), as the watchers below are.
        sink = self._sink = FrameSink(send)
        pump = self._pump_task = asyncio.create_task(self._pump(sink))

        async def watch_disconnect() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = self.client_gone = True
            self._end_pump()

        # Plain asyncio tasks, cancelled once the pump is done: an anyio task group's cancel
        # leaves each of its tasks' CancelledError in a reference cycle (with the frame that
        # read it), three a response, for the garbage collector.
        watchers = [
            asyncio.create_task(watch_disconnect()),
            asyncio.create_task(self._keep_alive(send, sink)),
        ]
        if self._stop is not None:
            watchers.append(asyncio.create_task(self._stop_producing(self._stop)))
        watcher_failure: BaseException | None = None
        try:
            waiting = {pump, *watchers}
            while not pump.done():
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for task in done - {pump}:
                    if not task.cancelled() and task.exception() is not None:
                        watcher_failure = task.exception()
                        self._end_pump()
        finally:
            for task in watchers:
                task.cancel()
            if not pump.done():  # the request's task cancelled: the pump goes with it
                pump.cancel()
            await asyncio.wait([pump])  # the run is the pump's until it ends
            failure = None if pump.cancelled() else pump.exception()
            failure = failure or watcher_failure
        try:
            if failure is not None:
                raise failure
            if not gone:
                last = self._stop_frame.encode() if self._stopped else b""
                self._last = len(last)
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

    async def _pump(self, sink: FrameSink) -> None:
        """One task makes and writes the frames: each flush hands them to the server, whose
        send waits while the client's socket is full."""
        await self._produce(sink)
        await sink.flush()

    async def _keep_alive(self, send: Send, sink: FrameSink) -> None:
        """A keep-alive comment after each interval in which nothing was written."""
        while True:
            written = sink.size
            await anyio.sleep(self._keepalive)
            if sink.size == written:
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})

    async def _stop_producing(self, stop: anyio.Event) -> None:
        await stop.wait()
        self._stopped = True
        self._end_pump()
