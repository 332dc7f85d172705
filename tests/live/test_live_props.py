"""llama.cpp's ``/props`` acted on, live: with ``--reasoning-scope auto`` (the default) the
bridge reads ``chat_template_caps.supports_preserve_reasoning`` and sends the reasoning of every
turn back when the template preserves it (GLM-4.7's says true), only the turn in progress when it
does not (QwQ's says false). What went upstream is read from the runs' recordings (``--record``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import llama_server
from live_tools import DETERMINISTIC, bridge, llama, one_run

#: A finished first turn (its reasoning kept by the client), then a second question.
HISTORY = [
    {"id": "u1", "role": "user", "content": "What is the capital of France?"},
    {"id": "r1", "role": "reasoning", "content": "The user asks about France. Paris."},
    {"id": "a1", "role": "assistant", "content": "Paris."},
    {"id": "u2", "role": "user", "content": "And of Italy?"},
]


def _sent(folder: Path) -> list[dict[str, Any]]:
    """The chat requests' bodies the recordings hold, in the order the runs went."""
    bodies = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["type"] == "request" and entry["url"].endswith("/chat/completions"):
                bodies.append(entry["body"])
    return bodies


@pytest.mark.parametrize(
    ("template", "preserves"),
    [(llama_server.PRESERVING_TEMPLATE, True), (llama_server.THINKING_TEMPLATE, False)],
)
def test_auto_sends_earlier_reasoning_back_as_the_templates_caps_say(
    bed: llama_server.Bed, tmp_path: Path, template: str, preserves: bool
) -> None:
    with llama(bed, template=template) as server, bridge(server, record_dir=str(tmp_path)) as agent:
        props = httpx.get(f"{server.origin}/props", timeout=10).json()
        assert props["chat_template_caps"]["supports_preserve_reasoning"] is preserves
        capabilities = httpx.get(f"{agent}capabilities", timeout=10).json()
        assert capabilities["custom"]["reasoningScope"] == "auto"
        one_run(agent, HISTORY, forwardedProps={**DETERMINISTIC, "max_tokens": 8})
    (body,) = _sent(tmp_path)
    (first_answer,) = [m for m in body["messages"] if m["role"] == "assistant"]
    assert first_answer["content"] == "Paris."
    if preserves:
        assert first_answer["reasoning_content"] == "The user asks about France. Paris."
    else:
        assert "reasoning_content" not in first_answer


def test_an_explicit_scope_is_kept_whatever_the_template_says(
    bed: llama_server.Bed, tmp_path: Path
) -> None:
    with (
        llama(bed, template=llama_server.PRESERVING_TEMPLATE) as server,
        bridge(server, record_dir=str(tmp_path), reasoning_scope="current-turn") as agent,
    ):
        one_run(agent, HISTORY, forwardedProps={**DETERMINISTIC, "max_tokens": 8})
    (body,) = _sent(tmp_path)
    (first_answer,) = [m for m in body["messages"] if m["role"] == "assistant"]
    assert "reasoning_content" not in first_answer
