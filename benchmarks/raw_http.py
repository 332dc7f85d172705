"""A light HTTP client for the benchmarks that read thousands of frames a second.

Not httpx: when thousands of reads a second go through a client that shares two cores with
the servers, httpx's cost per read (tens of µs) makes the client the bottleneck; a protocol
callback costs a few µs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit


class _RawResponse(asyncio.Protocol):
    def __init__(self, request: bytes, on_data: Callable[[bytes, int], None]) -> None:
        self.request = request
        self.on_data = on_data
        self.status_line = b""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.WriteTransport, transport).write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time_ns()
        if not self.status_line:
            self.status_line = data.partition(b"\r\n")[0]
        self.on_data(data, now)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def post_raw(
    url: str, body: Mapping[str, Any], on_data: Callable[[bytes, int], None], *, within: float
) -> bool:
    """POST JSON and hand every read of the answer to ``on_data(data, time.time_ns())``, HTTP
    framing and all; True if the status was 200. More than ``within`` seconds is an error.

    ``Connection: close``: the answer ends when the server closes. The servers under test write
    whole SSE frames in each HTTP chunk, so chunk headers (``\\r\\n``-delimited) never split a
    frame; a TCP read can.
    """
    where = urlsplit(url)
    payload = json.dumps(body).encode()
    request = (
        f"POST {where.path or '/'} HTTP/1.1\r\nHost: {where.netloc}\r\n"
        "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode() + payload
    loop = asyncio.get_running_loop()
    transport, response = await loop.create_connection(
        lambda: _RawResponse(request, on_data), where.hostname or "127.0.0.1", where.port or 80
    )
    try:
        # An answer that hangs fails the benchmark instead of the benchmark hanging.
        await asyncio.wait_for(response.closed, within)
    finally:
        transport.close()
    return response.status_line.startswith(b"HTTP/1.1 200")
