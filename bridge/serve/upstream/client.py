"""The upstream client: one pooled ``httpx.AsyncClient``, SSE read as bytes (``sse``), retries of
what failed before the answer began. Every httpx failure becomes the bridge's error, once, by
``failures``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
import httpx
import orjson

from bridge.config import BridgeConfig
from bridge.core.errors import BridgeError, UpstreamProtocolError, UpstreamTimeoutError
from bridge.serve.observe.observation import TurnObservation
from bridge.serve.upstream.body import (
    Body,
    IdleWatch,
    charset_of,
    close_response,
    read_whole,
    whole_answer,
)
from bridge.serve.upstream.failures import UpstreamFailures
from bridge.serve.upstream.parse import parse_json
from bridge.serve.upstream.recording import REQUEST_BODY
from bridge.serve.upstream.sse import SseReader, chunk_from_data
from bridge.serve.upstream.transport import (
    RESENDS,
    TRANSPORT_ERRORS,
    LoopTurns,
    TransportWrapper,
    client_class,
    failure_kind,
)

#: What the upstream's stream carries, one at a time: a JSON object, or ``DONE``.
Chunk = dict[str, Any] | str

# Failures that say "not now" rather than "no": worth another try before the answer began.
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_MODELS_TTL = 60.0

#: The longest ``GET /props`` or ``GET /models`` takes in all: connecting, its head and its
#: whole body. Runs wait on them, and a timeout per read would let a server that sends a byte
#: now and then hold them for ever.
SMALL_ANSWER_DEADLINE = 5.0
#: The largest answer of each, refused before it is read: llama.cpp's /props holds the chat
#: template (tens of KB); a hosted catalogue's /models (OpenRouter's) runs to a megabyte or two.
MAX_PROPS_BYTES = 1024 * 1024
MAX_MODELS_BYTES = 8 * 1024 * 1024
#: A bigger answer is parsed on a worker thread, off the event loop.
_OFF_LOOP_BYTES = 256 * 1024
# Asked for no compression: a few kilobytes of gzip can inflate to gigabytes.
_UNCODED = {"Accept-Encoding": "identity"}


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
        self._idle = IdleWatch(config.idle_timeout)
        self._failures = UpstreamFailures(config, self._origin, self._base)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream_into(
        self,
        body: dict[str, Any],
        take: Callable[[Chunk], bool],
        *,
        path: str = "/chat/completions",
        observe: TurnObservation | None = None,
        flush: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """POST a chat completion (or, with ``path="/responses"``, a Responses API request) and
        hand each of its chunks or events (dicts and ``DONE``) to ``take`` as they arrive, until
        the body ends or ``take`` says the answer is complete (returns true).

        The read drives the run: ``take`` translates and writes at once, and ``flush``, awaited
        before each wait on the network, sends what the last read made in one send. No
        generator between the network and the client: each cost a step a token, and under load
        the steps cost several times what they cost alone (``benchmarks/README.md``, issue 34).

        A server that answers the streaming request with one JSON body (some do when tools are
        given) gives that body: the translator reads a whole ``chat.completion`` (or
        ``response``) like a chunk. ``observe``: the turn's telemetry, told of each answer and
        retry; the request carries its trace context.
        """
        response = await self._open(body, path, observe)
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            try:
                take(await whole_answer(response, content_type, self._config.max_line_bytes))
            except TRANSPORT_ERRORS as exc:
                raise self._failures.translate(exc) from exc
            finally:
                await close_response(response)
            return
        chat = path == "/chat/completions"
        charset = charset_of(response)
        reader = SseReader(self._config.max_line_bytes)
        clock = time.monotonic
        # The body closes the response from here on. Read from aiohttp's buffer, it lets
        # httpx's request and response go for the stream's life (``Body``), once this frame
        # holds them no more.
        piece_of = Body(response)
        del response
        watched = piece_of.own_idle_timeout()
        # Read from aiohttp's buffer, nothing under the loop lets the event loop in: the loop
        # does (``LoopTurns``). Any other body is read through the transport's
        # ``YieldingStream``, which does already.
        turns = None
        if watched:
            self._idle.add(piece_of)
            turns = LoopTurns()
        try:
            while True:
                if flush is not None:
                    await flush()  # before waiting on the network
                before = piece_of.waiting = clock()
                piece = await piece_of.read()
                after = clock()
                piece_of.waiting = 0.0
                if not piece:
                    break
                for event, data in reader.feed(piece):
                    if charset is not None:
                        data = data.decode(charset, "replace").encode()
                    item = chunk_from_data(data, event, wrap_error_events=chat)
                    if item is not None and take(item):
                        # Complete: whatever a server sends after is not ours. Its frames
                        # leave now; the body's end is waited for, briefly (``settle``).
                        if flush is not None:
                            await flush()
                        await piece_of.settle()
                        return
                # Not held while the next read waits (the last chunk, parsed, and its bytes:
                # about 0.8 KiB an open stream).
                piece = data = b""
                item = None
                if reader.failure is not None:
                    raise reader.failure
                if turns is not None and turns.due(before, after):
                    await asyncio.sleep(0)
        except TRANSPORT_ERRORS as exc:
            raise self._failures.translate(exc) from exc
        finally:
            if watched:
                self._idle.discard(piece_of)
            try:
                await piece_of.aclose()
            except TRANSPORT_ERRORS as exc:
                raise self._failures.translate(exc) from exc

    async def stream(
        self,
        body: dict[str, Any],
        path: str = "/chat/completions",
        observe: TurnObservation | None = None,
    ) -> AsyncGenerator[Chunk, None]:
        """``stream_into``'s chunks, one at a time, for a reader that pulls (the doctor): the
        read runs in a task of its own, a network read ahead at most."""
        chunks: asyncio.Queue[tuple[Chunk | None, BaseException | None]] = asyncio.Queue()

        def take(chunk: Chunk) -> bool:
            chunks.put_nowait((chunk, None))
            return False

        async def read() -> None:
            error: BaseException | None = None
            try:
                await self.stream_into(body, take, path=path, observe=observe, flush=chunks.join)
            except Exception as exc:
                error = exc
            chunks.put_nowait((None, error))

        reading = asyncio.create_task(read())
        try:
            while True:
                chunk, error = await chunks.get()
                chunks.task_done()
                if error is not None:
                    raise error
                if chunk is None:
                    return
                yield chunk
        finally:
            reading.cancel()
            await asyncio.wait([reading])

    async def _open(
        self, body: dict[str, Any], path: str, observe: TurnObservation | None
    ) -> httpx.Response:
        """Send the request, retrying only what failed before the answer began."""
        url = f"{self._base}{path}"
        headers = _JSON
        # The run's observation counts its resends: the transport's budget (transport.py).
        extensions: dict[str, Any] = {}
        if observe is not None:
            headers = {**_JSON, **observe.headers()}
            extensions = {RESENDS: observe}
        attempt = 0
        while True:
            try:
                # The body as built goes along for --record, which would parse the bytes again.
                request = self._client.build_request(
                    "POST",
                    url,
                    content=request_body(body),
                    headers=headers,
                    extensions={**extensions, REQUEST_BODY: body},
                )
                response = await self._client.send(request, stream=True)
            except TRANSPORT_ERRORS as exc:
                # Nothing of an answer was received: a dropped connection is as retryable as a
                # refused one. (A pooled connection the server had closed gets here only once
                # the run spent its resends: the transport sends the request again at once on a
                # new one, transport.py.)
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
                await close_response(response)
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
        """The upstream's ``GET /v1/models`` ids, cached for a minute; empty if it has none, or
        they could not be read."""
        now = time.monotonic()
        if self._models is None or now - self._models[0] > _MODELS_TTL:
            try:
                data = await self._small_json(f"{self._base}/models", MAX_MODELS_BYTES)
            except BridgeError:
                data = None  # as a server without a list: asked again after the minute
            listed = data.get("data") if isinstance(data, dict) else None
            models = listed if isinstance(listed, list) else []
            ids = [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
            ids = [name for name in ids if name]
            self._models = (now, ids)
        return self._models[1]

    async def llama_cpp_props(self, model: str | None = None) -> dict[str, Any] | None:
        """llama.cpp's ``GET /props``, read now (``bridge.serve.run.props`` caches it), for
        ``model``: llama.cpp's router answers for that model, a single-model server ignores the
        query. ``None`` for a server without it (HTTP 404 or 405, not a JSON object). Raises
        ``BridgeError`` when it could not be read: no connection, no whole answer within
        ``SMALL_ANSWER_DEADLINE``, one over ``MAX_PROPS_BYTES`` or compressed, another HTTP
        error (llama.cpp's 503 while it loads; the router's 400 for a model not loaded)."""
        # autoload=false: reading /props must not make the router load a model (and wait).
        query = {"model": model, "autoload": "false"} if model else None
        url = f"{self._base.removesuffix('/v1')}/props"
        data = await self._small_json(url, MAX_PROPS_BYTES, query)
        return data if isinstance(data, dict) else None

    async def _small_json(self, url: str, limit: int, query: dict[str, str] | None = None) -> Any:
        """``GET url``'s JSON; ``None`` for HTTP 404 or 405, or an answer that is not JSON.
        Bounded before the work (see ``SMALL_ANSWER_DEADLINE``, ``MAX_PROPS_BYTES``); raises
        ``BridgeError`` when it could not be read."""
        what = f"GET {httpx.URL(url).path}"
        deadline = asyncio.timeout(SMALL_ANSWER_DEADLINE)
        try:
            async with deadline:
                request = self._client.build_request("GET", url, params=query, headers=_UNCODED)
                response = await self._client.send(request, stream=True)
                try:
                    if response.status_code in (404, 405):
                        return None
                    if response.status_code >= 400:
                        raise await self._failures.http_error(response)
                    coding = response.headers.get("content-encoding", "identity").lower()
                    if coding not in ("identity", ""):
                        raise UpstreamProtocolError(
                            f"the upstream answered {what} in {coding}, though asked for no "
                            "content coding"
                        )
                    raw = await read_whole(response, limit, what)
                finally:
                    await close_response(response)
        except TRANSPORT_ERRORS as exc:
            if deadline.expired():
                raise UpstreamTimeoutError(
                    f"the upstream did not answer {what} within {SMALL_ANSWER_DEADLINE:g} s"
                ) from exc
            raise self._failures.translate(exc, answering=False) from exc
        try:
            if len(raw) > _OFF_LOOP_BYTES:
                return await anyio.to_thread.run_sync(parse_json, raw)
            return parse_json(raw)
        except ValueError:
            return None


_JSON = {"Content-Type": "application/json"}


def request_body(body: dict[str, Any]) -> bytes:
    """The request's JSON, as httpx would write it (compact, UTF-8, no NaN), by orjson: a body
    that carries a big tool result (megabytes) is written in a few milliseconds on the event
    loop, where ``json.dumps`` held it for tens (it does not release the GIL, so a worker thread
    would not help). What orjson refuses (integers past 64 bits) goes through ``json``.

    A copy of orjson's bytes, which keep the buffer it wrote them in (4 KiB for a body of 50
    bytes, 1 MiB for one of 100 KiB): the body is held for the whole stream."""
    try:
        return memoryview(orjson.dumps(body)).tobytes()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
