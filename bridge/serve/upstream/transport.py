"""The upstream client's transport: httpx's API over aiohttp's HTTP/1.1 (``httpx-aiohttp``).

Why: under real load every token is one network read from the upstream, and reading one small
SSE frame costs about three times as much CPU through httpx's own transport (httpcore, h11 and
anyio, with a cancel scope per read) as through aiohttp's (benchmarks/concurrency.py; the openai
SDK offers the same swap for the same reason). The bridge keeps httpx's API for requests and its
own error classification, and reads a streamed body from aiohttp's buffer (``Body``);
``--upstream-transport httpx`` goes back to httpx's transport.

What this module adds to ``httpx-aiohttp``: a streamed body read as it arrives, the event loop
let in while it reads (``Body``, ``LoopTurns``); the same transport for proxies from the
environment; and ``failure_kind``, which reads what failed from the transport's own exception
(httpx-aiohttp maps some aiohttp errors to httpx's coarsely: a refused connection becomes
``ConnectTimeout``). The aiohttp session under it, with aiohttp's connection cap lifted as httpx's
``max_connections=None`` asks (aiohttp's default caps at 100 connections, which would queue the
101st stream), is ``bridge.serve.upstream.sessions``.

Both transports, aiohttp's and httpx's own, send a request again at once on a new connection when
a pooled one fails it before any answer: llama.cpp's ``llama-server`` closes its connection after
each streamed answer though it answered ``Keep-Alive: timeout=5, max=100``, so a request sent
right after one goes out on a connection whose close is on its way. That is no failing server:
no backoff, no retry counted, and the recording above the transport sees one exchange.

But a server may have read the whole request, and run the model, before it closed: so a resend
goes out on a connection made for it, never another pooled one (which the server may close the
same way), and a run has ``MAX_RESENDS`` in all, whatever its turns and retries: its observation,
carried by the request (``RESENDS``), counts them. Past that, a pooled connection closed before
any answer is the caller's failure to retry (with backoff, counted) or report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar, Literal, Protocol

import aiohttp
import httpx

from bridge.config import UpstreamTransport
from bridge.serve.upstream.sessions import USE, ConnectionUse, Sessions

FailureKind = Literal["connect_timeout", "read_timeout", "connect", "closed", "other"]
"""What went wrong on the wire: not connected in time, silent too long, could not connect, the
connection closed (or broke) under us, or anything else."""

#: Everything a transport raises for a failure on the wire.
TRANSPORT_ERRORS = (httpx.HTTPError, aiohttp.ClientError, asyncio.TimeoutError)


_LIMITS = httpx.Limits()

#: The most resends of one run, all its requests and their retries together (module docstring).
MAX_RESENDS = 8

#: The request extension that names who counts the run's resends (``Resends``).
RESENDS = "agui_bridge.resends"


class Resends(Protocol):
    """Who counts a run's resends: how many so far, all its requests together, and one more."""

    @property
    def resends(self) -> int: ...

    def resent(self) -> None: ...


async def _resent_if_stale(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]],
    send_anew: Callable[[httpx.Request], Awaitable[httpx.Response]],
    request: httpx.Request,
) -> httpx.Response:
    """``send(request)``; if a pooled connection closed under it before any answer, once more at
    once on a connection made for it (``send_anew``), while the run has resends left (see the
    module docstring). A new connection that fails is the caller's to retry or report, as is a
    body that cannot be sent twice (a stream)."""
    use = ConnectionUse()
    # aiohttp's hooks find it as USE; httpcore calls its ``trace`` (a caller's own trace wins)
    request.extensions = {"trace": use.trace, **request.extensions, USE: use}
    try:
        return await send(request)
    except TRANSPORT_ERRORS as exc:
        stale = use.reused and failure_kind(exc) == "closed"
        # A request of no run (/props, /models, the doctor's) is resent once, as any request is.
        counted: Resends | None = request.extensions.get(RESENDS)
        spent = counted is not None and counted.resends >= MAX_RESENDS
        if not stale or spent or not _in_memory(request):
            raise
        if counted is not None:
            counted.resent()
    return await send_anew(request)


def _in_memory(request: httpx.Request) -> bool:
    try:
        request.content  # noqa: B018  # raises for a streamed body, which was consumed
    except httpx.RequestNotRead:
        return False
    return True


#: The settings of a transport's twin for resends: no connection kept (each request makes its
#: own, closed after its answer).
_NONE_KEPT = httpx.Limits(max_connections=None, max_keepalive_connections=0)


class _Resending(httpx.AsyncBaseTransport):
    """A transport that sends a request a pooled connection failed again at once on its twin,
    ``plain`` with the same settings but keeping no connection (``_resent_if_stale``)."""

    plain: ClassVar[Callable[..., httpx.AsyncBaseTransport]]

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._settings = settings
        self._anew: httpx.AsyncBaseTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await _resent_if_stale(super().handle_async_request, self._send_anew, request)

    async def _send_anew(self, request: httpx.Request) -> httpx.Response:
        if self._anew is None:
            self._anew = self.plain(**{**self._settings, "limits": _NONE_KEPT})
        return await self._anew.handle_async_request(request)

    async def aclose(self) -> None:
        await super().aclose()
        if self._anew is not None:
            await self._anew.aclose()


class _AiohttpTransport(_Resending, Sessions):
    plain = Sessions


class _HttpcoreTransport(_Resending, httpx.AsyncHTTPTransport):
    plain = httpx.AsyncHTTPTransport


class _PooledClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose transports, direct and for proxies, are ``transport_class``."""

    transport_class: ClassVar[Callable[..., httpx.AsyncBaseTransport]]

    def _init_transport(
        self,
        verify: Any = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ) -> httpx.AsyncBaseTransport:
        if transport is not None:
            return transport
        return self.transport_class(
            verify=verify, cert=cert, trust_env=trust_env, http1=http1, http2=http2, limits=limits
        )

    def _init_proxy_transport(
        self,
        proxy: httpx.Proxy,
        verify: Any = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _LIMITS,
        **kwargs: Any,
    ) -> httpx.AsyncBaseTransport:
        return self.transport_class(
            verify=verify,
            cert=cert,
            trust_env=trust_env,
            http1=http1,
            http2=http2,
            limits=limits,
            proxy=proxy,
        )


class AiohttpClient(_PooledClient):
    """``httpx.AsyncClient`` whose transports (direct and for proxies) are aiohttp's."""

    transport_class = _AiohttpTransport


class HttpxClient(_PooledClient):
    """``httpx.AsyncClient`` on httpx's own transport (httpcore), resending as aiohttp's does."""

    transport_class = _HttpcoreTransport


TransportWrapper = Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport]
"""Wraps each transport the client makes (``serve --record`` records through one)."""


#: The longest a response body is read without letting the event loop run other tasks.
YIELD_INTERVAL = 0.005


class _Yielding(httpx.AsyncBaseTransport):
    """Response bodies that let the event loop in at least every ``YIELD_INTERVAL`` seconds.

    A read of data already buffered returns without suspending (aiohttp's does, and so does
    writing to a client whose socket has room), and asyncio never preempts: a server that writes
    back to back would keep the reading task running alone, so no other stream, health check or
    new run would be served, and the task would never see its cancellation when its client
    leaves. The yield is timed, not counted: a stream that waits on the network anyway pays at
    most one extra loop turn per interval."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = YieldingStream(response.stream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


#: A read that took this long waited on the network: the event loop ran others meanwhile.
_WAITED = 0.000_25


class LoopTurns:
    """When a loop that reads a body must let the event loop in (``due(before, after)`` after
    each piece, with the clock before and after its read): once ``YIELD_INTERVAL`` has passed
    since the loop last had a turn. A read that waited on the network gave it one, so a paced
    stream pays no extra turn per token; a read of data already buffered returns at once, and
    a reader that only ever finds data waiting yields every ``YIELD_INTERVAL``."""

    __slots__ = ("_turn",)

    def __init__(self) -> None:
        self._turn = time.monotonic()

    def due(self, before: float, after: float) -> bool:
        if after - before >= _WAITED:
            self._turn = after
            return False
        if after - self._turn >= YIELD_INTERVAL:
            self._turn = after  # the caller's sleep(0) follows
            return True
        return False


class YieldingStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self.inner = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        turns = LoopTurns()
        clock = time.monotonic
        pieces = aiter(self.inner)
        while True:
            before = clock()
            try:
                piece = await anext(pieces)
            except StopAsyncIteration:
                return
            after = clock()
            yield piece
            if turns.due(before, after):
                await asyncio.sleep(0)

    async def aclose(self) -> None:
        await self.inner.aclose()


def client_class(
    transport: UpstreamTransport, wrap: TransportWrapper | None = None
) -> type[httpx.AsyncClient]:
    """The client class for ``transport``: every transport it makes, the direct one and one per
    proxy from the environment, yields to the event loop as it reads (``_Yielding``) and, with
    ``wrap``, goes through ``wrap`` (passing a transport in instead would make httpx drop the
    environment's proxies)."""
    base: type[httpx.AsyncClient] = AiohttpClient if transport == "aiohttp" else HttpxClient

    def wrapper(inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        return _Yielding(wrap(inner) if wrap is not None else inner)

    class Wrapped(base):  # type: ignore[valid-type,misc]
        def _init_transport(self, *args: Any, **kwargs: Any) -> httpx.AsyncBaseTransport:
            return wrapper(super()._init_transport(*args, **kwargs))

        def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx.AsyncBaseTransport:
            return wrapper(super()._init_proxy_transport(*args, **kwargs))

    return Wrapped


def failure_kind(exc: BaseException) -> FailureKind:
    """What failed, from httpx's exception or the aiohttp exception behind it."""
    cause = exc.__cause__ if isinstance(exc, httpx.HTTPError) and exc.__cause__ else exc
    if isinstance(cause, aiohttp.ClientError | asyncio.TimeoutError):
        return _aiohttp_kind(cause)
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return "connect_timeout"
    if isinstance(exc, httpx.TimeoutException):
        return "read_timeout"
    if isinstance(exc, httpx.ConnectError):
        return "connect"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "closed"
    return "other"


def _aiohttp_kind(exc: BaseException) -> FailureKind:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "connect_timeout"
    if isinstance(exc, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        return "read_timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect"
    if isinstance(
        exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientOSError
    ):
        return "closed"
    return "other"
