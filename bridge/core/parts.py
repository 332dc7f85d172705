"""Neutral parts: what a decoder reads off the wire, before any AG-UI concern.

Decoders turn one upstream format into these; filters rewrite ``Text``; the emitter turns
them into AG-UI events. They are plain frozen dataclasses so the hot path stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ag_ui.core import TokenUsage


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning text, from a field or from inside reasoning tags. ``message_id``: the
    upstream's own id for the reasoning it belongs to (Responses API items and summary parts);
    a new id starts a new reasoning message, named by it."""

    text: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Text:
    """Answer text (``delta.content``), possibly still holding tags until filtered."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One ``delta.tool_calls[]`` entry: any of id, name and arguments may be missing.
    ``fields``: what else the provider put on the call (Gemini's ``extra_content`` with its
    thought signature), each as the JSON text it came in, to go back on the same call."""

    index: int
    id: str | None
    name: str | None
    arguments: str
    fields: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class BrokenToolCall:
    """A call written as text that turned out unreadable after its name was already shown."""

    index: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class EncryptedReasoning:
    """An opaque reasoning artefact (encrypted reasoning, or a signature) to hand back later;
    ``message_id``: the reasoning message it belongs to, when the upstream names it."""

    value: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    """The upstream says tool call ``index`` is complete (Responses API): it can end now."""

    index: int


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage, already in AG-UI's accounting."""

    usage: TokenUsage


@dataclass(frozen=True, slots=True)
class Failed:
    """The upstream said in its stream that the answer failed (OpenRouter's ``finish_reason:
    "error"``), after whatever came before it in the same chunk."""

    message: str


@dataclass(frozen=True, slots=True)
class Finish:
    """The upstream's ``finish_reason``; ``detail``: what it said of why (the categories
    Azure OpenAI's content filter stopped the answer for)."""

    reason: str
    detail: str | None = None


Part = (
    Reasoning
    | Text
    | ToolCallDelta
    | ToolCallDone
    | BrokenToolCall
    | EncryptedReasoning
    | Usage
    | Finish
    | Failed
)
