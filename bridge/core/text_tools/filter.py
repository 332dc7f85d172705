"""Tool calls a model wrote as text in ``content`` (no server-side tool parser), streamed live.

``TextToolCalls`` watches the text for the opening marker of each enabled format and hands what
follows to that format's body reader until the calls end; text around the calls stays text.

- ``hermes`` (Hermes, Qwen2.5, Qwen3): ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``;
- ``mistral``: ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`` and the newer
  ``[TOOL_CALLS]name[ARGS]{…}`` (ids of 9 alphanumerics, as Mistral's templates require);
- ``llama`` (Llama 3.x): ``<|python_tag|>{…}``, ``<function=name>{…}</function>``, and a bare
  ``{"name": …, "parameters": {…}}`` only where it opens the answer and names an offered tool;
- ``pythonic`` (Llama 3.2/4 and others): ``[get_weather(city="Paris"), …]`` where it opens the
  answer and names an offered tool, or after ``<|python_start|>``;
- ``qwen3_coder``: ``<tool_call><function=name><parameter=city>Paris</parameter></function>
  </tool_call>``, values typed by the tool's JSON schema;
- ``glm45``: ``<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>``;
- ``kimi_k2``: ``<|tool_calls_section_begin|>…<|tool_call_begin|>functions.name:0
  <|tool_call_argument_begin|>{…}<|tool_call_end|>…``;
- ``deepseek_v3``: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name`` +
  fenced JSON (and V3.1's ``name<｜tool▁sep｜>{…}``);
- ``harmony`` (gpt-oss): ``analysis`` messages are reasoning, ``final`` ones text, and
  ``to=functions.name … <|message|>{…}<|call|>`` a call.

The readers are in ``formats.py`` and the modules of this folder it imports.

A call that turns out not to be one is never dropped and never becomes a wrong call: before its
name is read it goes back to being text; after, it is reported as ``BrokenToolCall`` (the emitter
ends it and answers it with an error result, so the frontend does not run it), and the log says
why. Arguments stream as the model writes them, in any key order.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping
from typing import Any

from bridge.core.markers import marker_set
from bridge.core.parts import Part, Text
from bridge.core.text_tools.call import FormatContext
from bridge.core.text_tools.formats import FORMAT_ALIASES, MARKERS, START_MARKERS, Body, body_for

#: Indices for calls parsed from text, apart from the upstream's own ``tool_calls`` indices.
TEXT_CALL_INDEX_BASE = 1_000_000
TEXT_TOOL_FORMATS = tuple(MARKERS)
__all__ = ["FORMAT_ALIASES", "TEXT_CALL_INDEX_BASE", "TEXT_TOOL_FORMATS", "TextToolCalls"]


class TextToolCalls:
    """Splits content text into ``Text`` and tool-call parts for the enabled formats."""

    def __init__(
        self,
        formats: tuple[str, ...] = TEXT_TOOL_FORMATS,
        *,
        tool_names: Collection[str] | Mapping[str, Mapping[str, Any]] = frozenset(),
        calls: bool = True,
    ) -> None:
        """``tool_names``: the tools offered (a mapping gives each one's parameters schema,
        which types Qwen3-Coder's and GLM's values); a call without a marker of its own (Llama's
        bare JSON, a pythonic list) must name one of them. ``calls=False``: read harmony's
        channels but no calls (no tools were offered)."""
        unknown = set(formats) - set(TEXT_TOOL_FORMATS)
        if unknown:
            raise ValueError(f"unknown text tool formats: {sorted(unknown)}")
        anywhere = [marker for name in formats for marker in MARKERS[name]]
        at_start = [marker for name in formats for marker in START_MARKERS.get(name, ())]
        self._open = marker_set(anywhere)
        self._open_at_start = marker_set([*anywhere, *at_start])
        tools = (
            {
                name: schema if isinstance(schema, Mapping) else {}
                for name, schema in tool_names.items()
            }
            if isinstance(tool_names, Mapping)
            else {name: {} for name in tool_names}
        )
        # The calls' indexes: a counter of their own, not a method of the filter's (the
        # context would hold the filter that holds it: a cycle for the garbage collector).
        indexes = itertools.count(TEXT_CALL_INDEX_BASE).__next__
        self._ctx = FormatContext(indexes, tools, frozenset(formats), calls)
        self._started = False  # some text (or a call) came: start-only markers no longer apply
        self._held = ""
        self._body: Body | None = None

    def plain_text_stops(self) -> frozenset[str] | None:
        """While the filter is in answer text with nothing held: the characters its markers
        begin with. ``feed`` gives text without any of them back as one ``Text``, its state as
        it was. ``None`` otherwise."""
        if self._body is not None or self._held or not self._started:
            return None
        return self._open.first_chars

    def feed(self, text: str) -> list[Part]:
        plain = self._body is None and not self._held and self._started
        if plain and not self._open.could_start_in(text):  # the common case: answer text
            return [Text(text)]
        text, self._held = self._held + text, ""
        out: list[Part] = []
        while text:
            if self._body is None:
                markers = self._open if self._started else self._open_at_start
                position, marker = markers.find(text)
                if not marker:
                    keep = markers.partial_length(text)
                    if keep:
                        text, self._held = text[:-keep], text[-keep:]
                    if text:
                        self._started = self._started or not text.isspace()
                        out.append(Text(text))
                    return out
                if position:
                    self._started = self._started or not text[:position].isspace()
                    out.append(Text(text[:position]))
                    if self._started and marker not in self._open.markers:
                        text = text[position:]
                        continue
                self._started = True
                self._body = body_for(marker, self._ctx)
                text = text[position + len(marker) :]
                continue
            rest = self._body.feed(text, out)
            if rest is None:
                return out
            self._body = None
            text = rest
        return out

    def close(self) -> list[Part]:
        out: list[Part] = []
        held, self._held = self._held, ""
        if self._body is None:
            if held:
                out.append(Text(held))
        else:
            self._body.close(out)
            self._body = None
        return out
