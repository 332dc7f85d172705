"""What the bridge, with the flags the doctor proposes, makes of the probes' chat answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ag_ui.core import BaseEvent, EventType

from bridge.cli.doctor.answer import Answer
from bridge.core.errors import BridgeError
from bridge.core.translate import ChatStreamTranslator, TranslateOptions

#: The tool the doctor offers and asks for (an AG-UI tool).
PROBE_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}
#: What the tool probes ask: to use ``PROBE_TOOL``, by its name.
PROBE_TOOL_PROMPT = f"What's the weather in Paris? Use the {PROBE_TOOL['name']} tool."


def bridge_view(answers: Sequence[Answer], flags: list[str]) -> dict[str, Any]:
    """What the bridge, with the flags proposed, makes of the two chat answers: the events'
    reasoning and text, and the tool calls it would hand the frontend."""
    options = TranslateOptions(
        reasoning_tags=[_flag(flags, "--reasoning-tags") or "think"],
        starts_in_reasoning="--starts-in-reasoning" in flags,
        text_tool_format=_flag(flags, "--text-tool-format") or "auto",
    )
    view: dict[str, Any] = {}
    for answer in answers:
        if answer.name not in ("plain", "tools") or not answer.chunks:
            continue
        tools = (
            {str(PROBE_TOOL["name"]): PROBE_TOOL["parameters"]} if answer.name == "tools" else {}
        )
        events = _translate(answer.chunks, options, tools)
        view[answer.name] = {
            "reasoning": _deltas(events, EventType.REASONING_MESSAGE_CONTENT),
            "text": _deltas(events, EventType.TEXT_MESSAGE_CONTENT),
            "tool_calls": [
                getattr(e, "tool_call_name", "")
                for e in events
                if e.type == EventType.TOOL_CALL_START
            ],
        }
    return view


def _translate(
    chunks: Sequence[dict[str, Any] | str], options: TranslateOptions, tools: Mapping[str, Any]
) -> list[BaseEvent]:
    translator = ChatStreamTranslator(options, tool_names=tools)
    events: list[BaseEvent] = []
    try:
        for chunk in chunks:
            events += translator.feed(chunk)
    except BridgeError:
        pass  # the probe's own error says it; what came before is still worth showing
    return events + translator.close()


def _deltas(events: Sequence[BaseEvent], kind: EventType) -> str:
    return "".join(getattr(e, "delta", "") for e in events if e.type == kind)


def _flag(flags: list[str], name: str) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else None
