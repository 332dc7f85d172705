"""Tool calls written as text (Hermes/Qwen ``<tool_call>``): one case table, run whole (a
non-streamed answer), streamed at every split point (hypothesis), and with tools offered or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_rules import check_events
from bridge import ChatStreamTranslator, TranslateOptions
from helpers import Result, chunk, counter_ids, run


@dataclass(frozen=True)
class Case:
    name: str
    content: str
    text: str
    calls: list[tuple[str, str]]
    reasoning: str = ""
    broken: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


OFFERED = ("get_weather", "get_time", "search", "f")
CALL_A = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
CALL_B = '{"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}'
CASES = [
    Case("one", f"<tool_call>\n{CALL_A}\n</tool_call>", "", [("get_weather", '{"city": "Paris"}')]),
    Case(
        "several",
        f"<tool_call>\n{CALL_A}\n</tool_call>\n<tool_call>\n{CALL_B}\n</tool_call>",
        "",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "Asia/Tokyo"}')],
    ),
    Case(
        "after-reasoning",
        f"<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{CALL_A}\n</tool_call>",
        "",
        [("get_weather", '{"city": "Paris"}')],
        reasoning="The user wants weather.\n",
    ),
    Case(
        "text-around",
        f"Let me look.\n<tool_call>{CALL_A}</tool_call>\nDone: 1 < 2 and {{json}} stays.",
        "Let me look.\n\nDone: 1 < 2 and {json} stays.",
        [("get_weather", '{"city": "Paris"}')],
    ),
    Case(
        "arguments-first",
        '<tool_call>{"arguments": {"q": [1, {"x": "}"}]}, "name": "search"}</tool_call>',
        "",
        [("search", '{"q": [1, {"x": "}"}]}')],
    ),
    Case(
        "arguments-as-a-string",
        '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>',
        "",
        [("f", '{"a": 1}')],
    ),
    Case(
        "not-json-stays-text",
        "<tool_call>I would call a tool here</tool_call> but no.",
        "<tool_call>I would call a tool here</tool_call> but no.",
        [],
    ),
    Case(
        "no-name-stays-text",
        '<tool_call>{"arguments": {"a": 1}}</tool_call>',
        '<tool_call>{"arguments": {"a": 1}}</tool_call>',
        [],
    ),
    Case(
        "cut-after-the-name-is-answered-as-broken",
        '<tool_call>{"name": "f", "arguments": {"a": ',
        "",
        [],
        broken=1,
    ),
    Case("a-lone-marker-prefix-is-text", "1 <tool 2 <tool_cal", "1 <tool 2 <tool_cal", []),
    Case(
        "mistral-array",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "get_time", "arguments": {"tz": "UTC"}}]',
        "",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}')],
    ),
    Case(
        "mistral-name-args",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "UTC"}',
        "",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}')],
    ),
    Case(
        "mistral-after-text",
        'Sure. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": [1, 2]}',
        "Sure. ",
        [("get_weather", '{"city": "Paris", "days": [1, 2]}')],
    ),
    Case(
        "mistral-not-a-call-stays-text",
        "[TOOL_CALLS] is what I would write, [ARGS] too.",
        "[TOOL_CALLS] is what I would write, [ARGS] too.",
        [],
    ),
    Case(
        "mistral-cut-is-answered-as-broken",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Par',
        "",
        [],
        broken=1,
    ),
    Case(
        "llama-python-tag",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        "",
        [("get_weather", '{"city": "Paris"}')],
    ),
    Case(
        "llama-bare-json-opening-the-answer",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "get_time", "parameters": {"tz": "UTC"}}',
        "",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}')],
    ),
    Case(
        "llama-bare-json-naming-no-offered-tool-is-text",
        '{"name": "Bob", "age": 3}',
        '{"name": "Bob", "age": 3}',
        [],
    ),
    Case(
        "llama-bare-json-later-in-the-answer-is-text",
        'Here: {"name": "get_weather", "parameters": {}}',
        'Here: {"name": "get_weather", "parameters": {}}',
        [],
    ),
    Case(
        "llama-function-tag",
        '<function=get_weather>{"city": "Paris"}</function> and more',
        " and more",
        [("get_weather", '{"city": "Paris"}')],
    ),
    Case(
        "mistral-bad-element-stays-text",
        "[TOOL_CALLS][{oops}]",
        "[TOOL_CALLS][{oops}]",
        [],
    ),
]


def run_case(case: Case, pieces: list[str], *, tools_offered: bool = True) -> Result:
    translator = ChatStreamTranslator(
        TranslateOptions(),
        new_id=counter_ids(),
        tool_names=OFFERED if tools_offered else (),
    )
    events = []
    for piece in pieces:
        events += translator.feed(chunk(content=piece))
    events += translator.feed(chunk(finish="stop"))
    events += translator.close()
    frames = check_events(events)
    result = Result(events, translator.outcome, frames)
    for f in frames:
        if f["type"] == "TOOL_CALL_START":
            result.calls[f["toolCallId"]] = {"name": f["toolCallName"], "arguments": ""}
        elif f["type"] == "TOOL_CALL_ARGS":
            result.calls[f["toolCallId"]]["arguments"] += f["delta"]
    return result


def _check(case: Case, result: Result) -> None:
    broken = [f for f in result.wire if f["type"] == "TOOL_CALL_RESULT"]
    answered = {f["toolCallId"] for f in broken}
    calls = [(c["name"], c["arguments"]) for i, c in result.calls.items() if i not in answered]
    assert result.text == case.text
    assert result.reasoning == case.reasoning
    assert calls == case.calls
    assert len(broken) == case.broken
    assert len(result.outcome.tool_call_ids) == len(case.calls)  # broken ones are not pending
    for f in broken:
        assert "could not be read" in f["content"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_whole(case: Case) -> None:
    _check(case, run_case(case, [case.content]))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_character_its_own_chunk(case: Case) -> None:
    _check(case, run_case(case, list(case.content)))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_split_gives_the_same_result(data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(CASES), label="case")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(case.content) - 1))), label="cuts"))
    pieces = [
        case.content[a:b] for a, b in zip([0, *cuts], [*cuts, len(case.content)], strict=True)
    ]
    _check(case, run_case(case, [p for p in pieces if p]))


def test_nothing_is_parsed_when_no_tools_were_offered() -> None:
    content = f"<tool_call>{CALL_A}</tool_call>"
    result = run_case(CASES[0], [content], tools_offered=False)
    assert result.text == content
    assert result.calls == {}


def test_format_none_and_forced_hermes() -> None:
    content = f"<tool_call>{CALL_A}</tool_call>"
    off = run(
        [chunk(content=content), chunk(finish="stop")], TranslateOptions(text_tool_format="none")
    )
    assert off.text == content
    forced = run(
        [chunk(content=content), chunk(finish="stop")], TranslateOptions(text_tool_format="hermes")
    )
    assert forced.tool_calls == [("get_weather", '{"city": "Paris"}')]


def test_arguments_stream_live() -> None:
    translator = ChatStreamTranslator(new_id=counter_ids(), tool_names=OFFERED)
    translator.feed(chunk(content='<tool_call>{"name": "get_weather", "arguments": {"ci'))
    events = translator.feed(chunk(content='ty": "Par'))
    assert [(e.type.value, getattr(e, "delta", "")) for e in events] == [
        ("TOOL_CALL_ARGS", 'ty": "Par')
    ]


def test_text_parsers_stand_down_once_the_server_sends_tool_calls() -> None:
    translator = ChatStreamTranslator(new_id=counter_ids(), tool_names=OFFERED)
    structured = {"index": 0, "id": "s1", "function": {"name": "real", "arguments": "{}"}}
    events = translator.feed(chunk(tool_calls=[structured]))
    events += translator.feed(chunk(content=f"<tool_call>{CALL_A}</tool_call>"))
    events += translator.feed(chunk(finish="tool_calls")) + translator.close()
    frames = check_events(events)
    assert [f["toolCallName"] for f in frames if f["type"] == "TOOL_CALL_START"] == ["real"]


def test_a_bad_format_name_is_refused() -> None:
    with pytest.raises(ValueError, match="text_tool_format"):
        TranslateOptions(text_tool_format="magic")  # type: ignore[arg-type]


def test_mistral_ids_are_nine_alphanumerics() -> None:
    case = next(c for c in CASES if c.name == "mistral-array")
    ids = run_case(case, [case.content]).outcome.tool_call_ids
    assert len(ids) == 2
    assert all(len(i) == 9 and i.isalnum() for i in ids)
