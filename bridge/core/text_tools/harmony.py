"""gpt-oss harmony messages, for servers that hand the model's raw text on.

``<|channel|>analysis<|message|>…<|end|>`` is reasoning, ``<|channel|>final<|message|>…<|return|>``
(and ``commentary`` without a recipient, the model's preamble) is text, and
``<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{…}<|call|>`` is a
tool call (the recipient may also stand in the ``<|start|>assistant to=…`` header). A message
without its end token ends where the next one starts.
"""

from __future__ import annotations

import re

from bridge.core.markers import marker_set
from bridge.core.parts import Part, Reasoning, Text
from bridge.core.text_tools.call import Call, FormatContext, arguments_reader

CHANNEL = "<|channel|>"
START = "<|start|>"
MESSAGE = "<|message|>"
_ENDS = ("<|end|>", "<|return|>", "<|call|>")
_HEADER_LIMIT = 300
_CHANNEL_NAME = re.compile(r"<\|channel\|>\s*([\w.-]+)")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


class HarmonyBody:
    """One message: its header up to ``<|message|>``, then its content up to an end token."""

    def __init__(self, ctx: FormatContext, opening: str) -> None:
        self._ctx = ctx
        self._header = opening
        self._state = "header"  # header | reasoning | text | call | tail
        self._buf = ""
        self._call: Call | None = None
        self._end = marker_set([*_ENDS, START, CHANNEL])

    def feed(self, text: str, out: list[Part]) -> str | None:
        buf, self._buf = self._buf + text, ""
        if self._state == "header":
            position = buf.find(MESSAGE)
            if position == -1:
                if len(buf) > _HEADER_LIMIT:
                    out.append(Text(self._header))
                    return buf
                self._buf = buf
                return None
            header = self._header + buf[:position]
            self._header = header + MESSAGE
            buf = buf[position + len(MESSAGE) :]
            self._state = self._kind(header, out)
        if self._state == "call":
            assert self._call is not None
            rest = self._call.consume(buf, out)
            if rest is None:
                return None
            buf, self._state = rest, "tail"  # read, or answered as broken: its end token is due
        if self._state == "tail":
            stripped = buf.lstrip()
            end = next((token for token in _ENDS if stripped.startswith(token)), None)
            if end is not None:
                return stripped[len(end) :]
            if not stripped or any(token.startswith(stripped) for token in _ENDS):
                self._buf = buf
                return None
            return buf
        position, marker = self._end.find(buf)
        if not marker:
            keep = self._end.partial_length(buf)
            self._content(buf[: len(buf) - keep], out)
            self._buf = buf[len(buf) - keep :]
            return None
        self._content(buf[:position], out)
        return buf[position + len(marker) :] if marker in _ENDS else buf[position:]

    def close(self, out: list[Part]) -> None:
        if self._state == "header":
            out.append(Text(self._header + self._buf))
        elif self._state == "call":
            assert self._call is not None
            self._call.finish(out)
        elif self._state == "tail":
            if self._buf.strip():
                out.append(Text(self._buf))
        else:
            self._content(self._buf, out)
        self._buf = ""

    def _kind(self, header: str, out: list[Part]) -> str:
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            name = recipient[1].removeprefix("functions.")
            allowed = self._ctx.allowed(marker_of_its_own=True)
            call = Call(self._ctx.next_index(), None, arguments_reader(name), "", allowed)
            call.raw = self._header
            call.read("", out)
            if call.named:
                self._call = call
                return "call"
            call.finish(out)  # no tools were offered: the message is text
            return "text"
        channel = _CHANNEL_NAME.search(header)
        return "reasoning" if channel is not None and channel[1] == "analysis" else "text"

    def _content(self, text: str, out: list[Part]) -> None:
        if text:
            out.append(Reasoning(text) if self._state == "reasoning" else Text(text))
