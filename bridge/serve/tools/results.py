"""A server tool's result as the model and the client read it: a JSON-encoded string is the
string (``tool_result_text``, which the history builder reads results back with), redacted
once, and made ready off the event loop when big (``ServerToolResult``).

A result may be content parts instead (``ServerToolResult.ready_parts``: an MCP tool's image,
for a client that takes parts). Every text in them is redacted as a text result is; a part's
inline bytes (base64) are decoded and scanned for secrets as bytes, a slice at a time, since a
secret in them is not in the base64 text as a server would quote it: one found is masked and
the bytes encoded again (a changed image, but no secret leaves). A part whose data is not
base64 is not sent: a text part says so in its place.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from json.encoder import encode_basestring
from typing import Any

import pydantic
from ag_ui.core import BaseEvent, ContentPart, DataSource, TextPart, ToolCallResultEvent

from bridge.core.encode import encode_event, without_lone_surrogates
from bridge.serve.redact import MIN_PIECE, Redactor

#: A result longer than this is made ready in a worker thread, a slice at a time: one C-speed
#: pass over a 10 MB text (a scan for secrets, a JSON encoding) holds the GIL, and with it every
#: stream of the process, for 20-50 ms; between slices the event loop gets its turn.
BIG_RESULT = 64 * 1024
_SLICE = 256 * 1024
#: Base64 decoded a slice at a time: a whole number of 4-character groups.
_BASE64_SLICE = _SLICE // 4 * 4
#: Around a place where a big text is cut: a secret (or a piece of one) within this distance
#: could span the cut, so the cut moves on.
_NEAR = 2 * MIN_PIECE


def with_after(result: ToolCallResultEvent) -> list[BaseEvent]:
    """A tool's result and the events that follow it (``ToolOutput.after``)."""
    after = result.after if isinstance(result, ServerToolResult) else ()
    return [result, *after]


class ServerToolResult(ToolCallResultEvent):
    """A server tool's ``TOOL_CALL_RESULT``, made ready where it is made (``ready``): its content
    as the model reads it, redacted once, and its SSE frame (``frame``), which the frame
    boundary sends as it is (``bridge.serve.http.frames``) instead of scanning and encoding a big
    text again on the event loop."""

    _frame: str = pydantic.PrivateAttr(default="")
    #: Events sent right after this result (``ToolOutput.after``).
    _after: tuple[BaseEvent, ...] = pydantic.PrivateAttr(default=())

    @property
    def after(self) -> tuple[BaseEvent, ...]:
        return self._after

    @after.setter
    def after(self, events: tuple[BaseEvent, ...]) -> None:
        self._after = events

    @property
    def frame(self) -> str:
        """The event's frame, as ``encode_event`` writes it."""
        return self._frame or encode_event(self)

    def ready(self, text: str, redact: Callable[[str], str]) -> ServerToolResult:
        """This result with ``text`` as its content: as the history builder reads it back (a
        JSON string decoded), redacted here, not only at the frame boundary (the same text goes
        back upstream in this run and, as the client stored it, in the next: both must be the
        same bytes), and encoded. A big text a slice at a time: run it in a worker thread and
        the event loop gets the GIL between slices."""
        slices = _redacted_slices(tool_result_text(text), redact)
        event = self.model_copy(update={"content": "".join(slices)})
        if len(event.content) >= BIG_RESULT:
            head, tail = encode_event(self).split('"content":""', 1)
            event._frame = "".join([head, '"content":"', *_escaped(slices), '"', tail])
        return event

    def ready_parts(self, parts: Sequence[ContentPart], redactor: Redactor) -> ServerToolResult:
        """This result with ``parts`` as its content, redacted (the module's docstring says
        how) and, when big, encoded: each part's big string a slice at a time, as ``ready``
        does, so that in a worker thread the event loop gets the GIL between slices."""
        made = [_ready_part(part, redactor) for part in parts]
        event = self.model_copy(update={"content": [part for part, _ in made]})
        if parts_size(parts) >= BIG_RESULT:
            # Each part's big string stands in the encoded event as a mark no tool can have
            # written (it did not exist when the tool ran), then its escaped slices replace it.
            mark = secrets.token_hex(16)
            marked = [_with_big_string(part, f"{mark}:{i}") for i, (part, _) in enumerate(made)]
            frame = encode_event(self.model_copy(update={"content": marked}))
            pieces: list[str] = []
            for index, (_, escaped) in enumerate(made):
                head, frame = frame.split(f'"{mark}:{index}"', 1)
                pieces += [head, '"', *escaped, '"']
            event._frame = "".join([*pieces, frame])
        return event


def parts_size(parts: Sequence[ContentPart]) -> int:
    """About how much work making ``parts`` ready is: the length of their big strings."""
    return sum(len(_big_string(part)) for part in parts)


def _big_string(part: ContentPart) -> str:
    """A part's one string that may be big: its text, or its source's value."""
    return part.text if isinstance(part, TextPart) else part.source.value


def _with_big_string(part: ContentPart, value: str) -> ContentPart:
    if isinstance(part, TextPart):
        return part.model_copy(update={"text": value})
    return part.model_copy(update={"source": part.source.model_copy(update={"value": value})})


def _ready_part(part: ContentPart, redactor: Redactor) -> tuple[ContentPart, list[str]]:
    """``part`` redacted, and its big string as JSON writes it inside its quotes, in slices."""
    redact = redactor.redact
    metadata = _cleaned(part.metadata, redact)
    if isinstance(part, TextPart):
        slices = _redacted_slices(part.text, redact)
        ready = part.model_copy(update={"text": "".join(slices), "metadata": metadata})
        return ready, _escaped(slices)
    source = part.source
    fields = _cleaned(source.model_dump(exclude={"value"}), redact)
    if isinstance(source, DataSource):
        value = _scanned_base64(source.value, redactor)
        if value is None:
            kind = f"{part.type} ({fields['mime_type']})"
            what = f"[the tool's {kind} is left out: its data is not base64]"
            return TextPart(text=what, metadata=metadata), _escaped([what])
        escaped = [value]  # base64: no character in it is escaped
    else:  # a URL or a provider's handle
        slices = _redacted_slices(source.value, redact)
        value, escaped = "".join(slices), _escaped(slices)
    ready_source = source.model_copy(update={**fields, "value": value})
    return part.model_copy(update={"source": ready_source, "metadata": metadata}), escaped


def _redacted_slices(text: str, redact: Callable[[str], str]) -> list[str]:
    """``text`` redacted, in slices (``_clean_slices``)."""
    # Lone surrogates (a tool's "\ud800", an MCP server's JSON escape of one) cannot be
    # written as UTF-8, to the client or upstream: each becomes U+FFFD, as in a chunk.
    return [redact(without_lone_surrogates(part)) for part in _clean_slices(text, redact)]


def _escaped(slices: list[str]) -> list[str]:
    """Slices of a text as JSON writes them inside its quotes. JSON escaping is per character:
    the slices escaped one by one and joined are the whole text escaped, byte for byte as the
    encoder writes it (its string escaping is encode_basestring's: bridge.core.encode relies on
    that for the deltas)."""
    return [encode_basestring(part)[1:-1] for part in slices]


def _cleaned(value: Any, redact: Callable[[str], str]) -> Any:
    """A JSON value with each string redacted, lone surrogates replaced."""
    if isinstance(value, str):
        return redact(without_lone_surrogates(value))
    if isinstance(value, dict):
        return {_cleaned(k, redact): _cleaned(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(item, redact) for item in value]
    return value


def _scanned_base64(value: str, redactor: Redactor) -> str | None:
    """``value`` (base64) as it is, or encoded again with the secrets in its bytes masked;
    ``None`` when it is not base64 (padded, no other character). A slice at a time."""
    try:
        decoded = [
            base64.b64decode(value[at : at + _BASE64_SLICE], validate=True)
            for at in range(0, len(value), _BASE64_SLICE)
        ]
    except (binascii.Error, ValueError):  # ValueError: a character beyond ASCII
        return None
    if not redactor:
        return value
    stream = redactor.stream_bytes()
    scanned = [stream.feed(piece) for piece in decoded]
    scanned.append(stream.close())
    clean = b"".join(scanned)
    if clean == b"".join(decoded):
        return value
    return base64.b64encode(clean).decode("ascii")


def _clean_slices(text: str, redact: Callable[[str], str]) -> Iterator[str]:
    """``text`` in slices of about ``_SLICE`` characters, each cut where no secret is near (so
    none spans it): the slices redacted one by one and joined are the whole text redacted.
    Where secrets run on, the cut waits for their end."""
    start = 0
    while len(text) - start > _SLICE:
        cut = start + _SLICE
        while cut < len(text):
            near = text[cut - _NEAR : cut + _NEAR]
            if redact(near) == near:
                break
            cut += 2 * _NEAR
        yield text[start:cut]
        start = cut
    if start < len(text) or not text:
        yield text[start:]


def tool_result_text(content: str) -> str:
    """A tool's result as the model reads it: a JSON-encoded string is the string.

    The bridge sends a server tool's string result as it is, and a client may send it back as
    it came (@ag-ui/client) or JSON-encoded (a history kept from an earlier release, which sent
    strings encoded; a client that encodes every result). Both forms give the model the same
    bytes, so its prefix cache holds. Decoded again while it is still a JSON string (a tool
    that returns ``json.dumps(text)``), at most ``_STRING_DECODES`` times: a few passes over
    the text, however deep a client nests it.
    """
    for _ in range(_STRING_DECODES):
        if len(content) < 2 or content[0] != '"' or content[-1] != '"':
            break
        try:
            decoded = json.loads(content)
            decoded.encode()  # a lone surrogate ("\\ud800") could not go upstream: keep it encoded
        except (ValueError, UnicodeEncodeError):
            break
        content = decoded
    return content


#: How many times ``tool_result_text`` decodes a result that is still a JSON string.
_STRING_DECODES = 4
