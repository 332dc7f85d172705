"""Recorded runs (``agui-bridge serve --record DIR``): everything needed to replay a run anywhere.

Each run is one JSON Lines file, ``DIR/<UTC time>-<n>-<run id>.jsonl``, written as the run goes
(a run cut short still leaves its file). Every line is an object with a ``type``; ``t`` is the
seconds since the run began (monotonic clock):

- ``run``: the header: ``format`` (``agui-bridge-record/1``), ``bridge_version``
  (``bridge.__version__``), ``started`` (ISO 8601 UTC), ``thread_id``, ``run_id``,
  ``upstream_url`` (the base URL the exchanges' paths are relative to), ``input`` (the
  ``RunAgentInput`` as received, camelCase) and ``config`` (the bridge's settings, without the
  API key and the auth token);
- ``request``: ``exchange`` (1, 2, … within the run), ``method``, ``url``, ``headers`` (without
  ``Authorization`` and the other credential headers), ``body`` (JSON when it parses, else text);
- ``response``: ``exchange``, ``status``, ``reason``, ``http_version``, ``headers`` (a list of
  ``[name, value]`` pairs, as received);
- ``read``: ``exchange`` and the bytes of one network read as they arrived (before any content
  decoding): ``text`` when they are valid UTF-8, else ``base64``;
- ``end``: ``exchange``; ``complete`` (the body was read to its end; false when the bridge stopped
  reading, after ``[DONE]`` say) and ``error`` (how the connection failed, or null; then ``kind``,
  as ``bridge.serve.transport.failure_kind`` reads it: ``closed``, ``read_timeout``, …);
- ``error``: ``exchange``, ``error`` and ``kind``: the request failed before any answer
  (``connect``, ``connect_timeout``, …);
- ``event``: one AG-UI ``event`` the bridge sent its client, as it went out (after the client's
  protocol shaping and redaction);
- ``run_end``: the run is over.

Every line goes through the bridge's ``Redactor``: the key is not in the record even when the
upstream quoted it back; no URL in it holds credentials (``user:password@``) or a query.
``agui-bridge replay DIR`` serves the recorded answers again (``bridge/cli/replay.py``).

The recording is a wrapping ``httpx`` transport plus a hook where frames are written, so the
upstream client itself knows nothing of it. A context variable names the run being recorded: the
upstream request is made from the task that writes that run's frames.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx
from ag_ui.core import RunAgentInput

from bridge import __version__
from bridge.config import BridgeConfig
from bridge.core.upstream_url import shown_url
from bridge.serve.redact import Redactor
from bridge.serve.transport import failure_kind

FORMAT = "agui-bridge-record/1"

#: Request headers that carry credentials: never written.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}
)

_CURRENT: ContextVar[RunRecord | None] = ContextVar("agui_bridge_run_record", default=None)


class Recorder:
    """Writes each run of one app to its own file in ``directory``."""

    def __init__(self, directory: str | Path, config: BridgeConfig, redactor: Redactor) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._redactor = redactor
        settings = dataclasses.asdict(config)
        settings.pop("api_key", None)
        settings.pop("auth_token", None)
        settings["upstream_url"] = shown_url(config.upstream_url)
        self._settings = settings
        self._count = itertools.count(1)

    def wrap(self, inner: httpx.AsyncBaseTransport) -> RecordingTransport:
        """The upstream client's transport (each one it makes: direct, and per proxy from the
        environment), recorded for the run in progress."""
        return RecordingTransport(inner)

    async def recorded(
        self, run_input: RunAgentInput, frames: AsyncGenerator[str, None]
    ) -> AsyncGenerator[str, None]:
        """``frames`` (one run's SSE frames) passed through, the run recorded meanwhile."""
        with self.run(run_input) as record:
            async with contextlib.aclosing(frames):
                async for text in frames:
                    record.frames(text)
                    yield text

    @contextlib.contextmanager
    def run(self, run_input: RunAgentInput) -> Iterator[RunRecord]:
        """Record one run: the upstream exchanges made meanwhile in this task, and its events."""
        started = datetime.now(UTC)
        safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_input.run_id)
        name = f"{started:%Y%m%dT%H%M%S.%fZ}-{next(self._count):04d}-{safe_id[:80]}.jsonl"
        record = RunRecord(self.directory / name, self._redactor)
        record.write(
            "run",
            format=FORMAT,
            bridge_version=__version__,
            started=started.isoformat().replace("+00:00", "Z"),
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            upstream_url=self._settings["upstream_url"],
            input=run_input.model_dump(mode="json", by_alias=True, exclude_none=True),
            config=self._settings,
        )
        token = _CURRENT.set(record)
        try:
            yield record
        finally:
            # The frames generator is closed by the task that iterated it; if it is finalised
            # elsewhere, the variable dies with its task anyway.
            with contextlib.suppress(ValueError):
                _CURRENT.reset(token)
            record.close()


class RunRecord:
    """The open file of one recorded run."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        self._redactor = redactor
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
        self._began = time.monotonic()
        self._exchanges = itertools.count(1)

    def write(self, line_type: str, /, **fields: Any) -> None:
        if self._file is None:
            return
        line = json.dumps(
            {"type": line_type, "t": round(time.monotonic() - self._began, 6), **fields},
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
        self._file.write(self._redactor.redact(line) + "\n")
        self._file.flush()  # a run cut short (a crash, a kill) still leaves what it saw

    def frames(self, text: str) -> None:
        """The SSE frames sent to the client (``data: {…}\\n\\n`` each): one ``event`` line each."""
        for frame in text.split("\n\n"):
            if frame.startswith("data: "):
                self.write("event", event=json.loads(frame[6:]))

    def request(self, request: httpx.Request) -> int:
        exchange = next(self._exchanges)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in SECRET_HEADERS}
        body = request_body(request.content)
        self.write(
            "request",
            exchange=exchange,
            method=request.method,
            url=shown_url(str(request.url)),
            headers=headers,
            body=body,
        )
        return exchange

    def close(self) -> None:
        if self._file is not None:
            self.write("run_end")
            self._file.close()
            self._file = None


class RecordingTransport(httpx.AsyncBaseTransport):
    """Hands requests to ``inner``; those made for a recorded run are written to its record."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        record = _CURRENT.get()
        if record is None:
            return await self._inner.handle_async_request(request)
        exchange = record.request(request)
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            record.write("error", exchange=exchange, error=_describe(exc), kind=failure_kind(exc))
            raise
        version = response.extensions.get("http_version", b"HTTP/1.1")
        reason = response.extensions.get("reason_phrase", b"")
        record.write(
            "response",
            exchange=exchange,
            status=response.status_code,
            reason=reason.decode("latin-1") if isinstance(reason, bytes) else str(reason),
            http_version=version.decode("latin-1") if isinstance(version, bytes) else version,
            headers=[[name, value] for name, value in response.headers.multi_items()],
        )
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _RecordedBody(response.stream, record, exchange)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _RecordedBody(httpx.AsyncByteStream):
    """The response body as it arrives, one ``read`` line per network read."""

    def __init__(self, stream: httpx.AsyncByteStream, record: RunRecord, exchange: int) -> None:
        self._stream = stream
        self._record = record
        self._exchange = exchange
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._stream:
                self._record.write("read", exchange=self._exchange, **_bytes_fields(piece))
                yield piece
        except Exception as exc:
            self._end(complete=False, error=_describe(exc), kind=failure_kind(exc))
            raise
        self._end(complete=True)

    def _end(self, *, complete: bool, error: str | None = None, kind: str | None = None) -> None:
        if not self._ended:
            self._ended = True
            fields: dict[str, Any] = {"complete": complete, "error": error}
            if kind is not None:
                fields["kind"] = kind
            self._record.write("end", exchange=self._exchange, **fields)

    async def aclose(self) -> None:
        self._end(complete=False)
        await self._stream.aclose()


def request_body(raw: bytes) -> Any:
    """A request body as recorded (and matched on replay): JSON when it parses, else text."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _bytes_fields(piece: bytes) -> dict[str, str]:
    try:
        return {"text": piece.decode("utf-8")}
    except UnicodeDecodeError:  # a read that splits a character, or a compressed body
        return {"base64": base64.b64encode(piece).decode("ascii")}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
