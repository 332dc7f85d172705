"""SSE events from an OpenAI-compatible server → chunks for the translator.

``SseReader`` splits the body into events as bytes, as it arrives: every token of a stream is
one network read, and reading it through httpx's text decoders and httpx-sse's line iterators
cost a stack of generator steps per token (``benchmarks/README.md``, issue 34). It keeps the
rules of the SSE spec (https://html.spec.whatwg.org/multipage/server-sent-events.html) that an
upstream's stream can use: CR, LF or CRLF line ends (a CRLF may be split between reads), comment
lines, ``data`` lines joined by LF, ``event``; ``id`` and ``retry`` mean nothing to a bridge
that never reconnects. A property test holds it to httpx-sse's decoder on any split of any body.
"""

from __future__ import annotations

from typing import Any

import orjson

from bridge.core.errors import UpstreamProtocolError
from bridge.core.translate import DONE
from bridge.serve.upstream.parse import parse_refused

_DONE = DONE.encode()
_DATA_PREFIX = b"data: "


class SseReader:
    """Bytes of an event stream in, its events out: ``(event type, data)`` per event with
    data. Fails with ``UpstreamProtocolError`` once a line grows past ``max_line`` bytes (a
    server that never sends a line end must not grow our buffer without bound); the events
    complete before that line are handed out first (``failure`` is set, the caller raises it
    after them)."""

    __slots__ = ("_cr", "_data", "_event", "_line", "_max_line", "failure")

    def __init__(self, max_line: int) -> None:
        self._max_line = max_line
        self._line = b""  # the line begun, not yet ended
        self._cr = False  # the last piece ended with CR: a LF first in the next one ends nothing
        self._event = b""
        self._data: list[bytes] = []
        self.failure: UpstreamProtocolError | None = None

    def feed(self, piece: bytes) -> list[tuple[str, bytes]]:
        if self._cr and piece[:1] == b"\n":
            piece = piece[1:]
        self._cr = piece[-1:] == b"\r"
        if b"\r" in piece:
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if (
            not self._line
            and not self._data
            and piece.startswith(_DATA_PREFIX)
            and piece.find(b"\n") == len(piece) - 2
            and piece.endswith(b"\n\n")
            and len(piece) - 2 <= self._max_line
        ):
            # One whole data event: most reads of a stream are one.
            return [("message", piece[6:-2])]
        lines = piece.split(b"\n")
        if self._line:
            lines[0] = self._line + lines[0]
        self._line = lines.pop()
        events: list[tuple[str, bytes]] = []
        for line in lines:
            if len(line) > self._max_line:
                self._fail()
                return events
            if not line:
                if self._data:
                    event = self._event.decode("utf-8", "replace") or "message"
                    events.append((event, b"\n".join(self._data)))
                self._event, self._data = b"", []
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._event = value
            # "": a comment; id, retry, unknown fields: nothing to a bridge that never reconnects
        if len(self._line) > self._max_line:
            self._fail()
        return events

    def _fail(self) -> None:
        self._line, self._data = b"", []
        self.failure = UpstreamProtocolError(
            f"the upstream sent a line longer than {self._max_line} bytes"
        )


def chunk_from_data(
    data: bytes, event: str = "message", *, wrap_error_events: bool = True
) -> dict[str, Any] | str | None:
    """The chunk an SSE event's ``data`` carries: a JSON object, ``DONE``, or ``None`` for an
    empty event.

    ``wrap_error_events``: an ``event: error`` frame of a Chat Completions stream (some proxies
    send one) carries its error bare; it becomes a ``{"error": …}`` chunk. The Responses API's
    ``event: error`` frames are typed events of their own (``{"type": "error", …}``): pass
    ``False`` for them."""
    if data[:1] != b"{":  # not the usual object: empty, [DONE], or whatever it is
        stripped = data.strip()
        if not stripped:
            return None
        if stripped == _DONE:
            return DONE
    try:
        # orjson: about 2.5 times json's speed on a chunk (benchmarks/translate.py). What it
        # refuses (lone surrogates, NaN, integers past 64 bits, bytes that are not UTF-8) json
        # reads (parse.py), never past recursion's end.
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        chunk = _json(data)
    if type(chunk) is not dict:
        raise UpstreamProtocolError("the upstream sent a chunk that is not a JSON object")
    if wrap_error_events and event == "error" and "error" not in chunk:
        chunk = {"error": chunk}  # `event: error` frames (some proxies) carry the error bare
    return chunk


def _json(data: bytes) -> Any:
    try:
        return parse_refused(data)
    except ValueError as exc:
        text = data.decode("utf-8", "replace")[:80]
        raise UpstreamProtocolError(
            f"the upstream sent a chunk that is not JSON: {text!r}"
        ) from exc
