"""Recorded runs (``agui-bridge serve --record DIR``): everything needed to replay a run anywhere.

Each run is one JSON Lines file, ``DIR/<UTC time>-<pid>-<n>-<run id>.jsonl``, written as the run
goes (a run cut short still leaves its file). Every line is an object with a ``type``; ``t`` is the
seconds since the run began (monotonic clock):

- ``run``: the header: ``format`` (``agui-bridge-record/2``), ``bridge_version``
  (``bridge.__version__``), ``started`` (ISO 8601 UTC), ``thread_id``, ``run_id``,
  ``upstream_url`` (the base URL the exchanges' paths are relative to), ``input`` (the
  ``RunAgentInput`` as received, camelCase) and ``config`` (the bridge's settings, without the
  API key and the auth token, its URLs and MCP command lines without credentials);
- ``request``: ``exchange`` (1, 2, … within the run), ``method``, ``url``, ``headers`` (without
  ``Authorization`` and the other credential headers), ``body`` (JSON when it parses, else text);
- ``response``: ``exchange``, ``status``, ``reason``, ``http_version``, ``headers`` (a list of
  ``[name, value]`` pairs, as received) and, when the body came compressed, ``decoded``: the
  content codings (``["gzip"]``) the ``read`` lines are already decoded from;
- ``read``: ``exchange`` and the body's bytes as one network read brought them (decoded, see
  ``decoded``): ``text`` when they are valid UTF-8, else ``base64``. An end that may begin a
  secret is held back and written with the next read (or at the body's end), so the secret is
  found whole. A body that fails to decode is kept as it came from the read that failed;
- ``end``: ``exchange``; ``complete`` (the body was read to its end; false when the bridge stopped
  reading, after ``[DONE]`` say) and ``error`` (how the connection failed, or null; then ``kind``,
  as ``bridge.serve.upstream.transport.failure_kind`` reads it: ``closed``, ``read_timeout``, …);
- ``error``: ``exchange``, ``error`` and ``kind``: the request failed before any answer
  (``connect``, ``connect_timeout``, …);
- ``event``: one AG-UI ``event`` the bridge sent its client, as it went out (after the client's
  protocol shaping and redaction);
- ``run_end``: the run is over.

Format 1 (before ``decoded``) kept each read as it came off the wire, compressed or not.

No secret is kept: every line goes through the bridge's ``Redactor``, and the body's bytes, UTF-8
or not, through a ``ByteStreamRedactor`` that sees across reads, so the key is not in the record
even when the upstream quoted it back, compressed it, or sent it a few bytes a read; no URL in it
holds credentials (``user:password@``) or a query. A line that cannot be written (a full disk)
stops the recording of that run, logged once; the run goes on, and its file keeps the whole lines
written before (a file with none is removed). ``agui-bridge replay DIR`` serves the recorded
answers again (``bridge/cli/replay.py``).

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
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx
from ag_ui.core import RunAgentInput

# httpx's own decoders: the recording holds the bytes the bridge reads through them.
from httpx._decoders import SUPPORTED_DECODERS, ContentDecoder, MultiDecoder

from bridge import __version__
from bridge.config import BridgeConfig
from bridge.core.upstream_url import shown_url
from bridge.serve.redact import ByteStreamRedactor, Redactor, shown_target
from bridge.serve.upstream.transport import failure_kind

FORMAT = "agui-bridge-record/2"
#: The formats ``agui-bridge replay`` reads: 1 kept compressed reads as they came.
READABLE_FORMATS = ("agui-bridge-record/1", FORMAT)

#: Request headers that carry credentials: never written.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}
)

logger = logging.getLogger("agui_bridge")

_CURRENT: ContextVar[RunRecord | None] = ContextVar("agui_bridge_run_record", default=None)


class Recorder:
    """Writes each run of one app to its own file in ``directory``."""

    def __init__(self, directory: str | Path, config: BridgeConfig, redactor: Redactor) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._redactor = redactor
        self._settings = recorded_settings(config)
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
        # The process id too: the workers of one bridge (serve --workers) share the folder.
        name = (
            f"{started:%Y%m%dT%H%M%S.%fZ}-{os.getpid()}-{next(self._count):04d}-"
            f"{safe_id[:80]}.jsonl"
        )
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


def recorded_settings(config: BridgeConfig) -> dict[str, Any]:
    """The bridge's settings as a record's header holds them: without the API key, the auth
    token and the interrupts' secret; the upstream URL and the MCP servers' URLs and command
    lines without credentials."""
    settings = dataclasses.asdict(config)
    settings.pop("api_key", None)
    settings.pop("auth_token", None)
    settings.pop("secret", None)
    settings["upstream_url"] = shown_url(config.upstream_url)
    settings["mcp_servers"] = {
        name: shown_target(target) for name, target in config.mcp_servers.items()
    }
    return settings


class RunRecord:
    """The file of one recorded run, created with its first line.

    A line that cannot be written (the disk is full, the folder is gone, a value JSON cannot
    hold) stops the recording of this run, logged once; the run goes on. The file keeps the whole
    lines written before, or is removed if it holds none."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        self._redactor = redactor
        self._file: IO[bytes] | None = None
        self._written = 0  # bytes of whole lines in the file
        self.recording = True
        self._began = time.monotonic()
        self._exchanges = itertools.count(1)

    def write(self, line_type: str, /, **fields: Any) -> None:
        """Write one line of ``fields``, redacted."""
        self._write(line_type, fields, redact=True)

    def read(self, exchange: int, data: bytes) -> None:
        """Write one ``read`` line of a response body's bytes, redacted already."""
        self._write("read", {"exchange": exchange, **_bytes_fields(data)}, redact=False)

    def _write(self, line_type: str, fields: dict[str, Any], *, redact: bool) -> None:
        if not self.recording:
            return
        try:
            line = json.dumps(
                {"type": line_type, "t": round(time.monotonic() - self._began, 6), **fields},
                ensure_ascii=False,
                separators=(",", ":"),
                default=str,
            )
        except (ValueError, TypeError, RecursionError) as exc:
            self._stop(line_type, exc)
            return
        self._append(line_type, self._redactor.redact(line) if redact else line)

    def frames(self, text: str) -> None:
        """The SSE frames sent to the client (``data: {…}\\n\\n`` each): one ``event`` line each,
        the frame's JSON as it went out (encoded and redacted already: not parsed again)."""
        for frame in text.split("\n\n"):
            if frame.startswith("data: ") and self.recording:
                t = round(time.monotonic() - self._began, 6)
                self._append("event", f'{{"type":"event","t":{t},"event":{frame[6:]}}}')

    def _append(self, line_type: str, line: str) -> None:
        """Write one line, redacted already (an event's frame and a read's bytes were, on their
        way: each text is redacted once)."""
        # A lone surrogate (an upstream's "\ud800", passed on) can only stand inside a JSON
        # string there: backslashreplace writes it as the JSON escape it came as.
        data = (line + "\n").encode("utf-8", "backslashreplace")
        try:
            if self._file is None:
                self._file = self.path.open("xb")  # never another run's file
            self._file.write(data)
            self._file.flush()  # a run cut short (a crash, a kill) still leaves what it saw
        except OSError as exc:
            self._stop(line_type, exc)
            return
        self._written += len(data)

    def _stop(self, line_type: str, exc: BaseException) -> None:
        self.recording = False
        logger.warning(
            "recording stopped for this run: its %s line could not be written to %s (%s); "
            "the run goes on",
            line_type,
            self.path,
            _describe(exc),
        )
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()  # flushing what failed may fail again: the file closes anyway
            self._file = None
        with contextlib.suppress(OSError):
            if self._written:
                os.truncate(self.path, self._written)  # no half line
            else:
                self.path.unlink(missing_ok=True)

    def request(self, request: httpx.Request) -> int:
        exchange = next(self._exchanges)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in SECRET_HEADERS}
        self.write(
            "request",
            exchange=exchange,
            method=request.method,
            url=shown_url(str(request.url)),
            headers=headers,
            body=request_body(request.content),
        )
        return exchange

    def body_redactor(self) -> ByteStreamRedactor:
        """A redactor for one response body of this run, across its reads."""
        return self._redactor.stream_bytes()

    def close(self) -> None:
        self.write("run_end")
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                self._stop("run_end", exc)
        self.recording = False


class RecordingTransport(httpx.AsyncBaseTransport):
    """Hands requests to ``inner``; those made for a recorded run are written to its record."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        record = _CURRENT.get()
        if record is None or not record.recording:
            return await self._inner.handle_async_request(request)
        exchange = record.request(request)
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            record.write("error", exchange=exchange, error=_describe(exc), kind=failure_kind(exc))
            raise
        version = response.extensions.get("http_version", b"HTTP/1.1")
        reason = response.extensions.get("reason_phrase", b"")
        decoder, decoded = _content_decoder(response.headers)
        record.write(
            "response",
            exchange=exchange,
            status=response.status_code,
            reason=reason.decode("latin-1") if isinstance(reason, bytes) else str(reason),
            http_version=version.decode("latin-1") if isinstance(version, bytes) else version,
            headers=[[name, value] for name, value in response.headers.multi_items()],
            **({"decoded": decoded} if decoded else {}),
        )
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _RecordedBody(response.stream, record, exchange, decoder)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _RecordedBody(httpx.AsyncByteStream):
    """The response body as it arrives, decoded, redacted: one ``read`` line per network read
    (whose end may wait for the next, when it may begin a secret)."""

    def __init__(
        self,
        stream: httpx.AsyncByteStream,
        record: RunRecord,
        exchange: int,
        decoder: ContentDecoder | None,
    ) -> None:
        self._stream = stream
        self._record = record
        self._exchange = exchange
        self._decoder = decoder
        self._redactor = record.body_redactor()
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._stream:
                if self._record.recording:
                    self._read(self._decoded(piece))
                yield piece
        except Exception as exc:
            self._end(complete=False, error=_describe(exc), kind=failure_kind(exc))
            raise
        self._end(complete=True)

    def _decoded(self, piece: bytes) -> bytes:
        if self._decoder is None:
            return piece
        try:
            return self._decoder.decode(piece)
        except httpx.DecodingError:
            # The bridge fails on it too; the record keeps the rest as it came.
            self._decoder = None
            return piece

    def _read(self, data: bytes) -> None:
        data = self._redactor.feed(data)
        if data:
            self._record.read(self._exchange, data)

    def _end(self, *, complete: bool, error: str | None = None, kind: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        if not self._record.recording:
            return
        if self._decoder is not None:
            with contextlib.suppress(httpx.DecodingError):
                self._read(self._decoder.flush())
        held = self._redactor.close()
        if held:
            self._record.read(self._exchange, held)
        fields: dict[str, Any] = {"complete": complete, "error": error}
        if kind is not None:
            fields["kind"] = kind
        self._record.write("end", exchange=self._exchange, **fields)

    async def aclose(self) -> None:
        self._end(complete=False)
        await self._stream.aclose()


def _content_decoder(headers: httpx.Headers) -> tuple[ContentDecoder | None, list[str]]:
    """httpx's decoder for a response's ``Content-Encoding`` (as httpx builds it: the codings it
    knows, others left as they are), and the codings it undoes; ``None`` when there are none."""
    codings = [
        coding.strip().lower() for coding in headers.get_list("content-encoding", split_commas=True)
    ]
    known = [coding for coding in codings if coding in SUPPORTED_DECODERS and coding != "identity"]
    if not known:
        return None, []
    decoders = [SUPPORTED_DECODERS[coding]() for coding in known]
    return (decoders[0] if len(decoders) == 1 else MultiDecoder(decoders)), known


def request_body(raw: bytes) -> Any:
    """A request body as recorded (and matched on replay): JSON when it parses, else text."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw.decode("utf-8", "replace")


def _bytes_fields(piece: bytes) -> dict[str, str]:
    try:
        return {"text": piece.decode("utf-8")}
    except UnicodeDecodeError:  # a read that splits a character, a body that is not text
        return {"base64": base64.b64encode(piece).decode("ascii")}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
