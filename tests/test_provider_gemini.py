"""Gemini 3's tool loop with no flag (issue 57, point 1): the thought signature Gemini puts on the
first tool call of each step reaches the client as the call's encrypted value
(``REASONING_ENCRYPTED_VALUE``, subtype ``tool-call``), the official clients keep it on the call
(1.0.0 and CopilotKit's 0.0.59 alike) and send it back, and the bridge puts it back on the same
call, as it came: three turns of tool loops against a strict emulator (``gemini_upstream``) that
refuses a missing signature with Gemini's own error, over real sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gemini_upstream import MODEL, Gemini

from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from node_tools import official
from servers import post, run_input, serve

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CLIENTS = ["1.0.0", "0.0.59"]


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


@pytest.fixture
def gemini() -> Iterator[tuple[Gemini, str]]:
    emulator = Gemini()
    with serve(emulator.app()) as url:
        yield emulator, url


def _bridge(upstream: str, **tools: Any) -> Any:
    config = BridgeConfig(upstream_url=f"{upstream}/v1", model=MODEL)
    return serve(create_app(config, tools=list(tools.values())))


def _signed(request: dict[str, Any]) -> dict[str, str | None]:
    """Each call of the request's assistant messages → the signature it carries."""
    return {
        call["id"]: ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")
        for message in request["messages"]
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    }


@pytest.mark.parametrize("client", CLIENTS)
def test_a_gemini_frontend_tool_loop_of_three_turns_works_with_no_flag(
    gemini: tuple[Gemini, str], client: str
) -> None:
    emulator, upstream = gemini
    messages: list[dict[str, Any]] = []
    answers: list[str] = []
    with _bridge(upstream) as bridge:
        for turn in range(3):
            messages.append({"id": f"u{turn}", "role": "user", "content": f"Weather, {turn}?"})
            for _ in range(4):  # two steps of calls, then the answer
                [report] = official(
                    [
                        {
                            "url": f"{bridge}/",
                            "threadId": "g",
                            "messages": messages,
                            "tools": [WEATHER],
                        }
                    ],
                    client=client,
                )
                assert report["rejected"] is None and not report["failed"], report
                messages = report["messages"]
                last = messages[-1]
                if last["role"] == "assistant" and not last.get("toolCalls"):
                    answers.append(last["content"])
                    break
                _check_signed_events(report["events"], last["toolCalls"], emulator)
                for call in last["toolCalls"]:
                    args = json.loads(call["function"]["arguments"])
                    messages.append(
                        {
                            "id": f"r-{call['id']}",
                            "role": "tool",
                            "toolCallId": call["id"],
                            "content": get_weather(args["city"]),
                        }
                    )
            else:
                pytest.fail(f"turn {turn} did not end with an answer")
    assert emulator.refused == []
    assert answers == ["Read 3 results: sunny in Paris; sunny in Lyon; sunny in Nice"] * 3
    # Every signature came back exactly on its call, in every later request (earlier turns
    # too), and the calls it did not sign went back unsigned.
    last_request = _signed(emulator.requests[-1])
    assert len(last_request) == 9
    for call_id, signature in last_request.items():
        assert signature == emulator.signatures.get(call_id), call_id


def _check_signed_events(
    events: list[dict[str, Any]], calls: list[dict[str, Any]], emulator: Gemini
) -> None:
    """The step's first call's signature came as its encrypted value, after its END; the
    others have none, and the client holds it on the call."""
    values = {
        e["entityId"]: e["encryptedValue"]
        for e in events
        if e["type"] == "REASONING_ENCRYPTED_VALUE" and e["subtype"] == "tool-call"
    }
    first, *others = calls
    signature = emulator.signatures[first["id"]]
    fields = {"extra_content": {"google": {"thought_signature": signature}}}
    assert json.loads(values[first["id"]]) == fields
    assert json.loads(first["encryptedValue"]) == fields
    assert all(other["id"] not in values and "encryptedValue" not in other for other in others)
    types = [e["type"] for e in events]
    end = types.index("TOOL_CALL_END")
    assert types.index("REASONING_ENCRYPTED_VALUE") > end


@pytest.mark.parametrize("client", CLIENTS)
def test_a_gemini_server_tool_loop_of_three_turns_works_with_no_flag(
    gemini: tuple[Gemini, str], client: str
) -> None:
    emulator, upstream = gemini
    messages: list[dict[str, Any]] = []
    with _bridge(upstream, get_weather=get_weather) as bridge:
        for turn in range(3):
            messages.append({"id": f"u{turn}", "role": "user", "content": f"Weather, {turn}?"})
            [report] = official(
                [{"url": f"{bridge}/", "threadId": "s", "messages": messages}], client=client
            )
            assert report["rejected"] is None and not report["failed"], report
            messages = report["messages"]
            assert messages[-1]["content"] == (
                "Read 3 results: sunny in Paris; sunny in Lyon; sunny in Nice"
            )
    assert emulator.refused == []
    assert len(emulator.requests) == 9
    last_request = _signed(emulator.requests[-1])
    assert len(last_request) == 9
    assert all(s == emulator.signatures.get(c) for c, s in last_request.items())


def test_a_history_without_its_signature_is_refused_with_geminis_own_words(
    gemini: tuple[Gemini, str],
) -> None:
    """The emulator is strict (a call of the current turn unsigned → Gemini's 400), and its
    error, a JSON array around the error object, reaches RUN_ERROR in its own words."""
    emulator, upstream = gemini
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    messages = [
        {"id": "u", "role": "user", "content": "Weather?"},
        {"id": "a", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "sunny"},
    ]
    with _bridge(upstream) as bridge:
        events = post(f"{bridge}/", run_input(messages, tools=[WEATHER]))
    assert events[-1]["type"] == "RUN_ERROR"
    assert "Function call is missing a thought_signature" in events[-1]["message"]
    assert emulator.refused and "position 1" in emulator.refused[0]


def test_a_gemini_thread_kept_holds_the_signature_and_goes_on_after_a_hydrate(
    gemini: tuple[Gemini, str],
) -> None:
    """``--threads``: the call's encrypted value is in the thread; a client that reloads
    (hydrates) and answers the call sends the signature back, and the loop goes on."""
    emulator, upstream = gemini
    config = BridgeConfig(upstream_url=f"{upstream}/v1", model=MODEL, threads="memory")
    first = [{"id": "u0", "role": "user", "content": "Weather?"}]
    with serve(create_app(config)) as bridge:
        [ran] = official(
            [{"url": f"{bridge}/", "threadId": "kept", "messages": first, "tools": [WEATHER]}]
        )
        held = ran["messages"][-1]["toolCalls"]
        [hydrated] = official([{"url": f"{bridge}/", "threadId": "kept", "messages": []}])
        [snapshot] = [e for e in hydrated["events"] if e["type"] == "MESSAGES_SNAPSHOT"]
        calls = snapshot["messages"][-1]["toolCalls"]
        assert [c.get("encryptedValue") for c in calls] == [c.get("encryptedValue") for c in held]
        assert calls[0]["encryptedValue"] and "encryptedValue" not in calls[1]
        messages = hydrated["messages"] + [
            {"id": f"r{i}", "role": "tool", "toolCallId": c["id"], "content": "sunny"}
            for i, c in enumerate(calls)
        ]
        [went_on] = official(
            [{"url": f"{bridge}/", "threadId": "kept", "messages": messages, "tools": [WEATHER]}]
        )
    assert went_on["rejected"] is None and not went_on["failed"]
    assert emulator.refused == []
    assert _signed(emulator.requests[-1]) == {
        c["id"]: emulator.signatures.get(c["id"]) for c in calls
    }


def test_more_than_a_mebibyte_of_a_providers_fields_on_a_call_is_refused() -> None:
    from bridge.core.decode import decode_chat_chunk
    from bridge.core.emitter import MAX_CALL_FIELDS_CHARS, EventEmitter
    from bridge.core.errors import UpstreamProtocolError
    from bridge.core.parts import ToolCallDelta

    def chunk(**fields: Any) -> dict[str, Any]:
        call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}, **fields}
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    emitter, out = EventEmitter(), []
    for part in decode_chat_chunk(chunk(a="x" * (MAX_CALL_FIELDS_CHARS // 2))):
        assert isinstance(part, ToolCallDelta)
        emitter.tool_call(part, out)
    [part] = decode_chat_chunk(chunk(b="x" * (MAX_CALL_FIELDS_CHARS // 2)))
    assert isinstance(part, ToolCallDelta)
    with pytest.raises(UpstreamProtocolError, match="own fields on tool call #0"):
        emitter.tool_call(part, out)


def test_a_clients_value_nested_past_any_parser_is_no_5xx(gemini: tuple[Gemini, str]) -> None:
    """A hostile client's encrypted value on a call or a reasoning message, nested deeper than
    the JSON parser goes: the run goes on without it (the value is not the bridge's)."""
    emulator, upstream = gemini
    deep = '{"a":' + "[" * 200_000 + "]" * 200_000 + "}"
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"},
        "encryptedValue": deep,
    }
    body = run_input(
        [
            {"id": "u", "role": "user", "content": "Weather?"},
            {"id": "rs", "role": "reasoning", "content": "hm", "encryptedValue": deep},
            {"id": "a", "role": "assistant", "toolCalls": [call]},
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "sunny"},
            {"id": "u2", "role": "user", "content": "Thanks"},
        ]
    )
    with _bridge(upstream) as bridge:
        answer = httpx.post(f"{bridge}/", json=body, timeout=60)
    assert answer.status_code == 200
    assert '"type":"RUN_FINISHED"' in answer.text
    [sent] = [c for m in emulator.requests[-1]["messages"] for c in m.get("tool_calls") or []]
    assert set(sent) == {"id", "type", "function"}


def test_a_null_field_on_a_call_says_nothing_and_makes_no_event() -> None:
    from bridge.core.decode import decode_chat_chunk
    from bridge.core.emitter import EventEmitter

    call = {"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    emitter, out = EventEmitter(), []
    for fields in ({"extra_content": None}, {"extra_content": {"google": {"x": 1}}}):
        [part] = decode_chat_chunk(
            {"choices": [{"index": 0, "delta": {"tool_calls": [{**call, **fields}]}}]}
        )
        emitter.tool_call(part, out)  # type: ignore[arg-type]
        emitter.close(out)
    values = [e.encrypted_value for e in out if e.type == "REASONING_ENCRYPTED_VALUE"]
    assert values == ['{"extra_content":{"google":{"x":1}}}']
