"""Turn lifecycle: message order, finish, usage, truncation, errors, wire format, library use."""

from __future__ import annotations

from typing import Any

import anyio.lowlevel
import pytest
from ag_ui.core import EventType
from ag_ui.encoder import EventEncoder

from bridge import (
    DONE,
    ChatStreamTranslator,
    UpstreamProtocolError,
    UpstreamStreamError,
    UpstreamTruncatedError,
    atranslate_chat_stream,
    translate_chat_stream,
)
from bridge.core.usage import token_usage_from_openai
from helpers import chunk, counter_ids, fixture_chunks, run, text_chunks, tool_delta

#: Every event type the translator may emit. Adding one is a protocol decision: pin it here.
EMITTED_TYPES = {
    EventType.TEXT_MESSAGE_START,
    EventType.TEXT_MESSAGE_CONTENT,
    EventType.TEXT_MESSAGE_END,
    EventType.REASONING_START,
    EventType.REASONING_MESSAGE_START,
    EventType.REASONING_MESSAGE_CONTENT,
    EventType.REASONING_MESSAGE_END,
    EventType.REASONING_END,
    EventType.REASONING_ENCRYPTED_VALUE,
    EventType.TOOL_CALL_START,
    EventType.TOOL_CALL_ARGS,
    EventType.TOOL_CALL_END,
}


def _everything() -> list[dict[str, Any]]:
    return [
        chunk(reasoning="r", reasoning_details=[{"type": "reasoning.encrypted", "data": "e"}]),
        chunk(content="<think>t</think>text"),
        tool_delta(0, id="a", name="f", args="{}"),
        chunk(finish="tool_calls"),
    ]


def test_the_set_of_emitted_event_types_is_pinned() -> None:
    seen = {event.type for event in run(_everything()).events}
    seen |= {
        e.type
        for name in ["deepseek_tools_parallel_stream"]
        for e in run(fixture_chunks(name)).events
    }
    assert seen == EMITTED_TYPES


def test_text_message_order_and_role() -> None:
    result = run(text_chunks("Hello", " world"))
    assert result.types == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert result.wire[0]["role"] == "assistant"


def test_reasoning_is_closed_before_text_and_before_tool_calls() -> None:
    text = run([chunk(reasoning_content="r"), *text_chunks("t")])
    assert text.types.index("REASONING_END") < text.types.index("TEXT_MESSAGE_START")
    tools = run(
        [chunk(reasoning_content="r"), tool_delta(0, id="a", name="f"), chunk(finish="tool_calls")]
    )
    assert tools.types.index("REASONING_END") < tools.types.index("TOOL_CALL_START")


def test_whitespace_only_text_between_reasoning_and_tool_calls_opens_no_message() -> None:
    result = run(
        [
            chunk(reasoning_content="plan"),
            chunk(content="\n\n"),
            tool_delta(0, id="a", name="f", args="{}"),
            chunk(finish="tool_calls"),
        ]
    )
    assert "TEXT_MESSAGE_START" not in result.types


def test_leading_whitespace_is_kept_once_real_text_follows() -> None:
    result = run([chunk(content="\n"), chunk(content="  "), *text_chunks("x")])
    assert result.text == "\n  x"


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "content_filter"])
def test_finish_reason_ends_the_turn_at_once(reason: str) -> None:
    translator = ChatStreamTranslator(new_id=counter_ids())
    translator.feed(chunk(content="partial"))
    events = translator.feed(chunk(finish=reason))
    assert [e.type for e in events] == [EventType.TEXT_MESSAGE_END]
    assert translator.close() == []
    assert translator.outcome.finish_reason == reason
    assert translator.outcome.error is None


def test_usage_only_chunk_with_empty_choices_after_finish() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "total_tokens": 30,
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    result = run([*text_chunks("a"), {"choices": [], "usage": usage, "model": "m"}, DONE])
    got = result.outcome.usage
    assert got is not None
    assert (got.input_tokens, got.output_tokens, got.total_tokens, got.reasoning_tokens) == (
        10,
        20,
        30,
        5,
    )
    assert got.model == "m"


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # reasoning reported beside a smaller completion count: added in (protocol rule)
        (
            {"prompt_tokens": 3, "completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 7}},
            {"input_tokens": 3, "output_tokens": 9, "total_tokens": 12, "reasoning_tokens": 7},
        ),
        # DeepSeek's cache-hit count is part of prompt_tokens
        (
            {"prompt_tokens": 100, "completion_tokens": 1, "prompt_cache_hit_tokens": 64},
            {"input_tokens": 100, "output_tokens": 1, "total_tokens": 101, "cached_input_tokens": 64},
        ),
        # OpenRouter cache write
        (
            {"prompt_tokens": 50, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 20}},
            {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55, "cached_input_tokens": 10, "cache_write_input_tokens": 20},
        ),
        # total computed, not copied; junk values ignored
        (
            {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 99, "completion_tokens_details": {"reasoning_tokens": None}},
            {"input_tokens": 4, "output_tokens": 4, "total_tokens": 8},
        ),
        ({"prompt_tokens": -1, "completion_tokens": "x"}, None),
    ],
    ids=["reasoning-added", "deepseek-cache", "cache-write", "total-computed", "junk"],
)  # fmt: skip
def test_usage_accounting(usage: dict[str, Any], expected: dict[str, int] | None) -> None:
    got = token_usage_from_openai(usage)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got.model_dump(exclude_none=True) == expected


def test_stream_cut_short_is_an_error_not_a_success() -> None:
    result = run([chunk(content="Half an ans")])
    assert isinstance(result.outcome.error, UpstreamTruncatedError)
    assert result.outcome.error.code == "upstream_truncated"
    assert result.text == "Half an ans"  # what did arrive is not lost
    assert result.types[-1] == "TEXT_MESSAGE_END"


def test_done_without_finish_reason_is_a_truncated_stream() -> None:
    """Issue 57: a stream that never said why it ended is not whole, [DONE] or not
    (llama-cpp-python's server ends a stream it cuts with [DONE] and no finish_reason)."""
    result = run([chunk(content="ok"), DONE])
    assert result.text == "ok"
    assert isinstance(result.outcome.error, UpstreamTruncatedError)
    assert "[DONE] and no finish_reason" in result.outcome.error.message


def test_done_after_a_finish_reason_is_a_complete_stream() -> None:
    result = run([chunk(content="ok"), chunk(finish="stop"), DONE])
    assert result.outcome.error is None


def test_held_partial_tag_is_released_when_the_stream_is_cut() -> None:
    result = run([chunk(content="x <thi")])
    assert result.text == "x <thi"
    assert isinstance(result.outcome.error, UpstreamTruncatedError)


def test_error_chunk_mid_stream_carries_message_and_code() -> None:
    error = {"error": {"message": "model overloaded", "code": 503, "type": "server_error"}}
    result = run([chunk(content="Par"), error, chunk(content="never")])
    assert isinstance(result.raised, UpstreamStreamError)
    assert (result.raised.code, result.raised.message) == ("upstream_error", "model overloaded")
    assert (result.raised.upstream_code, result.raised.upstream_type) == ("503", "server_error")
    assert result.text == "Par"


@pytest.mark.parametrize(
    "bad",
    [
        {"choices": "x"},
        {"choices": [{"index": 0, "delta": "x"}]},
        {"choices": [{"index": 0, "delta": {"content": 5}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": {}}}]},
        [1, 2],
        "not done",
    ],
    ids=["choices", "delta", "content", "tool-calls", "array", "string"],
)
def test_malformed_chunks_are_protocol_errors(bad: Any) -> None:
    result = run([bad])
    assert isinstance(result.raised, UpstreamProtocolError)
    assert result.raised.code == "bad_upstream_chunk"


def test_outcome_hands_the_run_what_it_needs() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 2}
    result = run(
        [
            tool_delta(0, id="t1", name="f", args="{}"),
            chunk(finish="tool_calls"),
            {"choices": [], "usage": usage},
        ]
    )
    outcome = result.outcome
    assert (outcome.finish_reason, outcome.tool_call_ids, outcome.error) == (
        "tool_calls",
        ("t1",),
        None,
    )
    assert outcome.usage is not None and outcome.usage.total_tokens == 3


def test_wire_format_is_lf_only_camel_case_and_null_free() -> None:
    encoder = EventEncoder()
    frames = [encoder.encode(e) for e in run(_everything()).events]
    assert all(f.startswith("data: {") and f.endswith("}\n\n") and "\r" not in f for f in frames)
    body = "".join(frames)
    assert "null" not in body and "_id" not in body and "toolCallId" in body


def test_openai_sdk_chunks_with_extra_fields() -> None:
    from openai.types.chat import ChatCompletionChunk

    raw = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"reasoning_content": "hm"}, "finish_reason": None}],
        },
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "Yes"}, "finish_reason": "stop"}],
        },
    ]
    models = [ChatCompletionChunk.model_validate(c) for c in raw]
    result = run(models)
    assert (result.reasoning, result.text, result.outcome.finish_reason) == ("hm", "Yes", "stop")


def test_library_generator_raises_after_the_last_event() -> None:
    events = []
    with pytest.raises(UpstreamTruncatedError):
        for event in translate_chat_stream([chunk(content="cut")], new_id=counter_ids()):
            events.append(event.type)
    assert events == [
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
    ]


@pytest.mark.anyio
async def test_async_form_gives_the_same_events() -> None:
    chunks = fixture_chunks("deepseek_tools_parallel_stream")

    async def source() -> Any:
        for item in chunks:
            await anyio.lowlevel.checkpoint()
            yield item

    got = [e async for e in atranslate_chat_stream(source(), new_id=counter_ids())]
    expected = list(translate_chat_stream(chunks, new_id=counter_ids()))
    assert got == expected


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_lone_surrogate_escapes_from_upstream_do_not_break_the_stream() -> None:
    from helpers import sse_chunks_from_bytes

    body = b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud800b \\ud83d\\ude42"},"finish_reason":"stop"}]}\n\n'
    result = run(sse_chunks_from_bytes([body]))
    assert result.text == "a\ufffdb \U0001f642"


def test_chunks_orjson_refuses_are_read_as_json_reads_them() -> None:
    from helpers import sse_chunks_from_bytes

    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],'
        b'"seed":123456789012345678901234567890,"score":NaN}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"y"},"finish_reason":"stop"}]}\n\n'
    )
    chunks = list(sse_chunks_from_bytes([body]))
    assert chunks[0]["seed"] == 123456789012345678901234567890
    assert run(chunks).text == "xy"


@pytest.mark.parametrize(
    "delta",
    [
        {"content": "a"},
        {"content": ""},
        {"reasoning_content": "r"},
        {"reasoning": "r"},
        {"reasoning": ""},
    ],
)
def test_the_one_text_field_fast_path_reads_as_the_full_reading(delta: dict[str, Any]) -> None:
    from bridge.core.decode import decode_chat_chunk

    def chunk_with(delta: dict[str, Any]) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    # a `role` key sends the same delta down the full reading
    assert decode_chat_chunk(chunk_with(delta)) == decode_chat_chunk(
        chunk_with({**delta, "role": "assistant"})
    )
