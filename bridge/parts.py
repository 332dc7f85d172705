"""Neutral parts: what a decoder reads off the wire, before any AG-UI concern.

Decoders turn one upstream format into these; filters rewrite ``Text``; the emitter turns
them into AG-UI events. They are plain frozen dataclasses so the hot path stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ag_ui.core import TokenUsage


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning text, from a field or from inside reasoning tags."""

    text: str


@dataclass(frozen=True, slots=True)
class Text:
    """Answer text (``delta.content``), possibly still holding tags until filtered."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One ``delta.tool_calls[]`` entry: any of id, name and arguments may be missing."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class BrokenToolCall:
    """A call written as text that turned out unreadable after its name was already shown."""

    index: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class EncryptedReasoning:
    """An opaque reasoning artefact (encrypted reasoning, or a signature) to hand back later."""

    value: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage, already in AG-UI's accounting."""

    usage: TokenUsage


@dataclass(frozen=True, slots=True)
class Finish:
    """The upstream's ``finish_reason``."""

    reason: str


Part = Reasoning | Text | ToolCallDelta | BrokenToolCall | EncryptedReasoning | Usage | Finish
