"""What every text tool-call format shares: one call being read, and what a format knows.

``Call`` reports a call's name once known and then its arguments as they come, from a
``JsonCallReader`` fed either the model's own JSON or JSON a format reader builds from the model's
text (XML parameters, Python keyword arguments). When a call turns out not to be one it is never
dropped and never becomes a wrong call: before its name was shown it goes back to being text;
after, it is reported as ``BrokenToolCall``; the log says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bridge.core.parts import BrokenToolCall, Part, Text, ToolCallDelta
from bridge.core.text_tools.json_call import JsonCallReader

logger = logging.getLogger("agui_bridge")


@dataclass(frozen=True)
class FormatContext:
    """What the format readers of one stream share."""

    next_index: Callable[[], int]
    #: The tools offered, with their parameters' JSON schema (``{}`` when unknown).
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    formats: frozenset[str] = frozenset()
    #: Whether calls may be read at all (``False``: only harmony's channels, no tools offered).
    calls: bool = True

    def allowed(self, *, marker_of_its_own: bool) -> frozenset[str] | None:
        """The names a call may have: any, for a format with a marker of its own while tools
        were offered or the format was forced; only the offered ones otherwise."""
        if not self.calls:
            return frozenset()
        return None if marker_of_its_own else frozenset(self.tools)

    def parameter_schema(self, tool: str, parameter: str) -> Mapping[str, Any] | None:
        properties = self.tools.get(tool, {}).get("properties")
        if not isinstance(properties, Mapping):
            return None
        schema = properties.get(parameter)
        return schema if isinstance(schema, Mapping) else None


class Call:
    """One call being read: reports its name once known, then its arguments as they come."""

    def __init__(
        self,
        index: int,
        call_id: str | None,
        reader: JsonCallReader,
        raw: str,
        allowed: frozenset[str] | None = None,
    ) -> None:
        self.allowed = allowed  # None: any name
        self.index = index
        self.call_id = call_id
        self.reader = reader
        self.raw = raw  # the text as the model wrote it, for when it is not a call after all
        self._named = False
        self._pending = ""
        self._finished = False

    @property
    def named(self) -> bool:
        """The name was shown (a TOOL_CALL_START went out)."""
        return self._named

    def read(self, text: str, out: list[Part], *, raw: str | None = None) -> None:
        """Feed ``text`` to the reader; ``raw``: the model's text it stands for, if it was built."""
        self.raw += text if raw is None else raw
        reader = self.reader
        if reader.error is not None or reader.complete:
            if reader.complete:
                reader.feed(text)  # kept as `rest`
            return
        # Argument text read before an error is still reported: had it come in pieces, it
        # would have streamed already, and the outcome must not depend on how text was cut.
        piece = reader.feed(text)
        if not self._named:
            self._pending += piece
            if reader.name is None:
                return
            if self.allowed is not None and reader.name not in self.allowed:
                self.fail(f"{reader.name!r} is not one of the tools offered")
                return
            self._named = True
            piece, self._pending = self._pending, ""
            out.append(ToolCallDelta(self.index, self.call_id, reader.name, ""))
        if piece:
            out.append(ToolCallDelta(self.index, None, None, piece))

    def fail(self, why: str) -> None:
        if self.reader.error is None:
            self.reader.error = why

    def consume(self, text: str, out: list[Part]) -> str | None:
        """Read ``text``: ``None`` while the call goes on; once it has ended (read whole, or
        unreadable: see ``reader.error``), it is finished and what followed it (or followed the
        point where it stopped making sense) is returned."""
        self.read(text, out)
        reader = self.reader
        if reader.error is None and not reader.complete:
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


def arguments_reader(name: str) -> JsonCallReader:
    """A reader for calls whose format writes the name apart and then only the arguments (or
    whose arguments a format reader builds): fed a made-up ``{"name": …, "arguments":`` head,
    it is complete as soon as the arguments value is, and leaves what followed in ``rest``."""
    reader = JsonCallReader(stop_after_args=True)
    reader.feed(f'{{"name": {json.dumps(name)}, "arguments": ')
    return reader


def plausible_name(name: str) -> bool:
    return all(char.isalnum() or char in "_-." for char in name)
