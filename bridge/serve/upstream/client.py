"""The upstream client: one pooled ``httpx.AsyncClient``, SSE read with httpx-sse, retries of
what failed before the answer began. Every httpx failure becomes the bridge's error, once, by
``failures``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import httpx
import orjson
from httpx_sse import EventSource

from bridge.config import BridgeConfig
from bridge.core.encode import without_lone_surrogates
from bridge.core.errors import (
    UpstreamProtocolError,
)
from bridge.serve.observe.observation import TurnObservation
from bridge.serve.upstream.burst import READ_BURST
from bridge.serve.upstream.failures import UpstreamFailures
from bridge.serve.upstream.sse import chunk_from_sse
from bridge.serve.upstream.transport import (
    TRANSPORT_ERRORS,
    TransportWrapper,
    client_class,
    failure_kind,
)

# Failures that say "not now" rather than "no": worth another try before the answer began.
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_MODELS_TTL = 60.0


class UpstreamClient:
    """Talks to one OpenAI-compatible server for the whole app (connections are pooled)."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        wrap: TransportWrapper | None = None,
    ):
        """``transport`` replaces the network (tests); ``wrap`` wraps each transport the client
        makes (recording)."""
        self._config = config
        self._origin = httpx.URL(config.upstream_url)
        # Credentials in the URL (a proxy's basic auth) go as httpx's auth, in the header:
        # aiohttp refuses them in the URL beside an Authorization header, and the URLs the
        # bridge shows or records hold none.
        self._base = str(self._origin.copy_with(userinfo=b""))
        auth = (
            httpx.BasicAuth(self._origin.username, self._origin.password)
            if self._origin.userinfo
            else None
        )
        headers = {"Accept": "text/event-stream, application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = client_class(config.upstream_transport, wrap)(
            headers=headers,
            auth=auth,
            timeout=httpx.Timeout(
                connect=config.connect_timeout,
                read=config.idle_timeout,
                write=config.idle_timeout,
                pool=config.connect_timeout,
            ),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            transport=transport,
            trust_env=True,  # HTTP(S)_PROXY etc., as the openai SDK honours them
        )
        self._models: tuple[float, list[str]] | None = None
        self._failures = UpstreamFailures(config, self._origin, self._base)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(
        self,
        body: dict[str, Any],
        path: str = "/chat/completions",
        observe: TurnObservation | None = None,
    ) -> AsyncGenerator[dict[str, Any] | str, None]:
        """POST a chat completion (or, with ``path="/responses"``, a Responses API request) and
        yield its chunks or events (dicts and ``DONE``) as they arrive.

        A server that answers the streaming request with one JSON body (some do when tools are
        given) yields that body: the translator reads a whole ``chat.completion`` (or
        ``response``) like a chunk. ``observe``: the turn's telemetry, told of each answer and
        retry; the request carries its trace context.
        """
        response = await self._open(body, path, observe)
        try:
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" in content_type:
                response.stream = _LineLimit(response.stream, self._config.max_line_bytes)
                chat = path == "/chat/completions"
                async for event in EventSource(response).aiter_sse():
                    item = chunk_from_sse(event, wrap_error_events=chat)
                    if item is not None:
                        yield item
            elif "json" in content_type:
                yield _json_object(await response.aread())
            else:
                raise UpstreamProtocolError(
                    f"the upstream answered with {content_type or 'no content type'!r}, "
                    "not an event stream"
                )
        except TRANSPORT_ERRORS as exc:
            raise self._failures.translate(exc) from exc
        finally:
            await response.aclose()

    async def _open(
        self, body: dict[str, Any], path: str, observe: TurnObservation | None
    ) -> httpx.Response:
        """Send the request, retrying only what failed before the answer began."""
        url = f"{self._base}{path}"
        headers = _JSON
        if observe is not None:
            headers = {**_JSON, **observe.headers()}
        attempt = 0
        while True:
            try:
                response = await self._client.send(
                    self._client.build_request(
                        "POST", url, content=request_body(body), headers=headers
                    ),
                    stream=True,
                )
            except TRANSPORT_ERRORS as exc:
                # Nothing of an answer was received: a dropped connection is as retryable as a
                # refused one. (A pooled connection the server had closed never gets here: the
                # transport sends the request again at once on a new one, transport.py.)
                retryable = failure_kind(exc) in ("connect", "connect_timeout", "closed")
                if not retryable or attempt >= self._config.retries:
                    raise self._failures.translate(exc, answering=False) from exc
                await anyio.sleep(self._backoff(attempt))
                if observe is not None:
                    observe.retry()
                attempt += 1
                continue
            if observe is not None:
                observe.answered(response.status_code)
            if response.status_code < 400:
                return response
            try:
                error = await self._failures.http_error(response)
            except TRANSPORT_ERRORS as exc:
                raise self._failures.translate(exc) from exc
            finally:
                await response.aclose()
            if "stream_options" in body and "stream_options" in error.message:
                body = {key: value for key, value in body.items() if key != "stream_options"}
                continue
            if error.status not in _RETRY_STATUSES or attempt >= self._config.retries:
                raise error
            delay = self._backoff(attempt)
            if error.retry_after is not None:
                if error.retry_after > self._config.retry_after_cap:
                    raise error  # the message already says when to retry
                delay = max(delay, error.retry_after)
            await anyio.sleep(delay)
            if observe is not None:
                observe.retry()
            attempt += 1

    def _backoff(self, attempt: int) -> float:
        # Exponential, with jitter so that many runs failing together do not retry together.
        return float(self._config.retry_backoff * 2**attempt * random.uniform(0.5, 1.5))

    async def get(self, path: str) -> httpx.Response:
        """``GET {upstream_url}{path}``, read whole. An HTTP error status raises
        ``UpstreamHTTPError`` and a failed connection its ``BridgeError``, as they do for a run
        (the doctor reports them)."""
        try:
            response = await self._client.get(f"{self._base}{path}")
            if response.status_code >= 400:
                raise await self._failures.http_error(response)
        except TRANSPORT_ERRORS as exc:
            raise self._failures.translate(exc, answering=False) from exc
        return response

    async def list_models(self) -> list[str]:
        """The upstream's ``GET /v1/models`` ids, cached for a minute; empty if it has none."""
        now = time.monotonic()
        if self._models is None or now - self._models[0] > _MODELS_TTL:
            ids: list[str] = []
            try:
                response = await self._client.get(f"{self._base}/models", timeout=5.0)
                data = response.json().get("data", []) if response.status_code == 200 else []
                ids = [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
            except (*TRANSPORT_ERRORS, ValueError, AttributeError):
                pass
            self._models = (now, ids)
        return self._models[1]

    async def llama_cpp_props(self, model: str | None = None) -> dict[str, Any] | None:
        """llama.cpp's ``GET /props``, read now (``bridge.serve.run.props`` caches it), for
        ``model``: llama.cpp's router answers for that model, a single-model server ignores the
        query. ``None`` for a server without it (HTTP 404 or 405, not a JSON object). Raises
        ``BridgeError`` when it could not be read: no connection, a timeout, another HTTP error
        (llama.cpp's 503 while it loads; the router's 400 for a model not loaded)."""
        # autoload=false: reading /props must not make the router load a model (and wait).
        query = {"model": model, "autoload": "false"} if model else None
        try:
            response = await self._client.get(
                f"{self._base.removesuffix('/v1')}/props", params=query, timeout=5.0
            )
            if response.status_code in (404, 405):
                return None
            if response.status_code >= 400:
                raise await self._failures.http_error(response)
        except TRANSPORT_ERRORS as exc:
            raise self._failures.translate(exc, answering=False) from exc
        try:
            data = response.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UpstreamProtocolError("the upstream answered with JSON that does not parse") from exc
    if not isinstance(data, dict):
        raise UpstreamProtocolError("the upstream answered with JSON that is not an object")
    return dict(without_lone_surrogates(data))


class _LineLimit(httpx.AsyncByteStream):
    """Passes the body through, failing once a line grows past ``limit`` bytes (a server that
    never sends a newline must not grow our buffers without bound)."""

    def __init__(self, stream: httpx.AsyncByteStream | httpx.SyncByteStream, limit: int) -> None:
        assert isinstance(stream, httpx.AsyncByteStream)
        self._stream = stream
        self._limit = limit
        self._line = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = self._limit
        burst = READ_BURST.get()  # the response being written: one send per network read
        pieces = aiter(self._stream)
        while True:
            if burst is not None:
                await burst.end()  # before waiting on the network: write what the last read made
            try:
                piece = await anext(pieces)
            except StopAsyncIteration:
                break
            if burst is not None:
                burst.reading = True
            text = piece.replace(b"\r", b"\n") if b"\r" in piece else piece
            lines = text.split(b"\n")
            if len(lines) == 1:
                self._line += len(piece)
                if self._line > limit:
                    self._fail()
            else:
                longest = max(self._line + len(lines[0]), len(lines[-1]))
                if len(piece) > limit:  # only then can a line inside one piece be too long
                    longest = max([longest, *map(len, lines[1:-1])])
                if longest > limit:
                    # Hand on the complete lines before the long one: their events are good.
                    complete = self._complete_before_overflow(lines)
                    if complete:
                        yield piece[:complete]
                    self._fail()
                self._line = len(lines[-1])
            yield piece

    def _complete_before_overflow(self, lines: list[bytes]) -> int:
        offset, carried = 0, self._line
        for line in lines:
            if carried + len(line) > self._limit:
                break
            offset += len(line) + 1
            carried = 0
        return offset

    def _fail(self) -> None:
        raise UpstreamProtocolError(f"the upstream sent a line longer than {self._limit} bytes")

    async def aclose(self) -> None:
        await self._stream.aclose()


_JSON = {"Content-Type": "application/json"}


def request_body(body: dict[str, Any]) -> bytes:
    """The request's JSON, as httpx would write it (compact, UTF-8, no NaN), by orjson: a body
    that carries a big tool result (megabytes) is written in a few milliseconds on the event
    loop, where ``json.dumps`` held it for tens (it does not release the GIL, so a worker thread
    would not help). What orjson refuses (integers past 64 bits) goes through ``json``."""
    try:
        return orjson.dumps(body)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
