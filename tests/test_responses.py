"""Responses API upstreams: the decoder (streamed events and whole responses, through the same
translator and emitter), the request built from the AG-UI history, and two-run round trips over
real HTTP with the scripted upstream's ``/v1/responses``, encrypted reasoning included."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from bridge import ChatStreamTranslator, UpstreamStreamError
from bridge.cli.demo.responses import response_events, response_object
from bridge.config import BridgeConfig
from bridge.core.decode_responses import ResponsesDecoder
from bridge.serve.run.request import build_responses_request
from helpers import Result, counter_ids, run
from servers import ASK_TOOLS, TOOLS, Stack, joined, messages_from, post, run_input, scripted_stack

ASK = [{"role": "user", "content": ASK_TOOLS}]


def translate(events: list[dict[str, Any]]) -> Result:
    decode = ResponsesDecoder().decode
    return run(events, translator=ChatStreamTranslator(new_id=counter_ids(), decode=decode))


def scripted(model: str = "scripted-reasoning-content", **body: Any) -> list[dict[str, Any]]:
    request = {"input": ASK, "tools": [{"type": "function", **t} for t in TOOLS], **body}
    return response_events(request, model, "resp_test", 0)


# -- the decoder --------------------------------------------------------------------------------


def test_streamed_summaries_calls_and_encrypted_reasoning() -> None:
    events = scripted()
    result = translate(events)
    types = result.types
    # a reasoning message per summary part, named by the item's id, then the two calls
    starts = [f["messageId"] for f in result.wire if f["type"] == "REASONING_MESSAGE_START"]
    item_id = next(e["item"]["id"] for e in events if e["type"] == "response.output_item.added")
    assert starts == [item_id, f"{item_id}#1"]
    encrypted = [f for f in result.wire if f["type"] == "REASONING_ENCRYPTED_VALUE"]
    assert len(encrypted) == 1
    assert encrypted[0]["entityId"] == item_id and encrypted[0]["subtype"] == "message"
    assert encrypted[0]["encryptedValue"].startswith("enc1:")
    assert [c["name"] for c in result.calls.values()] == ["get_weather", "change_background"]
    assert [json.loads(c["arguments"]) for c in result.calls.values()] == [
        {"city": "Paris"},
        {"color": "lightblue"},
    ]
    assert "TEXT_MESSAGE_START" not in types  # no empty message for a turn of calls only
    assert result.reasoning.startswith("The user asks")
    assert result.outcome.finish_reason == "tool_calls"
    assert result.outcome.usage is not None and result.outcome.usage.reasoning_tokens


def test_each_call_ends_at_its_done_event() -> None:
    events = scripted()
    translator = ChatStreamTranslator(new_id=counter_ids(), decode=ResponsesDecoder().decode)
    ended_at = []
    for number, event in enumerate(events):
        if any(e.type.value == "TOOL_CALL_END" for e in translator.feed(event)):
            ended_at.append(event["type"])
        assert number < len(events)
    translator.close()
    assert ended_at == ["response.function_call_arguments.done"] * 2


def test_call_starts_when_its_item_is_added() -> None:
    events = scripted()
    translator = ChatStreamTranslator(new_id=counter_ids(), decode=ResponsesDecoder().decode)
    for event in events:
        out = translator.feed(event)
        if (
            event["type"] == "response.output_item.added"
            and event["item"]["type"] == "function_call"
        ):
            assert [e.type.value for e in out][-1:] == ["TOOL_CALL_START"]


def test_raw_reasoning_text_streams_as_reasoning() -> None:
    result = translate(scripted("scripted-reasoning"))
    assert result.reasoning.startswith("The user asks")
    assert result.types.count("REASONING_MESSAGE_START") == 1


def test_non_streamed_response_gives_what_the_stream_gives() -> None:
    request = {"input": ASK, "tools": [{"type": "function", **t} for t in TOOLS]}
    whole = translate([response_object(request, "scripted-reasoning-content", "resp_test", 0)])
    streamed = translate(scripted())
    assert (whole.reasoning, whole.text, list(whole.calls.values())) == (
        streamed.reasoning,
        streamed.text,
        list(streamed.calls.values()),
    )
    assert whole.types.count("REASONING_MESSAGE_START") == 2
    assert whole.outcome.finish_reason == streamed.outcome.finish_reason == "tool_calls"
    assert [f["encryptedValue"] for f in whole.wire if "encryptedValue" in f] == [
        f["encryptedValue"] for f in streamed.wire if "encryptedValue" in f
    ]


def test_answer_text_and_order() -> None:
    request = {"input": [{"role": "user", "content": "Hi there"}]}
    result = translate(response_events(request, "scripted-reasoning-content", "resp_x", 0))
    assert result.text and result.reasoning
    assert result.types.index("REASONING_END") < result.types.index("TEXT_MESSAGE_START")
    assert result.outcome.finish_reason == "stop"


def test_incomplete_is_a_cut_finish() -> None:
    result = translate(scripted(max_output_tokens=5))
    assert result.outcome.finish_reason == "length"
    assert result.outcome.error is None


def test_failed_and_error_events_raise_with_message_and_code() -> None:
    failed = {
        "type": "response.failed",
        "response": {
            "status": "failed",
            "error": {"code": "server_error", "message": "The model crashed"},
        },
    }
    translator = ChatStreamTranslator(decode=ResponsesDecoder().decode)
    with pytest.raises(UpstreamStreamError, match=r"The model crashed \(server_error\)"):
        translator.feed(failed)
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down"}
    with pytest.raises(UpstreamStreamError, match=r"Slow down \(rate_limit_exceeded\)"):
        ChatStreamTranslator(decode=ResponsesDecoder().decode).feed(error)


def test_done_events_fill_in_what_no_delta_carried() -> None:
    events = [
        e
        for e in scripted()
        if not e["type"].endswith(".delta") or e["type"].startswith("response.output_text")
    ]
    result = translate(events)
    assert result.reasoning.startswith("The user asks")
    assert [json.loads(c["arguments"]) for c in result.calls.values()] == [
        {"city": "Paris"},
        {"color": "lightblue"},
    ]


def test_usage_maps_input_output_reasoning_and_cached_tokens() -> None:
    end = {
        "type": "response.completed",
        "response": {
            "status": "completed",
            "usage": {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 40},
                "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 20},
                "total_tokens": 130,
            },
        },
    }
    result = translate([end])
    usage = result.outcome.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (100, 30, 20)
    assert usage.cached_input_tokens == 40


# -- the request ------------------------------------------------------------------------------


def test_request_from_the_history() -> None:
    config = BridgeConfig(upstream_url="http://x/v1", model="m", upstream_api="responses")
    history = [
        {"id": "s", "role": "system", "content": "Be brief."},
        {"id": "u1", "role": "user", "content": ASK_TOOLS},
        {"id": "rs_1", "role": "reasoning", "content": "Part one.", "encryptedValue": "enc1:AA"},
        {"id": "rs_1#1", "role": "reasoning", "content": "Part two."},
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"id": "t1", "role": "tool", "toolCallId": "call_1", "content": "18°C"},
    ]
    body = run_input(
        history, tools=TOOLS, forwardedProps={"reasoning_effort": "low", "max_tokens": 99}
    )
    request = build_responses_request(RunAgentInput.model_validate(body), config)
    assert request["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": ASK_TOOLS},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "Part one."},
                {"type": "summary_text", "text": "Part two."},
            ],
            "encrypted_content": "enc1:AA",
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18°C"},
    ]
    assert request["tools"][0] == {"type": "function", **TOOLS[0]}
    assert request["reasoning"] == {"summary": "auto", "effort": "low"}
    assert request["include"] == ["reasoning.encrypted_content"]
    assert request["store"] is False and request["stream"] is True
    assert request["max_output_tokens"] == 99
    assert "messages" not in request and "max_tokens" not in request


# -- end to end -------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["stream", "no-stream"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with scripted_stack(upstream_api="responses", upstream_stream=request.param == "stream") as s:
        yield s


def test_two_run_tool_round_trip_carries_the_encrypted_reasoning(stack: Stack) -> None:
    url = f"{stack.bridge_url}/"
    history: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": ASK_TOOLS}]
    first = post(url, run_input(history, tools=TOOLS))
    assert first[-1]["type"] == "RUN_FINISHED"
    pending = first[-1]["outcome"]["pendingToolCallIds"]
    produced = messages_from(first)
    reasoning = [m for m in produced if m["role"] == "reasoning"]
    assert len(reasoning) == 2  # one per summary part
    carrier = next(m for m in reasoning if "encryptedValue" in m)
    text = " ".join(m["content"] for m in reasoning)
    calls = next(m for m in produced if m["role"] == "assistant")["toolCalls"]
    assert [c["id"] for c in calls] == pending

    results = [
        {"id": f"t{i}", "role": "tool", "toolCallId": c["id"], "content": f"result {i}: 18°C sunny"}
        for i, c in enumerate(calls)
    ]
    seen = len(stack.upstream_requests)
    second = post(url, run_input([*history, *produced, *results], tools=TOOLS))
    assert second[-1]["type"] == "RUN_FINISHED"
    assert "18°C sunny" in joined(second, "TEXT_MESSAGE_CONTENT")

    sent = stack.upstream_requests[seen]
    items = sent["input"]
    reasoning_items = [i for i in items if i.get("type") == "reasoning"]
    assert len(reasoning_items) == 1
    item = reasoning_items[0]
    assert item["id"] == carrier["id"]
    assert item["encrypted_content"] == carrier["encryptedValue"]
    assert [part["text"] for part in item["summary"]] == [m["content"] for m in reasoning]
    assert base64.b64decode(item["encrypted_content"].removeprefix("enc1:")).decode().split() == (
        text.split()
    )  # the scripted upstream's stand-in holds the reasoning it streamed
    kinds = [i.get("type", "message") for i in items]
    assert kinds == [
        "message",
        "reasoning",
        "function_call",
        "function_call",
        *["function_call_output"] * 2,
    ]
    assert [i["call_id"] for i in items if i.get("type") == "function_call_output"] == pending
    assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]
