"""A server tool's result as the model and the client read it: a JSON-encoded string is the
string (``tool_result_text``, which the history builder reads results back with), redacted
once, and made ready off the event loop when big (``ServerToolResult``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring

import pydantic
from ag_ui.core import BaseEvent, ToolCallResultEvent

from bridge.core.encode import encode_event, without_lone_surrogates
from bridge.serve.redact import MIN_PIECE

#: A result longer than this is made ready in a worker thread, a slice at a time: one C-speed
#: pass over a 10 MB text (a scan for secrets, a JSON encoding) holds the GIL, and with it every
#: stream of the process, for 20-50 ms; between slices the event loop gets its turn.
BIG_RESULT = 64 * 1024
_SLICE = 256 * 1024
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
        # Lone surrogates (a tool's "\ud800", an MCP server's JSON escape of one) cannot be
        # written as UTF-8, to the client or upstream: each becomes U+FFFD, as in a chunk.
        slices = [
            redact(without_lone_surrogates(part))
            for part in _clean_slices(tool_result_text(text), redact)
        ]
        event = self.model_copy(update={"content": "".join(slices)})
        if len(event.content) >= BIG_RESULT:
            # JSON escaping is per character: the slices escaped one by one and joined are the
            # whole text escaped, byte for byte as the encoder writes it (its string escaping
            # is encode_basestring's: bridge.core.encode relies on that for the deltas).
            head, tail = encode_event(self).split('"content":""', 1)
            escaped = [encode_basestring(part)[1:-1] for part in slices]
            event._frame = "".join([head, '"content":"', *escaped, '"', tail])
        return event


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
