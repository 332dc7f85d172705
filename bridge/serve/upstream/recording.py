"""One recorded run as it is written (``record`` says what the file holds): ``RunRecord``, its
file, and ``RecordingTransport``, which writes each upstream exchange made for the run in
progress (the request, the response's head, each network read of its body, decoded and
redacted) into that run's record.

An attachment's bytes are not kept: a long base64 string (``INLINE_KEPT`` characters or more,
alone or in a ``data:`` URL), or a text of ``TEXT_KEPT`` characters or more (a text document as
the model reads it), is written as its size and digest (``as_recorded``), made in a worker
thread; so a 20 MB image is neither copied into the record nor scanned by the redaction, and the
replay (``bridge/cli/replay.py``) matches requests by the same form."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

import anyio.to_thread
import httpx

# httpx's own decoders: the recording holds the bytes the bridge reads through them.
from httpx._decoders import SUPPORTED_DECODERS, ContentDecoder, MultiDecoder

from bridge.core.upstream_url import shown_url
from bridge.serve.redact import ByteStreamRedactor, Redactor
from bridge.serve.upstream.sessions import SECRET_HEADERS
from bridge.serve.upstream.transport import failure_kind

logger = logging.getLogger("agui_bridge")

#: The request's body as the client built it (a dict), which the recording reads instead of
#: parsing the bytes again.
REQUEST_BODY = "agui_bridge.request_body"

#: Base64 strings shorter than this are recorded as they are; longer ones as their size and
#: digest.
INLINE_KEPT = 4096
#: Other strings shorter than this are recorded as they are (and redacted); longer ones as their
#: size and digest: redacting one costs the event loop about 5 ms a MB.
TEXT_KEPT = 1024 * 1024

#: The record of the run in progress in this task (set by ``Recorder.run``).
CURRENT_RECORD: ContextVar[RunRecord | None] = ContextVar("agui_bridge_run_record", default=None)


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

    def request(self, request: httpx.Request, body: Any) -> int:
        """Write a ``request`` line; ``body`` as ``recorded_body`` gives it."""
        exchange = next(self._exchanges)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in SECRET_HEADERS}
        self.write(
            "request",
            exchange=exchange,
            method=request.method,
            url=shown_url(str(request.url)),
            headers=headers,
            body=body,
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
        record = CURRENT_RECORD.get()
        if record is None or not record.recording:
            return await self._inner.handle_async_request(request)
        exchange = record.request(request, await recorded_body(request))
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


async def recorded_body(request: httpx.Request) -> Any:
    """A request's body as its record holds it (``as_recorded``): the body the client built
    (``REQUEST_BODY``), else its bytes read (``request_body``); a big one made in a worker
    thread."""
    built = request.extensions.get(REQUEST_BODY)
    if len(request.content) <= INLINE_KEPT:
        return request_body(request.content)
    if built is None:
        return await anyio.to_thread.run_sync(request_body, request.content)
    return await anyio.to_thread.run_sync(as_recorded, built)


def request_body(raw: bytes) -> Any:
    """A request body as recorded (and matched on replay): JSON when it parses (``as_recorded``),
    else text."""
    if not raw:
        return None
    try:
        return as_recorded(json.loads(raw))
    except (ValueError, RecursionError):
        return raw.decode("utf-8", "replace")


#: The head and tail of a base64 string (a few characters each end are read, not the whole).
_BASE64_ENDS = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_DATA_URL = re.compile(r"data:[^,]{0,200};base64,")


def as_recorded(value: Any) -> Any:
    """``value`` (JSON) as a record holds it: a string of ``INLINE_KEPT`` characters of base64
    or more (alone, or in a ``data:`` URL, which keeps its head) as ``[base64 of N bytes,
    sha256 of the base64: HEX]``, any other string of ``TEXT_KEPT`` characters or more (a text
    document as the model reads it) as ``[text of N characters, sha256: HEX]``. A string is
    taken for base64 by its ends and its lack of spaces and line breaks, not scanned whole; one
    that only looks it is written as its digest too. Nothing of such a string is written,
    secret or not, and no redaction scans it."""
    if isinstance(value, dict):
        return {key: as_recorded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_recorded(item) for item in value]
    if not isinstance(value, str) or len(value) < INLINE_KEPT:
        return value
    head = _DATA_URL.match(value)
    start = head.end() if head else 0
    ends = (value[start : start + 64], value[-64:])
    if " " in value or "\n" in value or not all(_BASE64_ENDS.fullmatch(end) for end in ends):
        if len(value) < TEXT_KEPT:
            return value
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
        return f"[text of {len(value)} characters, sha256: {digest}]"
    encoded = value[start:]
    size = len(encoded) * 3 // 4 - encoded[-2:].count("=")
    digest = hashlib.sha256(encoded.encode("ascii", "replace")).hexdigest()
    return f"{value[:start]}[base64 of {size} bytes, sha256 of the base64: {digest}]"


def _bytes_fields(piece: bytes) -> dict[str, str]:
    try:
        return {"text": piece.decode("utf-8")}
    except UnicodeDecodeError:  # a read that splits a character, a body that is not text
        return {"base64": base64.b64encode(piece).decode("ascii")}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
