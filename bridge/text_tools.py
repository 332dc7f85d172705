"""Tool calls a model wrote as text in ``content`` (no server-side tool parser), streamed live.

``HermesToolCalls`` reads ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Hermes,
Qwen2.5, Qwen3): text around the calls stays text; arguments stream as the model writes them.
A call that turns out not to be one is never dropped and never becomes a wrong call: before its
name is read it goes back to being text; after, it is reported as ``BrokenToolCall`` (the emitter
answers it with an error result, so the frontend does not run it) and the log says why.
"""

from __future__ import annotations

import logging

from bridge.json_call import JsonCallReader
from bridge.markers import MarkerSet
from bridge.parts import BrokenToolCall, Part, Text, ToolCallDelta

logger = logging.getLogger("agui_bridge")

#: Indices for calls parsed from text, apart from the upstream's own ``tool_calls`` indices.
TEXT_CALL_INDEX_BASE = 1_000_000


class HermesToolCalls:
    OPEN = "<tool_call>"
    CLOSE = "</tool_call>"

    def __init__(self) -> None:
        self._open = MarkerSet([self.OPEN])
        self._close = MarkerSet([self.CLOSE])
        self._held = ""
        self._call: JsonCallReader | None = None
        self._named = False
        self._pending = ""
        self._index = TEXT_CALL_INDEX_BASE - 1

    def feed(self, text: str) -> list[Part]:
        text, self._held = self._held + text, ""
        out: list[Part] = []
        while text:
            if self._call is None:
                position, marker = self._open.find(text)
                if not marker:
                    text = self._hold(text, self._open)
                    if text:
                        out.append(Text(text))
                    return out
                if position:
                    out.append(Text(text[:position]))
                self._begin()
                text = text[position + len(marker) :]
                continue
            position, marker = self._close.find(text)
            body = text[:position] if marker else self._hold(text, self._close)
            self._read(body, out)
            if not marker:
                return out
            self._finish(out, closed=True)
            text = text[position + len(marker) :]
        return out

    def close(self) -> list[Part]:
        out: list[Part] = []
        held, self._held = self._held, ""
        if self._call is None:
            if held:
                out.append(Text(held))
            return out
        self._read(held, out)
        self._finish(out, closed=False)
        return out

    def _hold(self, text: str, markers: MarkerSet) -> str:
        keep = markers.partial_length(text)
        if keep:
            self._held = text[-keep:]
            return text[:-keep]
        return text

    def _begin(self) -> None:
        self._call = JsonCallReader(args_keys=("arguments", "parameters"))
        self._named = False
        self._pending = ""
        self._index += 1

    def _read(self, body: str, out: list[Part]) -> None:
        call = self._call
        assert call is not None
        if not body or call.error is not None:
            if call.error is not None:
                call.text += body
            return
        piece = call.feed(body)
        if call.error is not None:
            return
        if not self._named:
            self._pending += piece
            if call.name is None:
                return
            self._named = True
            piece, self._pending = self._pending, ""
            out.append(ToolCallDelta(self._index, None, call.name, ""))
        if piece:
            out.append(ToolCallDelta(self._index, None, None, piece))

    def _finish(self, out: list[Part], *, closed: bool) -> None:
        call = self._call
        assert call is not None
        self._call = None
        raw = self.OPEN + call.text + (self.CLOSE if closed else "")
        if call.error is None and not call.complete:
            call.error = "the call was cut off before its end"
        if call.error is not None:
            logger.warning("a text tool call could not be read (%s): %.200r", call.error, raw)
            if self._named:
                out.append(BrokenToolCall(self._index, raw, call.error))
            else:
                out.append(Text(raw))
            return
        if call.arguments_were_text:
            out.append(ToolCallDelta(self._index, None, None, call.arguments()))
