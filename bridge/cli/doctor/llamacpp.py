"""What the doctor says of a llama.cpp server beyond what every server gets: the
``--reasoning-format`` its streams show, and whether its chat template takes tools (its
``/props``), so that a model that calls none is told apart from a server that cannot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def reasoning_format(reasoning: str, tags: bool) -> str | None:
    """llama-server's ``--reasoning-format`` as its answers show it: ``deepseek`` puts the
    reasoning in ``reasoning_content``, ``none`` leaves the tags in ``content``,
    ``deepseek-legacy`` does both (its non-streamed answers; recent builds stream it exactly as
    ``deepseek``, so a stream cannot tell them apart). ``None`` when no reasoning came."""
    if reasoning == "reasoning_content":
        return "deepseek-legacy" if tags else "deepseek"
    if reasoning == "tags":
        return "none"
    return None


def template_takes_tools(props: Mapping[str, Any] | None) -> bool:
    """The chat template renders tools and tool calls (``/props`` ``chat_template_caps``)."""
    caps = props.get("chat_template_caps") if props is not None else None
    return isinstance(caps, Mapping) and bool(caps.get("supports_tool_calls"))
