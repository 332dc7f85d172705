"""The text tool-call formats: one body reader per format, for what follows its opening marker.

Each reader takes the text after the marker, reports the calls it finds as parts, and returns what
followed the calls (``None`` while it needs more). ``TextToolCalls`` (``text_tools.py``) finds
the markers and hands over.
"""

from __future__ import annotations

import json
import logging
import secrets
import string
from collections.abc import Callable

from bridge.json_call import JsonCallReader
from bridge.markers import MarkerSet
from bridge.parts import BrokenToolCall, Part, Text, ToolCallDelta

logger = logging.getLogger("agui_bridge")

_ALPHANUMERIC = string.ascii_letters + string.digits


class _Call:
    """One call being read: reports its name once known, then its arguments as they come."""

    def __init__(
        self,
        index: int,
        call_id: str | None,
        reader: JsonCallReader,
        raw: str,
        allowed: frozenset[str] | None = None,
    ) -> None:
        self.allowed = allowed  # for formats without a marker of their own: offered tools only
        self.index = index
        self.call_id = call_id
        self.reader = reader
        self.raw = raw  # the text as the model wrote it, for when it is not a call after all
        self._named = False
        self._pending = ""
        self._finished = False

    def read(self, text: str, out: list[Part]) -> None:
        self.raw += text
        reader = self.reader
        if reader.error is not None or reader.complete:
            if reader.complete:
                reader.feed(text)  # kept as `rest`
            return
        piece = reader.feed(text)
        if reader.error is not None:
            return
        if not self._named:
            self._pending += piece
            if reader.name is None:
                return
            if self.allowed is not None and reader.name not in self.allowed:
                reader.error = f"{reader.name!r} is not one of the tools offered"
                return
            self._named = True
            piece, self._pending = self._pending, ""
            out.append(ToolCallDelta(self.index, self.call_id, reader.name, ""))
        if piece:
            out.append(ToolCallDelta(self.index, None, None, piece))

    def consume(self, text: str, out: list[Part]) -> str | None:
        """Read ``text``: ``None`` while the call goes on; once it has ended (read whole, or
        unreadable: see ``reader.error``), it is finished and what followed it is returned."""
        self.read(text, out)
        reader = self.reader
        if reader.error is not None:
            self.finish(out)
            return ""
        if not reader.complete:
            return None
        rest = reader.rest
        self.raw = self.raw[: len(self.raw) - len(rest)]
        self.finish(out)
        return rest

    def finish(self, out: list[Part], *, raw: str | None = None) -> None:
        """The call's text has ended: a call, or text again, or a broken call. Once only."""
        if self._finished:
            return
        self._finished = True
        reader = self.reader
        raw = self.raw if raw is None else raw
        if reader.error is None and not reader.complete:
            reader.error = "the call was cut off before its end"
        if reader.error is not None:
            logger.warning("a text tool call could not be read (%s): %.200r", reader.error, raw)
            out.append(BrokenToolCall(self.index, raw, reader.error) if self._named else Text(raw))
        elif reader.arguments_were_text:
            out.append(ToolCallDelta(self.index, None, None, reader.arguments()))


class _HermesBody:
    OPEN = "<tool_call>"
    CLOSE = "</tool_call>"

    def __init__(self, next_index: Callable[[], int]) -> None:
        self._close = MarkerSet([self.CLOSE])
        self._held = ""
        index = next_index()
        reader = JsonCallReader(args_keys=("arguments", "parameters"))
        self._call = _Call(index, None, reader, self.OPEN)

    def feed(self, text: str, out: list[Part]) -> str | None:
        text, self._held = self._held + text, ""
        position, marker = self._close.find(text)
        if not marker:
            keep = self._close.partial_length(text)
            if keep:
                text, self._held = text[:-keep], text[-keep:]
            self._call.read(text, out)
            return None
        self._call.read(text[:position], out)
        self._call.finish(out, raw=self._call.raw + self.CLOSE)
        return text[position + len(marker) :]

    def close(self, out: list[Part]) -> None:
        self._call.read(self._held, out)
        self._call.finish(out)


class _MistralBody:
    """After ``[TOOL_CALLS]``: a JSON array of calls, or ``name[ARGS]{…}``."""

    OPEN = "[TOOL_CALLS]"
    ARGS = "[ARGS]"

    def __init__(self, next_index: Callable[[], int]) -> None:
        self._next_index = next_index
        self._state = "start"  # start | array | element | after | name | args
        self._between = self.OPEN  # structure read since the last call: shown if it was none
        self._name = ""
        self._call: _Call | None = None

    def feed(self, text: str, out: list[Part]) -> str | None:
        while text:
            if self._state in ("start", "array", "after"):
                stripped = text.lstrip()
                self._between += text[: len(text) - len(stripped)]
                if not stripped:
                    return None
                head = stripped[0]
                if self._state == "start" and head != "[":
                    self._state, text = "name", stripped
                    continue
                if head == "[" and self._state == "start":
                    self._state = "array"
                elif head == "]" and self._state in ("array", "after"):
                    return stripped[1:]
                elif head == "," and self._state == "after":
                    self._state = "array"
                elif head == "{" and self._state == "array":
                    # Its raw text starts with the structure before it, shown if it is no call.
                    self._call = self._new_call(JsonCallReader(), self._between)
                    self._state = "element"
                    text = stripped
                    continue
                else:
                    out.append(Text(self._between + stripped))  # not calls after all
                    return ""
                self._between += head
                text = stripped[1:]
            elif self._state == "element":
                assert self._call is not None
                rest = self._call.consume(text, out)
                if rest is None or self._call.reader.error is not None:
                    return rest
                text, self._between, self._state = rest, "", "after"
            elif self._state == "name":
                self._name += text
                position = self._name.find(self.ARGS)
                if position != -1:
                    name = self._name[:position]
                else:  # "[AR" may be the start of "[ARGS]"
                    name = self._name[: len(self._name) - _ARGS_MARKER.partial_length(self._name)]
                if not _plausible_name(name.strip()) or len(name) > 200:
                    out.append(Text(self._between + self._name))
                    return ""
                if position == -1:
                    return None
                text = self._name[position + len(self.ARGS) :]
                raw = self._between + name + self.ARGS
                self._call = self._new_call(_arguments_reader(name.strip()), raw)
                self._state = "args"
                self._call.read("", out)
            else:  # args
                assert self._call is not None
                return self._call.consume(text, out)
        return None

    def close(self, out: list[Part]) -> None:
        if self._state in ("element", "args"):
            assert self._call is not None
            self._call.finish(out)
        elif self._state == "name":
            out.append(Text(self._between + self._name))
        elif self._between:
            out.append(Text(self._between))

    def _new_call(self, reader: JsonCallReader, raw: str) -> _Call:
        call_id = "".join(secrets.choice(_ALPHANUMERIC) for _ in range(9))
        return _Call(self._next_index(), call_id, reader, raw)


class _LlamaJsonBody:
    """Llama 3.x JSON calls: after ``<|python_tag|>``, or a bare ``{"name": …, "parameters": …}``
    that opens the answer (then it must name an offered tool); several joined by ``;``."""

    def __init__(
        self, next_index: Callable[[], int], head: str, allowed: frozenset[str] | None
    ) -> None:
        self._next_index = next_index
        self._allowed = allowed
        self._between = "" if allowed is not None else "<|python_tag|>"
        self._call: _Call | None = None
        self._after_call = False  # a call just ended: a `;` would bring another
        self._pending_head = head  # the marker's own text is the start of the JSON object

    def feed(self, text: str, out: list[Part]) -> str | None:
        text, self._pending_head = self._pending_head + text, ""
        while text:
            if self._call is None:
                stripped = text.lstrip()
                self._between += text[: len(text) - len(stripped)]
                if not stripped:
                    return None
                if self._after_call:
                    if stripped[0] != ";":  # no further call: hand the rest back as text
                        return self._between + stripped
                    self._between, self._after_call = self._between + ";", False
                    text = stripped[1:]
                    continue
                if stripped[0] != "{":  # no call after all: what was read is text
                    if self._between:
                        out.append(Text(self._between))
                    self._between = ""
                    return stripped
                reader = JsonCallReader(args_keys=("parameters", "arguments"))
                self._call = _Call(self._next_index(), None, reader, self._between, self._allowed)
                self._between = ""
                text = stripped
            rest = self._call.consume(text, out)
            if rest is None or self._call.reader.error is not None:
                return rest
            text, self._call, self._after_call, self._between = rest, None, True, ""
        return None

    def close(self, out: list[Part]) -> None:
        if self._call is not None:
            self._call.finish(out)
        elif self._between + self._pending_head:
            out.append(Text(self._between + self._pending_head))


class _LlamaFunctionBody:
    """Llama 3.1's custom-tool form: ``<function=name>{…}</function>``."""

    OPEN = "<function="
    CLOSE = "</function>"

    def __init__(self, next_index: Callable[[], int]) -> None:
        self._next_index = next_index
        self._name = ""
        self._call: _Call | None = None
        self._tail = ""

    def feed(self, text: str, out: list[Part]) -> str | None:
        if self._call is None:
            self._name += text
            position = self._name.find(">")
            name = self._name[:position] if position != -1 else self._name
            if not _plausible_name(name) or len(name) > 200:
                out.append(Text(self.OPEN + self._name))
                return ""
            if position == -1:
                return None
            text = self._name[position + 1 :]
            raw = self.OPEN + name + ">"
            self._call = _Call(self._next_index(), None, _arguments_reader(name), raw)
            self._call.read("", out)
        if not self._call.reader.complete:
            rest = self._call.consume(text, out)
            if rest is None or self._call.reader.error is not None:
                return rest
            text = rest
        self._tail += text
        if self.CLOSE.startswith(self._tail) and len(self._tail) < len(self.CLOSE):
            return None  # perhaps the closing tag, still arriving
        return self._tail[len(self.CLOSE) :] if self._tail.startswith(self.CLOSE) else self._tail

    def close(self, out: list[Part]) -> None:
        if self._call is None:
            out.append(Text(self.OPEN + self._name))
            return
        self._call.finish(out)
        if self._tail and not self.CLOSE.startswith(self._tail):
            out.append(Text(self._tail))


Body = _HermesBody | _MistralBody | _LlamaJsonBody | _LlamaFunctionBody


def body_for(marker: str, next_index: Callable[[], int], tool_names: frozenset[str]) -> Body:
    if marker == _HermesBody.OPEN:
        return _HermesBody(next_index)
    if marker == _MistralBody.OPEN:
        return _MistralBody(next_index)
    if marker == _LlamaFunctionBody.OPEN:
        return _LlamaFunctionBody(next_index)
    if marker == _PYTHON_TAG:
        return _LlamaJsonBody(next_index, "", None)
    return _LlamaJsonBody(next_index, marker, tool_names)


def _arguments_reader(name: str) -> JsonCallReader:
    """A reader for ``name[ARGS]{…}``-style calls, which write only the arguments object."""
    reader = JsonCallReader(stop_after_args=True)
    reader.feed(f'{{"name": {json.dumps(name)}, "arguments": ')
    return reader


def _plausible_name(name: str) -> bool:
    return all(char.isalnum() or char in "_-." for char in name)


_ARGS_MARKER = MarkerSet([_MistralBody.ARGS])
_PYTHON_TAG = "<|python_tag|>"
MARKERS = {
    "hermes": (_HermesBody.OPEN,),
    "mistral": (_MistralBody.OPEN,),
    "llama": (_PYTHON_TAG, _LlamaFunctionBody.OPEN),
}
#: Llama's bare JSON call has no marker: it is taken only where it opens the answer.
START_MARKERS = {"llama": ('{"name"', '{"type"')}
