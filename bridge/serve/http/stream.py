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
from collections.abc import Awaitable, Callable, Sequence

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

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

    async def keep_alive(self) -> None:
        """A keep-alive comment, now (not counted in ``size``: no frame)."""
        await self._send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})


#: What writes a response's frames: called once, in the task that writes them, with their sink.
Produce = Callable[[FrameSink], Awaitable[None]]


#: An SSE comment: ignored by every SSE client (the AG-UI client included), kept by proxies.
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: An event stream's head, as Starlette's ``init_headers`` writes it from ``SSE_HEADERS``: each
#: response holds a list of its own (middleware may edit it) of these same pairs.
_SSE_HEAD = (
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
    (b"content-type", b"text/event-stream; charset=utf-8"),
)


#: The bytes of a body made beforehand sent at once (``SlicedResponse``).
BODY_SLICE = 256 * 1024


class SlicedResponse(Response):
    """A body made beforehand (a hydrate's thread, megabytes of it), its pieces sent a slice at
    a time: each send a step of its own for the event loop, and the pieces never copied into
    one. ``on_close`` is called once it is over, however it ended."""

    def __init__(
        self,
        pieces: Sequence[bytes],
        *,
        media_type: str,
        headers: dict[str, str],
        on_close: Callable[[], None],
    ) -> None:
        size = str(sum(len(piece) for piece in pieces))
        super().__init__(None, headers={**headers, "content-length": size}, media_type=media_type)
        self._pieces = pieces
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            for piece in self._pieces:
                body = memoryview(piece)
                for at in range(0, len(body), BODY_SLICE):
                    part = bytes(body[at : at + BODY_SLICE])
                    await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._on_close()


class OpenStreams:
    """The open SSE responses of one app, and what they share: one keep-alive timer for them
    all, not a task and a timer each (a stream whose upstream is silent for minutes costs
    nothing while it waits but its keep-alive comments), and the shutdown's stop.

    At each tick a stream that wrote nothing since the tick before gets a keep-alive comment:
    after one to two intervals of silence, as with a timer of its own."""

    def __init__(self, keepalive_interval: float) -> None:
        self._interval = keepalive_interval
        # response → its bytes at the last tick (None: it joined after it, and waits one more)
        self._open: dict[EventStreamResponse, int | None] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Set by ``stop``: every stream open ends, and every one opened after.
        self.stopped = False

    def stop(self) -> None:
        """The shutdown: every stream ends with its stop frame in place of the rest."""
        self.stopped = True
        for response in list(self._open):
            response.stop()

    def join(self, response: EventStreamResponse) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_later(self._interval, self._tick)
        self._open[response] = None
        if self.stopped:
            response.stop()

    def leave(self, response: EventStreamResponse) -> None:
        self._open.pop(response, None)
        if not self._open and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        assert self._loop is not None
        self._timer = self._loop.call_later(self._interval, self._tick)
        for response, before in self._open.items():
            now = response.bytes_written
            if now == before:
                response.keep_alive()
            self._open[response] = now


class EventStreamResponse(Response):
    """``produce`` writes the frames; the response ends when it returns (after its last
    frames), when the client goes away (``produce`` is cancelled), or when ``streams`` is
    stopped (``stop_frame`` ends it)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        produce: Produce,
        *,
        streams: OpenStreams,
        stop_frame: str = "",
        on_close: Callable[[EventStreamResponse], None] | None = None,
    ) -> None:
        """``on_close`` is called with the response once it is over, however it ended (even
        before its first frame); by then ``bytes_sent``, ``client_gone`` and ``stopped`` say
        how."""
        # Not Response.__init__: it would declare a Content-Length for an empty body.
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_SSE_HEAD)
        self._produce: Produce | None = produce
        self._streams = streams
        self._stop_frame = stop_frame
        self._on_close = on_close
        self._making: asyncio.Task[None] | None = None  # the request's task, while it makes frames
        self._stopped = False
        self._sink: FrameSink | None = None
        self._keeping_alive: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None  # the disconnect watch's or a keep-alive's
        self._ending = False  # the frames' making cancelled by ``_end_frames``
        self._receive: Receive | None = None
        self._watcher: asyncio.Future[Message] | None = None  # the wait for the client's next
        self._last = 0  # the bytes of the stream's last frame (a shutdown's)
        self._cut_frame = ""  # its last frame when it was cut (``cut``)
        self.client_gone = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # One coroutine, the request's, for the whole stream (each more was held for its life):
        # the head through the app's middleware (CORS adds its headers there), the frames with
        # the server's own send when the app kept it (every wrapper on the way looks at the
        # head only, and each cost a coroutine step per frame).
        #
        # The request's own task makes and writes the frames: a task of their own and the wait
        # on it cost each open stream about 1.5 KiB (``benchmarks/README.md``, issue 44). One
        # task watches for the client leaving; keep-alive comments and the shutdown come from
        # the app's ``OpenStreams`` (plain asyncio tasks: an anyio task group's cancel leaves
        # each of its tasks' CancelledError in a reference cycle, for the garbage collector).
        # What ends the stream early cancels this task while it makes the frames
        # (``_end_frames``), and the cancel is taken back here.
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            send = scope.get(SERVER_SEND, send)
            sink = self._sink = FrameSink(send)
            task = self._making = asyncio.current_task()
            self._receive = receive
            self._watch()
            self._streams.join(self)
            failure: BaseException | None = None
            try:
                assert self._produce is not None
                frames = self._produce(sink)
                # Let go of what made the frames' coroutine (a run's closures, its tool loop):
                # the coroutine holds what it needs, nothing more for the stream's life.
                self._produce = None
                await frames
                await sink.flush()
            except asyncio.CancelledError:
                # Not ours to take back: the server's cancel, or ours and the server's together.
                if not self._ending or task is None or task.uncancel() > 0:
                    raise
            except Exception as exc:
                failure = exc
            finally:
                self._making = None
                self._streams.leave(self)
                if self._watcher is not None:
                    self._watcher.cancel()
                if self._keeping_alive is not None:
                    self._keeping_alive.cancel()
            failure = failure or self._failure
            try:
                if failure is not None:
                    raise failure
                if not self.client_gone:
                    last = (self._stop_frame if self._stopped else self._cut_frame).encode()
                    self._last = len(last)
                    await send({"type": "http.response.body", "body": last, "more_body": False})
            except OSError:  # the client went away while we were writing: nothing left to tell
                self.client_gone = True
        finally:
            if self._on_close is not None:
                self._on_close(self)

    @property
    def bytes_sent(self) -> int:
        """The frames' bytes (keep-alive comments aside)."""
        return self.bytes_written + self._last

    @property
    def bytes_written(self) -> int:
        """The frames' bytes so far."""
        return self._sink.size if self._sink is not None else 0

    @property
    def stopped(self) -> bool:
        """Whether ``streams`` was stopped first (its ``stop_frame`` in place of the run's end)."""
        return self._stopped

    def _watch(self) -> None:
        """Wait for the client's next message (a task of the server's ``receive`` alone, no
        coroutine of ours around it): its leaving ends the frames' making."""
        assert self._receive is not None
        self._watcher = asyncio.ensure_future(self._receive())
        self._watcher.add_done_callback(self._received)

    def _received(self, watcher: asyncio.Future[Message]) -> None:
        if watcher.cancelled():
            return
        if watcher.exception() is not None:
            self._failure = self._failure or watcher.exception()
        elif watcher.result()["type"] != "http.disconnect":
            self._watch()  # the body's end, or a message to ignore: wait for the next
            return
        else:
            self.client_gone = True
        self._watcher = None
        self._end_frames()

    def stop(self) -> None:
        """End the stream now, with its stop frame (a shutdown)."""
        self._stopped = True
        self._end_frames()

    def cut(self, frame: str) -> None:
        """End the stream now, with ``frame`` (a follower too slow for its run's others)."""
        self._cut_frame = frame
        self._end_frames()

    def keep_alive(self) -> None:
        """Send a keep-alive comment (``OpenStreams``: nothing was written for an interval),
        unless the last one is still waiting for the client's socket."""
        if self._sink is None or (self._keeping_alive and not self._keeping_alive.done()):
            return
        self._keeping_alive = asyncio.get_running_loop().create_task(self._send_keep_alive())

    async def _send_keep_alive(self) -> None:
        assert self._sink is not None
        try:
            await self._sink.keep_alive()
        except Exception as exc:  # the client's socket failed: the stream ends on it
            self._failure = self._failure or exc
            self._end_frames()

    def _end_frames(self) -> None:
        """Cancel the frames' making (the request's task, while it makes them), once. Directly,
        not through a task group's cancel: anyio cancels a task only when it finds it waiting
        on a future not yet done, and an upstream that always has more data (read from
        aiohttp's buffer, whose every wait the network ends before anyio looks) kept it
        reading for nobody."""
        if self._making is not None and not self._ending:
            self._ending = True
            self._making.cancel()
