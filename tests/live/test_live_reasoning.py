"""Reasoning from a live llama-server in each of its ``--reasoning-format``s, through the bridge,
as the official client 1.0.0 receives it: the same reasoning and the same answer whatever the
format, reasoning first; and the same over llama-server's ``/v1/responses``.

The chat template (QwQ's) opens ``<think>`` in the prompt, so llama-server's reasoning parser
applies. ``--reasoning-budget`` makes llama-server itself close the reasoning after a few tokens
(the tiny model would never write ``</think>``), so every answer has both parts.
"""

from __future__ import annotations

from typing import Any

import llama_server
from live_tools import DETERMINISTIC, bridge, joined, llama, one_run, types, user

FORMATS = ("deepseek", "deepseek-legacy", "none")
BUDGET = ("--reasoning-budget", "12")
PROMPT = "Write a long story about a cat named Tom."
LIMITS = {**DETERMINISTIC, "max_tokens": 48}


def _split(report: dict[str, Any]) -> tuple[str, str]:
    """The reasoning and the answer the client saw; reasoning before any text."""
    events = report["events"]
    kinds = types(events)
    assert "REASONING_START" in kinds and "TEXT_MESSAGE_START" in kinds, kinds
    last_reasoning = max(i for i, kind in enumerate(kinds) if kind.startswith("REASONING_"))
    assert last_reasoning < kinds.index("TEXT_MESSAGE_START"), kinds
    reasoning = joined(events, "REASONING_MESSAGE_CONTENT")
    text = joined(events, "TEXT_MESSAGE_CONTENT")
    for marker in ("<think>", "</think>"):
        assert marker not in reasoning and marker not in text
    roles = [message["role"] for message in report["messages"]]
    assert roles == ["user", "reasoning", "assistant"], roles
    return reasoning, text


def test_every_reasoning_format_gives_the_same_reasoning_and_answer(
    bed: llama_server.Bed,
) -> None:
    seen: dict[str, tuple[str, str]] = {}
    for reasoning_format in FORMATS:
        with (
            llama(bed, reasoning_format=reasoning_format, extra=BUDGET) as server,
            bridge(server) as agent,
        ):
            seen[reasoning_format] = _split(one_run(agent, [user(PROMPT)], forwardedProps=LIMITS))
    reasoning, text = seen["deepseek"]
    assert reasoning.strip() and text.strip()
    for reasoning_format in FORMATS[1:]:
        other_reasoning, other_text = seen[reasoning_format]
        # The edges of the reasoning are whitespace llama.cpp's parsers disagree on (README
        # "What each server dialect gives"); every other character is the same.
        assert other_reasoning.strip() == reasoning.strip(), reasoning_format
        assert other_text.strip() == text.strip(), reasoning_format


def test_the_responses_api_gives_the_chat_apis_reasoning_and_answer(
    bed: llama_server.Bed,
) -> None:
    with llama(bed, extra=BUDGET) as server:
        with bridge(server) as agent:
            chat = _split(one_run(agent, [user(PROMPT)], forwardedProps=LIMITS))
        with bridge(server, upstream_api="responses") as agent:
            report = one_run(agent, [user(PROMPT)], forwardedProps=LIMITS)
    responses = _split(report)
    assert responses[0].strip() == chat[0].strip()
    assert responses[1].strip() == chat[1].strip()
    assert report["events"][-1]["usage"][0]["outputTokens"] > 0
