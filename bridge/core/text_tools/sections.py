"""Calls in a section of special tokens, each call a header and JSON arguments.

- Kimi K2: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
  <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>…<|tool_calls_section_end|>``;
  the header is the call's id (kept: Kimi's template wants it back) and names the function;
- DeepSeek V3 / R1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
  \\n```json\\n{"city": "Paris"}\\n```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>``, and V3.1's
  ``<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.core.parts import Part, Text
from bridge.core.text_tools.call import Call, FormatContext, arguments_reader, plausible_name

_HEADER_LIMIT = 300


@dataclass(frozen=True)
class SectionTokens:
    opens: tuple[str, ...]  # the section's opening tokens (a format may have spellings)
    call_begin: str
    header_end: str
    call_end: str
    section_end: str
    kimi_ids: bool  # the header is ``functions.name:n``, the call's id


KIMI_K2 = SectionTokens(
    ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"),
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    True,
)
DEEPSEEK_V3 = SectionTokens(
    ("<｜tool▁calls▁begin｜>",),
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    False,
)
_FENCE = "```"


class SectionBody:
    def __init__(self, ctx: FormatContext, tokens: SectionTokens, opening: str) -> None:
        self._ctx = ctx
        self._tokens = tokens
        self._state = "between"  # between | header | name | args | tail
        self._buf = ""
        self._raw = opening  # structure read since the last call, shown if no call follows
        self._calls = 0
        self._call: Call | None = None
        self._call_id: str | None = None

    def feed(self, text: str, out: list[Part]) -> str | None:
        buf, self._buf = self._buf + text, ""
        tokens = self._tokens
        while True:
            if self._state in ("between", "tail"):
                stripped = buf.lstrip()
                space = buf[: len(buf) - len(stripped)]
                expected = [tokens.call_begin, tokens.section_end]
                if self._state == "tail":
                    expected = [_FENCE, tokens.call_end, *expected]
                found = next((token for token in expected if stripped.startswith(token)), None)
                if found is None:
                    if not stripped or any(token.startswith(stripped) for token in expected):
                        self._buf = buf
                        return None
                    return self._give_back(buf, out)  # no further call: the rest is text
                if not self._calls or found == tokens.call_begin:
                    self._raw += space + found  # after a call, its own structure is spent
                buf = stripped[len(found) :]
                if found == tokens.section_end:
                    return buf if self._calls else self._give_back(buf, out)
                if found == tokens.call_begin:
                    self._state = "header"
                elif found == tokens.call_end:
                    self._state = "between"
            elif self._state in ("header", "name"):
                end = tokens.header_end if self._state == "header" else _FENCE
                position = buf.find(end)
                if position == -1:
                    if len(buf) > _HEADER_LIMIT:
                        return self._give_back(buf, out)
                    self._buf = buf
                    return None
                after = buf[position + len(end) :]
                if self._state == "name" and len(after) < 4 and "json".startswith(after):
                    self._buf = buf  # perhaps ```json, still arriving
                    return None
                header = buf[:position].strip()
                self._raw += buf[: position + len(end)]
                buf = buf[position + len(end) :]
                if self._state == "header" and not tokens.kimi_ids and header == "function":
                    self._state = "name"  # DeepSeek V3: the name follows, then fenced JSON
                    continue
                if self._state == "name" and buf.startswith("json"):
                    self._raw += "json"
                    buf = buf[4:]
                name, self._call_id = self._name_and_id(header)
                if not name or not plausible_name(name):
                    return self._give_back(buf, out)
                allowed = self._ctx.allowed(marker_of_its_own=True)
                reader = arguments_reader(name)
                self._call = Call(self._ctx.next_index(), self._call_id, reader, "", allowed)
                self._call.raw, self._raw = self._raw, ""
                self._state = "args"
            else:  # args
                assert self._call is not None
                rest = self._call.consume(buf, out)
                if rest is None:
                    return None
                self._calls += 1  # read, or answered as broken: either way the call is spent
                buf, self._call, self._state = rest, None, "tail"

    def close(self, out: list[Part]) -> None:
        if self._call is not None:
            self._call.finish(out)
        elif self._raw or self._buf:
            out.append(Text(self._raw + self._buf))

    def _name_and_id(self, header: str) -> tuple[str, str | None]:
        if not self._tokens.kimi_ids:
            return header, None
        # functions.get_weather:0 → get_weather, and the header is the id
        name = header.split(".", 1)[1] if "." in header else header
        return name.rsplit(":", 1)[0], header

    def _give_back(self, rest: str, out: list[Part]) -> str:
        if self._raw:
            out.append(Text(self._raw))
            self._raw = ""
        return rest
