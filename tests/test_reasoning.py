"""Reasoning in every dialect: fields, details, tags, implicit open tag, legacy double delivery."""

from __future__ import annotations

import json

import pytest

from bridge import KNOWN_REASONING_TAGS, ReasoningTagFilter, TranslateOptions
from bridge.core.parts import Reasoning, Text
from helpers import chunk, run, text_chunks, tool_delta
from servers import messages_from


def _kinds(parts: list[Reasoning | Text]) -> list[tuple[str, str]]:
    return [(type(p).__name__, p.text) for p in parts]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields(field: str) -> None:
    result = run([chunk(**{field: "Let me "}), chunk(**{field: "think."}), *text_chunks("Hi", "!")])
    assert result.reasoning == "Let me think."
    assert result.text == "Hi!"
    assert result.types[:2] == ["REASONING_START", "REASONING_MESSAGE_START"]
    start = next(f for f in result.wire if f["type"] == "REASONING_MESSAGE_START")
    assert start["role"] == "reasoning"


def test_reasoning_details_text_and_summary() -> None:
    result = run(
        [
            chunk(reasoning_details=[{"type": "reasoning.summary", "summary": "Plan: "}]),
            chunk(reasoning_details=[{"type": "reasoning.text", "text": "check the map."}]),
            *text_chunks("Done."),
        ]
    )
    assert result.reasoning == "Plan: check the map."


def test_encrypted_details_and_signatures_become_encrypted_values() -> None:
    result = run(
        [
            chunk(
                reasoning="Thinking",
                reasoning_details=[{"type": "reasoning.text", "text": "Thinking"}],
            ),
            chunk(reasoning_details=[{"type": "reasoning.text", "text": "", "signature": "sig-1"}]),
            chunk(reasoning_details=[{"type": "reasoning.encrypted", "data": "opaque-2"}]),
            *text_chunks("Answer"),
        ]
    )
    values = [f for f in result.wire if f["type"] == "REASONING_ENCRYPTED_VALUE"]
    reasoning_id = next(
        f["messageId"] for f in result.wire if f["type"] == "REASONING_MESSAGE_START"
    )
    # each signed or encrypted detail less its text, to go back exactly as it came
    assert [json.loads(v["encryptedValue"]) for v in values] == [
        {"type": "reasoning.text", "signature": "sig-1"},
        {"type": "reasoning.encrypted", "data": "opaque-2"},
    ]
    assert {(v["subtype"], v["entityId"]) for v in values} == {("message", reasoning_id)}
    assert result.reasoning == "Thinking"


def test_encrypted_reasoning_alone_opens_a_reasoning_message_to_carry_it() -> None:
    result = run(
        [chunk(reasoning_details=[{"type": "reasoning.encrypted", "data": "x"}]), *text_chunks("A")]
    )
    value = next(f for f in result.wire if f["type"] == "REASONING_ENCRYPTED_VALUE")
    starts = [f for f in result.wire if f["type"] == "REASONING_MESSAGE_START"]
    assert [s["messageId"] for s in starts] == [value["entityId"]]


@pytest.mark.parametrize(
    "fields",
    [
        {"reasoning": "same", "reasoning_details": [{"type": "reasoning.text", "text": "same"}]},
        {
            "reasoning_content": "same",
            "reasoning": "same",
            "reasoning_details": [{"type": "reasoning.text", "text": "same"}],
        },
        {"reasoning_content": "same", "reasoning": "same"},
    ],
    ids=["openrouter", "litellm-all-three", "two-fields"],
)
def test_same_reasoning_in_several_fields_is_emitted_once(fields: dict[str, object]) -> None:
    result = run([chunk(**fields), chunk(**fields), *text_chunks("ok")])
    assert result.reasoning == "samesame"


PAIRS = sorted(KNOWN_REASONING_TAGS.items())


@pytest.mark.parametrize(("name", "pair"), PAIRS, ids=[name for name, _ in PAIRS])
def test_every_shipped_tag_pair(name: str, pair: tuple[str, str]) -> None:
    open_tag, close_tag = pair
    options = TranslateOptions(reasoning_tags=[name])
    body = f"{open_tag}\nweighing it\n{close_tag}\n\nThe answer."
    result = run(text_chunks(*body), options)  # one character per chunk
    assert result.reasoning == "weighing it"
    assert result.text == "The answer."


def test_default_tags_are_think_only() -> None:
    result = run(text_chunks("<thinking>x</thinking> y"))
    assert result.text == "<thinking>x</thinking> y"
    assert result.reasoning == ""


@pytest.mark.parametrize(
    "pieces",
    [
        ["<", "think>", "abc", "</", "think>", "Hi"],
        ["<th", "ink>ab", "c</thi", "nk>H", "i"],
        ["<think", ">abc<", "/think", ">", "Hi"],
        ["<think>abc</think>Hi"],
    ],
    ids=["lt-alone", "mid-word", "gt-alone", "whole"],
)
def test_tag_split_across_chunks(pieces: list[str]) -> None:
    result = run(text_chunks(*pieces))
    assert (result.reasoning, result.text) == ("abc", "Hi")


def test_only_a_possible_tag_is_held_back_and_only_until_decided() -> None:
    tags = ReasoningTagFilter()
    assert _kinds(tags.feed("a <")) == [("Text", "a ")]  # "<" could start <think>
    assert _kinds(tags.feed(" b")) == [("Text", "< b")]  # decided: not a tag
    assert _kinds(tags.feed("x<thi")) == [("Text", "x")]
    assert _kinds(tags.feed("s is")) == [("Text", "<this is")]
    assert _kinds(tags.feed("1 < 2 and 3 > 2")) == [("Text", "1 < 2 and 3 > 2")]
    assert _kinds(tags.feed("<thin")) == []
    assert _kinds(tags.close()) == [("Text", "<thin")]  # never completed: it was text


def test_a_lone_lt_is_text() -> None:
    result = run(text_chunks("if a <", " b then <", "b>bold</b>"))
    assert result.text == "if a < b then <b>bold</b>"


def test_starts_in_reasoning() -> None:
    options = TranslateOptions(starts_in_reasoning=True)
    result = run(text_chunks("\nI should greet.", "\n</th", "ink>\n\nHello!"), options)
    assert result.reasoning == "I should greet."
    assert result.text == "Hello!"


def test_starts_in_reasoning_without_close_tag_cut_by_length() -> None:
    # The close tag never comes: everything is reasoning, the reasoning is closed, no text.
    options = TranslateOptions(starts_in_reasoning=True)
    result = run(text_chunks("still thinking", " and", finish="length"), options)
    assert result.reasoning == "still thinking and"
    assert result.text == ""
    assert result.outcome.finish_reason == "length"
    assert result.types[-2:] == ["REASONING_MESSAGE_END", "REASONING_END"]


def test_starts_in_reasoning_yields_to_a_server_that_splits_reasoning_itself() -> None:
    options = TranslateOptions(starts_in_reasoning=True)
    result = run([chunk(reasoning_content="thought"), *text_chunks("The answer.")], options)
    assert (result.reasoning, result.text) == ("thought", "The answer.")


def test_orphan_close_tag_without_the_option_is_not_shown() -> None:
    result = run(text_chunks("thought about it</think>\n\nAnswer"))
    assert result.text == "thought about itAnswer"
    assert "</think>" not in result.text


def test_deepseek_legacy_tags_and_field_in_the_same_chunks() -> None:
    # llama.cpp --reasoning-format deepseek-legacy: content keeps the tags, the field repeats it.
    chunks = [
        chunk(content="<think>"),
        chunk(content="\n"),
        chunk(content="Let", reasoning_content="Let"),
        chunk(content=" me", reasoning_content=" me"),
        chunk(content=" see.\n", reasoning_content=" see.\n"),
        chunk(content="</think>"),
        chunk(content="\n\n"),
        *text_chunks("Answer."),
    ]
    result = run(chunks)
    assert result.reasoning == "Let me see.\n"
    assert result.text == "Answer."
    assert result.reasoning_messages == ["Let me see.\n"]


def test_deepseek_legacy_tags_before_the_field() -> None:
    # The tagged copy arrives a chunk ahead of the field: the field's echo is not shown again.
    chunks = [
        chunk(content="<think>Let me"),
        chunk(reasoning_content="Let me"),
        chunk(content=" see</think>", reasoning_content=" see"),
        *text_chunks("Answer."),
    ]
    result = run(chunks)
    assert result.reasoning == "Let me see"
    assert result.text == "Answer."


def test_field_is_sticky_so_tags_never_leak_later() -> None:
    chunks = [
        chunk(reasoning_content="first"),
        chunk(content="Text "),
        chunk(content="<think>again</think>"),
        chunk(content="more"),
        chunk(finish="stop"),
    ]
    result = run(chunks)
    assert result.reasoning == "first"
    assert result.text == "Text more"


def test_whitespace_matches_llamacpp_parser() -> None:
    # llama.cpp's parser strips the reasoning it reads from tags at both edges.
    result = run(text_chunks("<think>\n\nidea\n</think>\n\n", "Answer\n"))
    assert result.reasoning == "idea"
    assert result.text == "Answer\n"


PRIMES = ["<th", "ink>\nFirst, list", " the primes.", "\n</thi", "nk>\n\n", "2, 3, 5, 7"]


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param(PRIMES, id="close-tag-split"),
        pytest.param(["".join(PRIMES)], id="one-chunk"),
        pytest.param(
            ["<think>\nFirst, list the primes.", "\n</think>\n\n2, 3, 5, 7"], id="tag-whole"
        ),
        pytest.param(list("".join(PRIMES)), id="every-character"),
    ],
)
def test_reasoning_does_not_depend_on_where_the_close_tag_was_cut(pieces: list[str]) -> None:
    # Issue 12: the newline before a split "</thi" "nk>" was emitted before the tag decided it.
    result = run(text_chunks(*pieces))
    assert (result.reasoning, result.text) == ("First, list the primes.", "2, 3, 5, 7")


@pytest.mark.parametrize(
    "pieces",
    [
        ["First, list the primes.", "\n</thi", "nk>\n\n2, 3, 5, 7"],
        ["First, list the primes.\n</think>\n\n2, 3, 5, 7"],
    ],
)
def test_starts_in_reasoning_close_tag_cut_anywhere(pieces: list[str]) -> None:
    result = run(text_chunks(*pieces), TranslateOptions(starts_in_reasoning=True))
    assert (result.reasoning, result.text) == ("First, list the primes.", "2, 3, 5, 7")


def test_whitespace_held_for_a_close_tag_is_released_when_text_follows() -> None:
    # Held back only until decided: more reasoning keeps it, the end of the stream releases it.
    assert run(text_chunks("<think>a\n", "\nb</think>x")).reasoning == "a\n\nb"
    cut = run(text_chunks("<think>still thinking \n", finish="length"))
    assert cut.reasoning == "still thinking \n"


def test_reasoning_resumes_after_text_in_a_new_message() -> None:
    result = run(
        [
            chunk(reasoning_content="one"),
            chunk(content="Text."),
            chunk(reasoning_content="two"),
            chunk(content=" More."),
            chunk(finish="stop"),
        ]
    )
    assert result.reasoning_messages == ["one", "two"]
    assert result.text == "Text. More."
    # The text after the second reasoning is a new message: the client keeps messages in the
    # order they were opened, so " More." appended to the first would show above "two".
    starts = [f["messageId"] for f in result.wire if f["type"] == "TEXT_MESSAGE_START"]
    assert len(starts) == 2 and len(set(starts)) == 2
    assert [m["role"] for m in messages_from(result.wire)] == [
        "reasoning",
        "assistant",
        "reasoning",
        "assistant",
    ]


def test_calls_after_resumed_reasoning_go_under_a_new_message() -> None:
    result = run(
        [
            chunk(reasoning_content="one"),
            tool_delta(0, id="a", name="get_time", args="{}"),
            chunk(reasoning_content="two"),
            chunk(content="Done."),
            tool_delta(1, id="b", name="get_time", args="{}"),
            chunk(finish="tool_calls"),
        ]
    )
    messages = messages_from(result.wire)
    assert [m["role"] for m in messages] == ["reasoning", "assistant", "reasoning", "assistant"]
    assert [c["id"] for c in messages[1]["toolCalls"]] == ["a"]
    assert messages[3]["content"] == "Done."
    assert [c["id"] for c in messages[3]["toolCalls"]] == ["b"]


def test_a_turn_without_resumed_reasoning_is_one_assistant_message() -> None:
    result = run(
        [
            chunk(reasoning_content="one"),
            chunk(content="Text."),
            tool_delta(0, id="a", name="get_time", args="{}"),
            chunk(content=" More."),
            chunk(finish="tool_calls"),
        ]
    )
    assert [m["role"] for m in messages_from(result.wire)] == ["reasoning", "assistant"]


def test_interleaved_thinking_with_tags() -> None:
    result = run(text_chunks("<think>a</think>Text<think>b</think>End"))
    assert result.reasoning_messages == ["a", "b"]
    assert result.text == "TextEnd"


def test_magistral_content_list_with_thinking() -> None:
    message = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
                        {"type": "text", "text": "Answer"},
                    ],
                },
                "finish_reason": "stop",
            }
        ]
    }
    result = run([message])
    assert (result.reasoning, result.text) == ("hmm", "Answer")


@pytest.mark.parametrize(
    "spec",
    [[], ["nope"], [("<a>", "<a>")], [("", "</a>")], [("<a>",)]],
    ids=["empty", "unknown-name", "same-tags", "empty-tag", "one-tag"],
)
def test_bad_tag_options_are_refused(spec: list[object]) -> None:
    with pytest.raises(ValueError, match="reasoning tag"):
        TranslateOptions(reasoning_tags=spec)  # type: ignore[arg-type]


def test_custom_tag_pair_by_text() -> None:
    options = TranslateOptions(reasoning_tags=["think", "<r>...</r>"])
    result = run(text_chunks("<r>x</r>y"), options)
    assert (result.reasoning, result.text) == ("x", "y")
