"""What the doctor says of a llama.cpp server beyond what every server gets: the
``--reasoning-format`` its streams show, and whether its chat template takes tools (its
``/props``), so that a model that calls none is told apart from a server that cannot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The tool probe's warning when even a forced call got none from a template that takes tools.
MODEL_CALLED_NONE = (
    "asked to use a tool, even with tool_choice required, the model called none; the server's "
    "chat template takes tools (llama.cpp's /props), so it is the model's choice: tool calls "
    "may need a larger model"
)


def reasoning_format(reasoning: str, reasoned: str, content: str) -> str | None:
    """llama-server's ``--reasoning-format`` as its answers show it: ``deepseek`` puts the
    reasoning in ``reasoning_content``, ``none`` leaves the tags in ``content``,
    ``deepseek-legacy`` does both, the same reasoning twice (recent builds stream it exactly as
    ``deepseek``, so their streams cannot tell them apart; a model that writes tags of its own
    after its reasoning is no legacy). ``None`` when no reasoning came."""
    if reasoning == "reasoning_content":
        twice = bool(reasoned.strip()) and reasoned.strip() in content
        return "deepseek-legacy" if twice else "deepseek"
    if reasoning == "tags":
        return "none"
    return None


def template_takes_tools(props: Mapping[str, Any] | None) -> bool:
    """The chat template renders tools and tool calls (``/props`` ``chat_template_caps``)."""
    caps = props.get("chat_template_caps") if props is not None else None
    return isinstance(caps, Mapping) and bool(caps.get("supports_tool_calls"))
