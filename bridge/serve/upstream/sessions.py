"""httpx's requests sent on an aiohttp session of ours (``Sessions``, httpx-aiohttp's transport).

What it changes from ``httpx-aiohttp``'s own:

- aiohttp's connection cap lifted as httpx's ``max_connections=None`` asks, a read buffer the size
  httpx's transport holds, and no connection kept for a transport that should keep none;
- the request's headers handed to aiohttp as aiohttp keeps them (``AiohttpHeaders``): an answer
  holds its request's headers for its whole life, and a stream's answer lives as long as the
  stream, so the names and the values every request repeats are made once, not per request;
- which connection a request went out on (``ConnectionUse``), told by aiohttp's trace hooks as the
  request's trace context, and by httpcore's as its ``trace`` extension (no context variable: a
  connection keeps the context it was made in for its whole life).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from httpx_aiohttp.transport import AiohttpResponseStream, map_aiohttp_exceptions
from multidict import CIMultiDict, istr


class ConnectionUse:
    """Which connection one attempt at a request went out on, as the transport's hooks tell."""

    __slots__ = ("dialled", "reused")

    def __init__(self) -> None:
        self.dialled = False  # a new connection was made for it
        self.reused = False  # it went out on a connection from the pool

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: the request's head goes out on a pooled connection
        unless a connection was made for it first (``connection.connect_tcp``; ``socks.…``
        through a SOCKS proxy; a tunnel's CONNECT is sent on the connection just made)."""
        if event.endswith((".connect_tcp.started", ".connect_unix_socket.started")):
            self.dialled = True
        elif event.endswith(".send_request_headers.started"):
            self.reused = not self.dialled


#: The request extension that carries its ``ConnectionUse`` to the transport.
USE = "agui_bridge.connection_use"


def _connection_trace() -> aiohttp.TraceConfig:
    """aiohttp's hooks: a connection taken from the pool, or one being made, told to the
    request's ``ConnectionUse`` (its trace context, when it has one)."""

    async def reused(_: aiohttp.ClientSession, context: SimpleNamespace, __: object) -> None:
        if isinstance(use := context.trace_request_ctx, ConnectionUse):
            use.reused = True

    async def dialled(_: aiohttp.ClientSession, context: SimpleNamespace, __: object) -> None:
        if isinstance(use := context.trace_request_ctx, ConnectionUse):
            use.dialled, use.reused = True, False

    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(reused)
    trace.on_connection_create_start.append(dialled)
    return trace


#: Request headers that carry credentials (a recording never writes them either).
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}
)

#: Headers whose values are the request's alone (credentials, its length, its trace): never kept.
_PER_REQUEST = SECRET_HEADERS | {"content-length", "traceparent", "tracestate"}


class AiohttpHeaders:
    """A request's headers as aiohttp keeps them, from httpx's: names as ``istr`` (as aiohttp's
    own header names are, so its case-insensitive dict makes no lower-cased copy of each), and
    each name, and each value a request repeats, made once for all requests. At most ``LIMIT``
    names and as many pairs are kept, then the store starts again: a caller's own headers cannot
    grow it. Credentials and lengths are never kept."""

    LIMIT = 256

    __slots__ = ("_names", "_pairs")

    def __init__(self) -> None:
        # A name as sent: (the name, whether its value is the request's alone)
        self._names: dict[bytes, tuple[istr, bool]] = {}
        self._pairs: dict[tuple[bytes, bytes], tuple[istr, str]] = {}

    def of(self, headers: httpx.Headers) -> CIMultiDict[str]:
        encoding = headers.encoding
        result: CIMultiDict[str] = CIMultiDict()
        for raw, value in headers.raw:
            pair = self._pairs.get((raw, value))
            if pair is None:
                name, alone = self._name(raw, encoding)
                pair = (name, value.decode(encoding))
                if not alone:
                    if len(self._pairs) >= self.LIMIT:
                        self._pairs.clear()
                    self._pairs[raw, value] = pair
            result.add(*pair)
        return result

    def _name(self, raw: bytes, encoding: str) -> tuple[istr, bool]:
        known = self._names.get(raw)
        if known is None:
            if len(self._names) >= self.LIMIT:
                self._names.clear()
            name = istr(raw.decode(encoding))
            known = self._names[raw] = (name, name.lower() in _PER_REQUEST)
        return known


class Sessions(AiohttpTransport):
    """httpx-aiohttp's transport on a session of ours (module docstring)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._headers = AiohttpHeaders()

    def get_client(self) -> aiohttp.ClientSession:
        # No connection kept: aiohttp's force_close (which refuses a keep-alive timeout).
        keep = {"keepalive_timeout": self.limits.keepalive_expiry}
        if self.limits.max_keepalive_connections == 0:
            keep = {"force_close": True}
        connector = aiohttp.TCPConnector(
            limit=self.limits.max_connections or 0,  # 0: no cap, as httpx's None
            ssl=self.ssl_context,
            **keep,  # type: ignore[arg-type]
        )
        # aiohttp stops reading a response when its buffer passes twice this: 64 KiB held per
        # stream at most, as httpx's transport holds (a slow client slows the upstream).
        return aiohttp.ClientSession(
            connector=connector, read_bufsize=32 * 1024, trace_configs=[_connection_trace()]
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """As httpx-aiohttp's, with the headers as aiohttp keeps them and the request's
        ``ConnectionUse`` as its trace context."""
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        timeout = request.extensions.get("timeout", {})
        proxy = self.proxy
        with map_aiohttp_exceptions():
            data: bytes | httpx.AsyncByteStream | None
            try:
                data = request.content or None
            except httpx.RequestNotRead:
                data = request.stream  # type: ignore[assignment]
                request.headers.pop("transfer-encoding", None)  # aiohttp's to set
            response = await self.client.request(
                method=request.method,
                url=str(request.url),
                headers=self._headers.of(request.headers),
                data=data,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=aiohttp.ClientTimeout(
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                    connect=timeout.get("pool"),
                ),
                server_hostname=request.extensions.get("sni_hostname"),
                proxy=str(proxy.url) if proxy else None,
                proxy_auth=aiohttp.BasicAuth(*proxy.auth) if proxy and proxy.auth else None,
                proxy_headers=proxy.headers if proxy else None,
                trace_request_ctx=request.extensions.get(USE),
            ).__aenter__()
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=AiohttpResponseStream(response),
            request=request,
            extensions=extensions,
        )
