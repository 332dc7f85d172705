"""The SSE response: frames as they come, keep-alive comments in silences, a client that goes
away cancels the run (and so the upstream request), and a slow reader slows the upstream read.

Backpressure: the frame channel holds nothing (buffer 0), so the producer waits for each frame
to be taken, and a frame is taken only after the previous one was handed to the server, which
waits while the client's socket is full. Memory per run stays flat whatever the reader's pace.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import anyio
from anyio import CancelScope
from anyio.streams.memory import MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

#: An SSE comment: ignored by every SSE client (the AG-UI client included), kept by proxies.
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class EventStreamResponse(Response):
    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncGenerator[str, None],
        *,
        keepalive_interval: float,
        stop: anyio.Event | None = None,
        stop_frame: str = "",
    ) -> None:
        """``stop``, once set, ends the stream early with ``stop_frame`` (a shutdown)."""
        # Not Response.__init__: it would declare a Content-Length for an empty body.
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)
        self._frames = frames
        self._keepalive = keepalive_interval
        self._stop = stop
        self._stop_frame = stop_frame
        self._producing = anyio.CancelScope()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        sender, receiver = anyio.create_memory_object_stream[str](0)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._produce, sender)
                tasks.start_soon(_cancel_on_disconnect, receive, tasks.cancel_scope)
                if self._stop is not None:
                    tasks.start_soon(self._stop_producing, self._stop)
                async with receiver:
                    while True:
                        frame: str | None = None
                        with anyio.move_on_after(self._keepalive):
                            try:
                                frame = await receiver.receive()
                            except anyio.EndOfStream:
                                break
                        body = KEEPALIVE if frame is None else frame.encode()
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                last = self._stop_frame.encode() if self._producing.cancel_called else b""
                await send({"type": "http.response.body", "body": last, "more_body": False})
                tasks.cancel_scope.cancel()
        except OSError:
            pass  # the client went away while we were writing: nothing left to tell it

    async def _produce(self, sender: MemoryObjectSendStream[str]) -> None:
        with self._producing:
            async with sender, aclosing(self._frames) as frames:
                async for frame in frames:
                    await sender.send(frame)

    async def _stop_producing(self, stop: anyio.Event) -> None:
        await stop.wait()
        self._producing.cancel()


async def _cancel_on_disconnect(receive: Receive, scope: CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return
