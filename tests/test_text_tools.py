"""Tool calls written as text, every format: one case table, run whole (a non-streamed answer),
one character per chunk, streamed at any split (hypothesis), and with tools offered or not."""

from __future__ import annotations

import re
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


#: The tools offered, with their parameters' schema (it types Qwen3-Coder's and GLM's values).
OFFERED: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    },
    "get_time": {"type": "object", "properties": {"tz": {"type": "string"}}},
    "search": {"type": "object", "properties": {"q": {}}},
    "f": {},
    "set_flags": {
        "type": "object",
        "properties": {
            "on": {"type": "boolean"},
            "ratio": {"type": ["number", "null"]},
            "opts": {"type": "object"},
            "tags": {"type": "array"},
            "label": {"anyOf": [{"type": "string"}]},
        },
    },
}
DS_CALLS, DS_CALL, DS_SEP, DS_END, DS_CALLS_END = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
)
KIMI_SECTION, KIMI_CALL, KIMI_ARGS, KIMI_END, KIMI_SECTION_END = (
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
)
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
        reasoning="The user wants weather.",
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
    # -- pythonic -----------------------------------------------------------------------------
    Case(
        "pythonic-list",
        "[get_weather(city=\"Paris\"), get_time(tz='Asia/Tokyo')]",
        "",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "Asia/Tokyo"}')],
    ),
    Case(
        "pythonic-python-literals",
        "[search(q=[1, (2, 3), {'k': 'a, b)'}], on=True, none=None, s='it\\'s')]",
        "",
        [("search", '{"q": [1, [2, 3], {"k": "a, b)"}], "on": true, "none": null, "s": "it\'s"}')],
    ),
    Case("pythonic-no-arguments", "[get_time()]", "", [("get_time", "{}")]),
    Case(
        "pythonic-after-reasoning-with-python-start",
        "<think>Weather.</think><|python_start|>[get_weather(city='Paris')]<|python_end|> Done.",
        " Done.",
        [("get_weather", '{"city": "Paris"}')],
        reasoning="Weather.",
    ),
    Case(
        "pythonic-later-in-the-answer-is-text",
        'See [get_weather(city="Paris")].',
        'See [get_weather(city="Paris")].',
        [],
    ),
    Case(
        "pythonic-naming-no-offered-tool-is-text",
        '[print(x="hi")]',
        '[print(x="hi")]',
        [],
    ),
    Case(
        "pythonic-a-markdown-link-is-text",
        "[Paris](https://en.wikipedia.org/wiki/Paris) is nice.",
        "[Paris](https://en.wikipedia.org/wiki/Paris) is nice.",
        [],
    ),
    Case(
        "pythonic-positional-argument-before-any-argument-shown-is-text",
        '[get_weather("Paris")]',
        '[get_weather("Paris")]',
        [],
    ),
    Case(
        "pythonic-bad-second-argument-is-broken",
        "[get_weather(city='Paris', 3)]",
        "",
        [],
        broken=1,
    ),
    # -- Qwen3-Coder XML ----------------------------------------------------------------------
    Case(
        "qwen3-coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "",
        [("get_weather", '{"city": "Paris", "days": 3}')],
    ),
    Case(
        "qwen3-coder-typed-by-the-schema",
        "Setting.\n<tool_call>\n<function=set_flags>\n<parameter=on>\nTrue\n</parameter>\n"
        "<parameter=ratio>\nnull\n</parameter>\n"
        '<parameter=opts>\n{"a": [1, 2]}\n</parameter>\n<parameter=tags>\n["x"]\n</parameter>\n'
        "<parameter=label>\n42\n</parameter>\n"
        '<parameter=note>\nline 1\n<b>"2"</b>\n\n</parameter>\n</function>\n</tool_call> Done.',
        "Setting.\n Done.",
        [
            (
                "set_flags",
                '{"on": true, "ratio": null, "opts": {"a": [1, 2]}, "tags": ["x"], '
                '"label": "42", "note": "line 1\\n<b>\\"2\\"</b>\\n"}',
            )
        ],
    ),
    Case(
        "qwen3-coder-without-the-wrapper-and-two-calls",
        "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n"
        "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
        "",
        [("get_time", '{"tz": "UTC"}'), ("get_weather", "{}")],
    ),
    Case(
        "qwen3-coder-cut-is-answered-as-broken",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
        "",
        [],
        broken=1,
    ),
    # -- GLM-4.5 ------------------------------------------------------------------------------
    Case(
        "glm45",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
        "",
        [("get_weather", '{"city": "Paris", "days": 3}')],
    ),
    Case(
        "glm45-after-reasoning-untyped-values-are-json",
        "<think>Look it up.</think>\n<tool_call>search\n<arg_key>q</arg_key>\n"
        '<arg_value>{"x": 1}</arg_value>\n</tool_call>\n<tool_call>get_time\n'
        "<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>",
        "",
        [("search", '{"q": {"x": 1}}'), ("get_time", '{"tz": "UTC"}')],
        reasoning="Look it up.",
    ),
    Case(
        "glm45-junk-among-the-arguments-is-broken",
        "<tool_call>get_weather\n<arg_key>city</arg_key> oops</tool_call>",
        "",
        [],
        broken=1,
    ),
    # -- Kimi K2 ------------------------------------------------------------------------------
    Case(
        "kimi-k2",
        f"Checking.{KIMI_SECTION}{KIMI_CALL}functions.get_weather:0{KIMI_ARGS}"
        f'{{"city": "Paris"}}{KIMI_END}{KIMI_CALL}functions.get_time:1{KIMI_ARGS}'
        f'{{"tz": "UTC"}}{KIMI_END}{KIMI_SECTION_END}',
        "Checking.",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}')],
    ),
    Case(
        "kimi-k2-bad-arguments-are-broken",
        f'{KIMI_SECTION}{KIMI_CALL}functions.get_weather:0{KIMI_ARGS}{{"city": Paris}}{KIMI_END}',
        "",
        [],
        broken=1,
    ),
    Case(
        "kimi-k2-a-section-without-calls-is-text",
        f"{KIMI_SECTION} nothing here",
        f"{KIMI_SECTION} nothing here",
        [],
    ),
    # -- DeepSeek V3 --------------------------------------------------------------------------
    Case(
        "deepseek-v3",
        f"{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n"
        f'{{"city": "Paris"}}\n```{DS_END}\n{DS_CALL}function{DS_SEP}get_time\n```json\n'
        f'{{"tz": "UTC"}}\n```{DS_END}{DS_CALLS_END}',
        "",
        [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}')],
    ),
    Case(
        "deepseek-v3-1",
        f'Sure.{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "Paris"}}{DS_END}{DS_CALLS_END}',
        "Sure.",
        [("get_weather", '{"city": "Paris"}')],
    ),
    Case(
        "deepseek-v3-cut-is-broken",
        f'{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "Pa',
        "",
        [],
        broken=1,
    ),
    # -- gpt-oss harmony ----------------------------------------------------------------------
    Case(
        "harmony-call",
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Paris"}<|call|>',
        "",
        [("get_weather", '{"city": "Paris"}')],
        reasoning="Need the weather.",
    ),
    Case(
        "harmony-final-answer",
        "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Hello <b>there</b>!<|return|>",
        "Hello <b>there</b>!",
        [],
        reasoning="Easy.",
    ),
    Case(
        "harmony-recipient-in-the-start-header",
        "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>"
        '{"tz": "UTC"}<|call|>',
        "",
        [("get_time", '{"tz": "UTC"}')],
    ),
    Case(
        "harmony-bad-arguments-are-broken",
        '<|channel|>commentary to=functions.get_weather<|message|>{"city": }<|call|>',
        "",
        [],
        broken=1,
    ),
]


def run_case(
    case: Case, pieces: list[str], *, tools_offered: bool = True, whole_message: bool = False
) -> Result:
    translator = ChatStreamTranslator(
        TranslateOptions(),
        new_id=counter_ids(),
        tool_names=OFFERED if tools_offered else (),
    )
    if whole_message:  # a non-streamed chat.completion
        message = {"role": "assistant", "content": "".join(pieces)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        chunks = [{"object": "chat.completion", "choices": [choice]}]
    else:
        chunks = [*(chunk(content=piece) for piece in pieces), chunk(finish="stop")]
    return run(chunks, translator=translator)


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
def test_non_streamed(case: Case) -> None:
    _check(case, run_case(case, [case.content], whole_message=True))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_without_tools_offered_nothing_becomes_a_call(case: Case) -> None:
    result = run_case(case, [case.content], tools_offered=False)
    assert result.calls == {}
    assert result.reasoning == case.reasoning
    if not case.name.startswith("harmony"):  # harmony's channels are read even then
        answer = re.sub(r"<think>.*</think>", "", case.content, flags=re.DOTALL)
        assert result.text == answer.lstrip("\n") or result.text == answer


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_character_its_own_chunk(case: Case) -> None:
    _check(case, run_case(case, list(case.content)))


@settings(max_examples=400, deadline=None)
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


def test_kimi_ids_are_kept_as_written() -> None:
    case = next(c for c in CASES if c.name == "kimi-k2")
    ids = run_case(case, [case.content]).outcome.tool_call_ids
    assert ids == ("functions.get_weather:0", "functions.get_time:1")


def test_harmony_channels_are_read_without_tools_but_calls_stay_text() -> None:
    analysis = "<|channel|>analysis<|message|>Hmm.<|end|>"
    final = "<|start|>assistant<|channel|>final<|message|>Hi!<|return|>"
    result = run_case(CASES[0], [analysis, final], tools_offered=False)
    assert (result.reasoning, result.text, result.calls) == ("Hmm.", "Hi!", {})
    call = '<|channel|>commentary to=functions.get_weather<|message|>{"city": "Paris"}<|call|>'
    result = run_case(CASES[0], [analysis, call], tools_offered=False)
    assert result.reasoning == "Hmm."
    assert result.text == call.removesuffix("<|call|>")
    assert result.calls == {}


def test_format_aliases() -> None:
    assert TranslateOptions(text_tool_format="openai").text_tool_format == "harmony"
    assert TranslateOptions(text_tool_format="qwen3-coder").text_tool_format == "qwen3_coder"
    assert TranslateOptions(text_tool_format="llama3_json").text_tool_format == "llama"


def test_a_forced_format_reads_only_its_own_form() -> None:
    content = (
        "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
    )
    glm = run(
        [chunk(content=content), chunk(finish="stop")], TranslateOptions(text_tool_format="glm45")
    )
    assert glm.tool_calls == [("get_weather", '{"days": 3}')]  # no schema: JSON where it parses
    hermes = run(
        [chunk(content=content), chunk(finish="stop")], TranslateOptions(text_tool_format="hermes")
    )
    assert hermes.tool_calls == []
    assert hermes.text == content


def test_qwen3_coder_text_values_stream_live() -> None:
    translator = ChatStreamTranslator(new_id=counter_ids(), tool_names=OFFERED)
    translator.feed(chunk(content="<tool_call>\n<function=get_weather>\n<parameter=city>\nPa"))
    events = translator.feed(chunk(content="ri"))
    events += translator.feed(chunk(content="s\n</parameter>\n</function>\n</tool_call>"))
    deltas = [e.delta for e in events if e.type.value == "TOOL_CALL_ARGS"]
    assert deltas == ["ri", 's"', "}"]
