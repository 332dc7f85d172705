"""The text tool-call formats: one body reader per format, for what follows its opening marker.

Each reader takes the text after the marker, reports the calls it finds as parts, and returns what
followed the calls (``None`` while it needs more). ``TextToolCalls`` (``filter.py``) finds
the markers and hands over. Formats that share a marker (``<tool_call>``: Hermes JSON, Qwen3-Coder
XML, GLM-4.5; ``<function=``: Llama 3.1 JSON, Qwen3-Coder XML) are told apart by what follows it.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable

from bridge.core.markers import marker_set
from bridge.core.parts import Part, Text
from bridge.core.text_tools.call import Call, FormatContext, arguments_reader, plausible_name
from bridge.core.text_tools.harmony import CHANNEL, START, HarmonyBody
from bridge.core.text_tools.json_call import JsonCallReader
from bridge.core.text_tools.pythonic import PYTHON_START, PythonicBody
from bridge.core.text_tools.sections import DEEPSEEK_V3, KIMI_K2, SectionBody
from bridge.core.text_tools.xml_tags import FunctionTagBody, GlmBody

_ALPHANUMERIC = string.ascii_letters + string.digits


class _HermesBody:
    OPEN = "<tool_call>"
    CLOSE = "</tool_call>"

    def __init__(self, next_index: Callable[[], int]) -> None:
        self._close = marker_set([self.CLOSE])
        self._held = ""
        index = next_index()
        reader = JsonCallReader(args_keys=("arguments", "parameters"))
        self._call = Call(index, None, reader, self.OPEN)

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
        self._call: Call | None = None

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
                if not plausible_name(name.strip()) or len(name) > 200:
                    out.append(Text(self._between + self._name))
                    return ""
                if position == -1:
                    return None
                text = self._name[position + len(self.ARGS) :]
                raw = self._between + name + self.ARGS
                self._call = self._new_call(arguments_reader(name.strip()), raw)
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

    def _new_call(self, reader: JsonCallReader, raw: str) -> Call:
        call_id = "".join(secrets.choice(_ALPHANUMERIC) for _ in range(9))
        return Call(self._next_index(), call_id, reader, raw)


class _LlamaJsonBody:
    """Llama 3.x JSON calls: after ``<|python_tag|>``, or a bare ``{"name": …, "parameters": …}``
    that opens the answer (then it must name an offered tool); several joined by ``;``."""

    def __init__(
        self, next_index: Callable[[], int], head: str, allowed: frozenset[str] | None
    ) -> None:
        self._next_index = next_index
        self._allowed = allowed
        self._between = "" if allowed is not None else "<|python_tag|>"
        self._call: Call | None = None
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
                self._call = Call(self._next_index(), None, reader, self._between, self._allowed)
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


class _ToolCallTagBody:
    """After ``<tool_call>``: Hermes JSON (``{``), Qwen3-Coder XML (``<function=``) or GLM-4.5
    (a bare name), whichever of them is enabled."""

    OPEN = _HermesBody.OPEN
    CLOSE = _HermesBody.CLOSE

    def __init__(self, ctx: FormatContext) -> None:
        self._ctx = ctx
        self._buf = ""
        self._inner: _HermesBody | FunctionTagBody | GlmBody | None = None
        self._tail: str | None = None  # after Qwen3-Coder's </function>: its </tool_call> is due

    def feed(self, text: str, out: list[Part]) -> str | None:
        if self._tail is not None:
            return self._after_function(text)
        if self._inner is None:
            self._buf += text
            stripped = self._buf.lstrip()
            if not stripped:
                return None
            space = self._buf[: len(self._buf) - len(stripped)]
            formats = self._ctx.formats
            function = FunctionTagBody.OPEN
            if "qwen3_coder" in formats and function.startswith(stripped[: len(function)]):
                if len(stripped) < len(function):
                    return None
                self._inner = FunctionTagBody(self._ctx, prefix=self.OPEN + space + function)
                text = stripped[len(function) :]
            elif "glm45" in formats and stripped[0] not in "{<":
                self._inner = GlmBody(self._ctx, self.OPEN + space)
                text = stripped
            else:
                self._inner = _HermesBody(self._ctx.next_index)
                text = self._buf
            self._buf = ""
        rest = self._inner.feed(text, out)
        if rest is None or not isinstance(self._inner, FunctionTagBody) or not self._inner.was_call:
            return rest
        self._tail = ""
        return self._after_function(rest)

    def close(self, out: list[Part]) -> None:
        if self._tail is not None:
            if self._tail:
                out.append(Text(self._tail))
        elif self._inner is not None:
            self._inner.close(out)
        else:
            out.append(Text(self.OPEN + self._buf))

    def _after_function(self, text: str) -> str | None:
        self._tail = (self._tail or "") + text
        stripped = self._tail.lstrip()
        if stripped.startswith(self.CLOSE):
            return stripped[len(self.CLOSE) :]
        if not stripped or self.CLOSE.startswith(stripped):
            return None
        return self._tail


Body = (
    _ToolCallTagBody
    | _MistralBody
    | _LlamaJsonBody
    | FunctionTagBody
    | PythonicBody
    | SectionBody
    | HarmonyBody
)


def body_for(marker: str, ctx: FormatContext) -> Body:
    if marker == _HermesBody.OPEN:
        return _ToolCallTagBody(ctx)
    if marker == _MistralBody.OPEN:
        return _MistralBody(ctx.next_index)
    if marker == FunctionTagBody.OPEN:
        return FunctionTagBody(
            ctx, json_ok="llama" in ctx.formats, xml_ok="qwen3_coder" in ctx.formats
        )
    if marker == _PYTHON_TAG:
        return _LlamaJsonBody(ctx.next_index, "", None)
    if marker in (PYTHON_START, "["):
        return PythonicBody(ctx, marker)
    if marker in KIMI_K2.opens:
        return SectionBody(ctx, KIMI_K2, marker)
    if marker in DEEPSEEK_V3.opens:
        return SectionBody(ctx, DEEPSEEK_V3, marker)
    if marker in (CHANNEL, START):
        return HarmonyBody(ctx, marker)
    return _LlamaJsonBody(ctx.next_index, marker, ctx.allowed(marker_of_its_own=False))


_ARGS_MARKER = marker_set([_MistralBody.ARGS])
_PYTHON_TAG = "<|python_tag|>"
#: Each format's opening markers, found anywhere in the answer.
MARKERS = {
    "hermes": (_HermesBody.OPEN,),
    "mistral": (_MistralBody.OPEN,),
    "llama": (_PYTHON_TAG, FunctionTagBody.OPEN),
    "pythonic": (PYTHON_START,),
    "qwen3_coder": (_ToolCallTagBody.OPEN, FunctionTagBody.OPEN),
    "glm45": (_ToolCallTagBody.OPEN,),
    "kimi_k2": KIMI_K2.opens,
    "deepseek_v3": DEEPSEEK_V3.opens,
    "harmony": (CHANNEL, START),
}
#: Formats whose calls have no marker of their own are taken only where they open the answer
#: (and then must name an offered tool): Llama's bare JSON and the pythonic list.
START_MARKERS = {"llama": ('{"name"', '{"type"'), "pythonic": ("[",)}
#: Other names the formats go by (vLLM's tool parsers, the model family).
FORMAT_ALIASES = {
    "qwen": "hermes",
    "llama3_json": "llama",
    "llama4_pythonic": "pythonic",
    "qwen3-coder": "qwen3_coder",
    "qwen3_xml": "qwen3_coder",
    "glm": "glm45",
    "glm4_moe": "glm45",
    "kimi": "kimi_k2",
    "kimi-k2": "kimi_k2",
    "deepseek": "deepseek_v3",
    "deepseek-v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v3",
    "gpt-oss": "harmony",
    "openai": "harmony",
}
