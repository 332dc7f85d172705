"""Tool calls from ``delta.tool_calls[]``: assembly by index, interleaving, odd servers."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bridge import UpstreamProtocolError
from helpers import chunk, run, tool_delta


def _finish() -> dict[str, object]:
    return chunk(finish="tool_calls")


def test_assembled_by_index_and_streamed_live() -> None:
    result = run(
        [
            tool_delta(0, id="a", name="get_weather", args='{"ci'),
            tool_delta(0, args='ty": "Paris"}'),
            _finish(),
        ]
    )
    assert result.tool_calls == [("get_weather", '{"city": "Paris"}')]
    assert result.types == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert result.outcome.tool_call_ids == ("a",)


def test_id_and_name_on_a_later_delta_hold_the_arguments_until_start() -> None:
    result = run(
        [
            tool_delta(0, args=""),
            tool_delta(0, id="late", args=""),
            tool_delta(0, name="lookup"),
            tool_delta(0, args='{"q": 1}'),
            _finish(),
        ]
    )
    assert result.tool_calls == [("lookup", '{"q": 1}')]
    assert result.outcome.tool_call_ids == ("late",)


def test_arguments_before_the_name_are_held_not_lost() -> None:
    result = run(
        [tool_delta(0, id="x", args='{"a"'), tool_delta(0, name="f", args=": 1}"), _finish()]
    )
    assert result.tool_calls == [("f", '{"a": 1}')]
    assert result.types[:2] == ["TOOL_CALL_START", "TOOL_CALL_ARGS"]


def test_an_id_is_made_when_the_upstream_never_sends_one() -> None:
    result = run([tool_delta(0, name="f", args="{}"), tool_delta(1, name="g"), _finish()])
    ids = result.outcome.tool_call_ids
    assert len(ids) == 2 and all(i.startswith("call") for i in ids) and ids[0] != ids[1]
    assert result.tool_calls == [("f", "{}"), ("g", "")]


def test_interleaved_parallel_calls_never_send_args_after_end() -> None:
    chunks = [
        tool_delta(0, id="A", name="get_weather", args=""),
        tool_delta(1, id="B", name="get_time", args=""),
        tool_delta(0, args='{"city":'),
        tool_delta(1, args='{"tz":'),
        tool_delta(0, args=' "Paris"}'),
        tool_delta(1, args=' "UTC"}'),
        _finish(),
    ]
    result = run(chunks)  # run() applies the client's rules: no ARGS after END, no double START
    assert result.tool_calls == [
        ("get_weather", '{"city": "Paris"}'),
        ("get_time", '{"tz": "UTC"}'),
    ]
    assert result.types[:2] == ["TOOL_CALL_START", "TOOL_CALL_START"]
    assert result.types[-2:] == ["TOOL_CALL_END", "TOOL_CALL_END"]


def test_ollama_reuses_index_zero_for_every_parallel_call() -> None:
    result = run(
        [
            tool_delta(0, id="call_1", name="get_weather", args='{"city": "Paris"}'),
            tool_delta(0, id="call_2", name="get_time", args='{"tz": "CET"}'),
            _finish(),
        ]
    )
    assert result.tool_calls == [
        ("get_weather", '{"city": "Paris"}'),
        ("get_time", '{"tz": "CET"}'),
    ]
    assert result.outcome.tool_call_ids == ("call_1", "call_2")


def test_index_reused_without_ids_but_with_a_new_name_is_a_new_call() -> None:
    result = run(
        [tool_delta(0, name="a", args="{}"), tool_delta(0, name="b", args="{}"), _finish()]
    )
    assert result.tool_calls == [("a", "{}"), ("b", "{}")]


def test_repeated_name_and_id_on_every_delta_stay_one_call() -> None:
    result = run(
        [
            tool_delta(0, id="k", name="f", args='{"x"'),
            tool_delta(0, id="k", name="f", args=": 2}"),
            _finish(),
        ]
    )
    assert result.tool_calls == [("f", '{"x": 2}')]


def test_name_and_whole_arguments_in_one_delta() -> None:
    result = run([tool_delta(0, id="g1", name="get_time", args='{"tz":"UTC"}'), _finish()])
    assert result.types == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert result.tool_calls == [("get_time", '{"tz":"UTC"}')]


def test_arguments_given_as_an_object_are_passed_on_as_json_text() -> None:
    call = {"index": 0, "id": "o", "function": {"name": "f", "arguments": {"a": 1}}}
    result = run([chunk(tool_calls=[call]), _finish()])
    assert result.tool_calls == [("f", '{"a": 1}')]


def test_duplicate_upstream_ids_are_made_unique() -> None:
    result = run(
        [tool_delta(0, id="same", name="f"), tool_delta(1, id="same", name="g"), _finish()]
    )
    ids = result.outcome.tool_call_ids
    assert ids[0] == "same" and ids[1] != "same"


@given(st.lists(st.sampled_from(["a", "a_1", "a_2", "a_3", "a_1_3", "b"]), max_size=12))
@example(["a", "a_2", "a"])
def test_every_call_of_a_turn_has_an_id_of_its_own_whatever_ids_the_upstream_repeats(
    ids: list[str],
) -> None:
    """Issue 40, finding 1: a new id for a repeated one never collides with one the upstream
    gives later or gave before (``a``, ``a_2``, ``a`` made two calls ``a_2``)."""
    deltas = [tool_delta(i, id=call_id, name=f"f{i}", args="{}") for i, call_id in enumerate(ids)]
    result = run([*deltas, _finish()])
    assert len(set(result.outcome.tool_call_ids)) == len(ids)
    assert [name for name, _ in result.tool_calls] == [f"f{i}" for i in range(len(ids))]
    assert result.outcome.tool_call_ids[:1] == tuple(ids[:1])


def test_arguments_without_a_name_are_an_error_not_a_silent_loss() -> None:
    result = run([tool_delta(0, id="n", args='{"a": 1}'), _finish()])
    assert isinstance(result.outcome.error, UpstreamProtocolError)
    assert "name" in result.outcome.error.message


def test_parent_is_the_text_message_when_there_is_text() -> None:
    result = run(
        [chunk(content="Let me check."), tool_delta(0, id="c", name="f", args="{}"), _finish()]
    )
    text_id = next(f["messageId"] for f in result.wire if f["type"] == "TEXT_MESSAGE_START")
    assert result.calls["c"]["parent"] == text_id


def test_parent_is_one_shared_id_for_a_tools_only_turn() -> None:
    result = run(
        [
            chunk(reasoning_content="plan"),
            tool_delta(0, id="a", name="f", args="{}"),
            tool_delta(1, id="b", name="g", args="{}"),
            _finish(),
        ]
    )
    parents = {call["parent"] for call in result.calls.values()}
    assert len(parents) == 1
    assert parents.pop() not in {
        f.get("messageId") for f in result.wire if "REASONING" in f["type"]
    }


def test_text_after_tool_calls_joins_the_same_assistant_message() -> None:
    result = run([tool_delta(0, id="a", name="f", args="{}"), chunk(content="Done"), _finish()])
    text_id = next(f["messageId"] for f in result.wire if f["type"] == "TEXT_MESSAGE_START")
    assert result.calls["a"]["parent"] == text_id


@pytest.mark.parametrize("finish", ["tool_calls", "stop"])
def test_calls_are_reported_for_the_frontend_whatever_the_finish_reason(finish: str) -> None:
    result = run([tool_delta(0, id="a", name="f", args="{}"), chunk(finish=finish)])
    assert result.outcome.tool_call_ids == ("a",)


def test_what_a_failing_chunk_produced_is_still_emitted() -> None:
    # The finish flushes a held "<th" as text, then finds a call with no name: the text and the
    # end of the message still reach the client, before the error.
    result = run(
        [chunk(content="a<th"), tool_delta(0, id="n", args="{}"), chunk(finish="tool_calls")]
    )
    assert isinstance(result.raised, UpstreamProtocolError)
    assert result.text == "a<th"
    assert result.types[-1] == "TEXT_MESSAGE_END"


def test_a_nameless_call_replaced_by_a_new_id_is_an_error() -> None:
    result = run(
        [
            tool_delta(0, id="a", args="{}"),
            tool_delta(0, id="b", name="f"),
            chunk(finish="tool_calls"),
        ]
    )
    assert isinstance(result.raised, UpstreamProtocolError)
