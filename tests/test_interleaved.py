"""Interleaved thinking from the scripted model: asked to "interleave", it reasons, writes, reasons
again and writes again. Each dialect lays the second reasoning out as it lays out the first, and
through the bridge a client holds reasoning, assistant, reasoning, assistant, in that order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bridge.cli.demo import SCRIPTED_MODELS
from bridge.cli.demo.dialects import generate
from bridge.cli.demo.script import write_script
from servers import Stack, messages_from, post, run_input, scripted_stack

PROMPT = "Please interleave your thinking."
USER = {"id": "u", "role": "user", "content": PROMPT}
#: What the client must hold, in order (text compared without its edge whitespace: a tag dialect's
#: server drops the whitespace right after ``</think>``, as llama.cpp does).
EXPECTED = [
    ("reasoning", "First I look at the question."),
    ("assistant", "Here is a first thought."),
    ("reasoning", "Now I reconsider."),
    ("assistant", "And here is the answer."),
]


def _script_deltas(model: str) -> list[dict[str, Any]]:
    request = {"model": model, "messages": [{"role": "user", "content": PROMPT}]}
    return list(generate(write_script(request), model).deltas)


def test_the_script_only_for_the_word() -> None:
    plain = write_script({"messages": [{"role": "user", "content": "Why is the sky blue?"}]})
    assert plain.interleaved == ()
    assert plain.segments == (("reasoning", plain.reasoning), ("text", plain.answer))
    script = write_script({"messages": [{"role": "user", "content": "INTERLEAVE, please"}]})
    assert [kind for kind, _ in script.segments] == ["reasoning", "text", "reasoning", "text"]
    # A tool the user asks for wins: the interleaved answer is for turns without tools.
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    asked = {"messages": [{"role": "user", "content": "Interleave: the weather?"}]}
    assert write_script({**asked, "tools": [weather]}).tool_calls


def test_the_wire_reasoning_again_after_text() -> None:
    # A field dialect: reasoning_content deltas, content deltas, reasoning_content again, content.
    runs: list[str] = []
    for delta in _script_deltas("scripted-reasoning-content"):
        (key,) = delta
        if not runs or runs[-1] != key:
            runs.append(key)
    assert runs == ["reasoning_content", "content", "reasoning_content", "content"]
    # A tag dialect: a second <think> block after the first text.
    content = "".join(d["content"] for d in _script_deltas("scripted-think-tags"))
    assert content == (
        "<think>\nFirst I look at the question.\n</think>\n\nHere is a first thought."
        "<think>\nNow I reconsider.\n</think>\n\n And here is the answer."
    )
    # The template opens only the first block: the model opens the second itself.
    content = "".join(d["content"] for d in _script_deltas("scripted-think-no-open"))
    assert content.count("<think>") == 1 and content.count("</think>") == 2
    # OpenRouter: each block its own detail index, each closed by its own signature.
    signed = [
        detail
        for delta in _script_deltas("scripted-openrouter")
        for detail in delta.get("reasoning_details", ())
        if detail.get("signature")
    ]
    assert [detail["index"] for detail in signed] == [0, 1]
    # gpt-oss harmony: analysis, final, analysis, final; only the last one ends the generation.
    content = "".join(d["content"] for d in _script_deltas("scripted-harmony-text"))
    assert content.count("<|channel|>analysis") == content.count("<|channel|>final") == 2
    assert content.endswith("<|return|>") and content.count("<|return|>") == 1


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack() as running:
        yield running


def _held(stack: Stack, model: str) -> list[dict[str, Any]]:
    frames = post(f"{stack.bridge_url}/", run_input([USER], forwardedProps={"model": model}))
    assert frames[-1]["type"] == "RUN_FINISHED"
    return messages_from(frames)


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_through_the_bridge_in_the_order_written(stack: Stack, model: str) -> None:
    held = _held(stack, model)
    shown = [(m["role"], m["content"].strip()) for m in held]
    if model == "scripted-plain":
        assert shown == [("assistant", "Here is a first thought. And here is the answer.")]
        return
    assert shown == EXPECTED
    assert len({m["id"] for m in held}) == 4, "each part is a message of its own"


def test_the_next_turn_sends_one_assistant_message(stack: Stack) -> None:
    held = _held(stack, "scripted-reasoning-content")
    again = {"id": "u2", "role": "user", "content": "Thanks."}
    post(
        f"{stack.bridge_url}/",
        run_input([USER, *held, again], forwardedProps={"model": "scripted-reasoning-content"}),
    )
    sent = stack.upstream_requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "Here is a first thought. And here is the answer."


def test_the_responses_api_too() -> None:
    """Over ``/v1/responses``: reasoning item, message item, reasoning item, message item."""
    with scripted_stack(upstream_api="responses") as running:
        for model in ("scripted-reasoning-content", "scripted-reasoning"):
            held = _held(running, model)
            assert [(m["role"], m["content"].strip()) for m in held] == EXPECTED
