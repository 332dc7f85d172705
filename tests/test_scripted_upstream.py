"""The embedded scripted upstream, over real HTTP: every dialect's wire shape, both paths, limits."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from httpx_sse import connect_sse
from starlette.applications import Starlette

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, SCRIPTED_MODELS, create_scripted_upstream
from bridge.cli.demo.dialects import GEMINI, THINK_TAG_TEXT, thought_signature
from bridge.cli.demo.tools import DEMO_TOOLS
from servers import Stack, messages_from, post, run_input, scripted_stack

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location", "unit"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "enum": ["Europe/Paris", "Asia/Tokyo"]}},
            "required": ["timezone"],
        },
    },
}
BACKGROUND_TOOL = {
    "type": "function",
    "function": {
        "name": "change_background",
        "parameters": {"type": "object", "properties": {"color": {"type": "string"}}},
    },
}
QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]
TOOLS_QUESTION = [
    {
        "role": "user",
        "content": "What is the weather in Paris (in fahrenheit) and the local time in Tokyo?",
    }
]
CALL_ID = "a" * 32
AFTER_TOOLS = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": CALL_ID,
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": CALL_ID, "content": "Sunny, 21 degrees"},
]
SCENARIOS: dict[str, dict[str, Any]] = {
    "question": {"messages": QUESTION},
    "tools": {"messages": TOOLS_QUESTION, "tools": [WEATHER_TOOL, TIME_TOOL]},
    "tool_results": {"messages": AFTER_TOOLS, "tools": [WEATHER_TOOL]},
}
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details")

#: The models whose tool calls are `delta.tool_calls` (scripted-hermes-text writes them as text).
STRUCTURED_CALL_MODELS = [m for m in SCRIPTED_MODELS if not m.endswith("-text")]


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Starlette, httpx.Client]]:
    app = create_scripted_upstream()
    # proto=IPPROTO_TCP, or asyncio skips TCP_NODELAY on accepted connections (it checks
    # sock.proto) and every keep-alive request waits 40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "the scripted upstream did not start"
            time.sleep(0.01)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield app, client
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def client(upstream: tuple[Starlette, httpx.Client]) -> httpx.Client:
    return upstream[1]


def body(model: str, scenario: str, **extra: Any) -> dict[str, Any]:
    given = {"model": model, **SCENARIOS[scenario], **extra}
    if model == GEMINI and scenario == "tool_results":  # the call as Gemini signed it
        given["messages"] = signed(given["messages"])
    return given


def signed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each assistant message's first call signed as scripted-gemini signs."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            google = {"thought_signature": thought_signature(calls[0]["id"])}
            calls = [{**calls[0], "extra_content": {"google": google}}, *calls[1:]]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def stream(client: httpx.Client, request: dict[str, Any], **kwargs: Any) -> list[Any]:
    """The chunks of a streamed response, read with httpx-sse (``"[DONE]"`` kept as a string)."""
    with connect_sse(
        client, "POST", "/v1/chat/completions", json={**request, "stream": True}, **kwargs
    ) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in source.iter_sse()]


def deltas_of(chunks: list[Any]) -> list[dict[str, Any]]:
    """The generated deltas: not the role chunk, the finish chunk, the usage chunk or [DONE]."""
    return [
        c["choices"][0]["delta"] for c in chunks[1:-1] if c["choices"] and c["choices"][0]["delta"]
    ]


def finish_of(chunks: list[Any]) -> str:
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c != "[DONE]" and c["choices"]]
    assert reasons[-1] is not None and all(r is None for r in reasons[:-1])
    return str(reasons[-1])


def joined(deltas: list[dict[str, Any]], key: str) -> str:
    return "".join(d.get(key, "") for d in deltas)


def split(model: str, deltas: list[dict[str, Any]]) -> tuple[str, str]:
    """(reasoning, answer) read back the way each dialect places them."""
    content = joined(deltas, "content")
    if model == "scripted-harmony-text":
        reasoning, rest = content.removeprefix("<|channel|>analysis<|message|>").split("<|end|>")
        final = "<|start|>assistant<|channel|>final<|message|>"
        return reasoning, rest.removeprefix(final).removesuffix("<|return|>")
    if model in ("scripted-think-tags", "scripted-think-no-open", *THINK_TAG_TEXT):
        opening = "<think>\n" if model != "scripted-think-no-open" else ""
        assert content.startswith(opening)
        reasoning, answer = content[len(opening) :].split("\n</think>\n\n")
        return reasoning, answer
    if model == "scripted-deepseek-legacy":
        return joined(deltas, "reasoning_content"), content.split("</think>\n\n")[1]
    return joined(deltas, "reasoning_content") + joined(deltas, "reasoning"), content


def accumulate(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client rebuilds from the stream, in the shape of a non-streamed message."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        for key in ("content", "reasoning_content", "reasoning"):
            if key in delta:
                message[key] = (message.get(key) or "") + delta[key]
        if "reasoning_details" in delta:
            detail = message.setdefault("reasoning_details", [{"text": ""}])[0]
            for item in delta["reasoning_details"]:
                detail.update({**item, "text": detail["text"] + item["text"]})
        for piece in delta.get("tool_calls", []):
            call = calls.setdefault(piece["index"], {"function": {"arguments": ""}})
            call.update({k: v for k, v in piece.items() if k not in ("index", "function")})
            call["function"]["name"] = piece["function"].get("name", call["function"].get("name"))
            call["function"]["arguments"] += piece["function"]["arguments"]
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


# --- the server around the model ---------------------------------------------------------


def test_models_lists_every_dialect(client: httpx.Client) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200
    listing = response.json()
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == list(SCRIPTED_MODELS)
    assert all(m["object"] == "model" and m["owned_by"] == "agui-bridge" for m in listing["data"])
    assert DEFAULT_SCRIPTED_MODEL == "scripted-reasoning-content" in SCRIPTED_MODELS
    assert len(SCRIPTED_MODELS) == 17
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize("stream_flag", [True, False])
def test_unknown_model_is_404(client: httpx.Client, stream_flag: bool) -> None:
    request = {"model": "x", "messages": QUESTION, "stream": stream_flag}
    response = client.post("/v1/chat/completions", json=request)
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "message": "model 'x' not found",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        (b"{not json", {}),
        (b'{"model": "scripted-plain", "messages": "hi"}', {}),
        (b'{"messages": [], "max_tokens": 0}', {}),
        (b'{"messages": [], "stream": true}', {"x-scripted-pace": "fast"}),
        (b'{"messages": []}', {"x-scripted-pace": "-1"}),
    ],
    ids=["not-json", "messages-not-array", "max-tokens-zero", "bad-pace", "negative-pace"],
)
def test_bad_requests_are_400(
    client: httpx.Client, content: bytes, headers: dict[str, str]
) -> None:
    response = client.post("/v1/chat/completions", content=content, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_requests_are_recorded(upstream: tuple[Starlette, httpx.Client]) -> None:
    app, client = upstream
    request = body("scripted-plain", "question", seed=1234)
    client.post("/v1/chat/completions", json=request)
    client.post("/v1/chat/completions", json={**request, "model": "nope"})
    assert app.state.requests[-2:] == [request, {**request, "model": "nope"}]


def test_missing_model_means_the_default(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", json={"messages": QUESTION})
    assert response.json()["model"] == DEFAULT_SCRIPTED_MODEL


def test_pace_header_slows_the_stream(client: httpx.Client) -> None:
    started = time.monotonic()
    stream(
        client,
        body("scripted-plain", "question", max_tokens=3),
        headers={"x-scripted-pace": "0.02"},
    )
    assert time.monotonic() - started >= 5 * 0.02  # role, 3 tokens, finish, [DONE]: 5 pauses


# --- the wire, dialect by dialect --------------------------------------------------------


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_stream_framing(client: httpx.Client, model: str, scenario: str) -> None:
    request = {**body(model, scenario), "stream": True}
    response = client.post("/v1/chat/completions", json=request)
    raw = response.content
    assert b"\r" not in raw
    assert raw.endswith(b"data: [DONE]\n\n")
    frames = raw.split(b"\n\n")
    assert frames[-1] == b""
    assert all(f.startswith(b"data: ") and b"\n" not in f for f in frames[:-1])
    chunks = [json.loads(f[6:]) for f in frames[:-2]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    ids = set()
    for chunk in chunks:
        assert set(chunk) == {"id", "object", "created", "model", "system_fingerprint", "choices"}
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == model
        ids.add(chunk["id"])
    assert len(ids) == 1
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": finish_of(chunks)}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    # one token per chunk: a chunk carries one field (legacy: the same token twice)
    for delta in deltas_of([*chunks, "[DONE]"]):
        pairs = ({"reasoning_content", "content"}, {"reasoning", "reasoning_details"})
        assert len(delta) == 1 or set(delta) in pairs


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
@pytest.mark.parametrize("scenario", ["question", "tool_results"])
def test_reasoning_and_text_placement(client: httpx.Client, model: str, scenario: str) -> None:
    reference = deltas_of(stream(client, body(DEFAULT_SCRIPTED_MODEL, scenario)))
    expected_reasoning = joined(reference, "reasoning_content")
    expected_answer = joined(reference, "content")
    assert expected_reasoning and "**" in expected_answer and "\n- " in expected_answer

    chunks = stream(client, body(model, scenario))
    deltas = deltas_of(chunks)
    assert finish_of(chunks) == "stop"
    assert split(model, deltas) == (
        "" if model == "scripted-plain" else expected_reasoning,
        expected_answer,
    )
    fields = {key for d in deltas for key in d}
    expected_fields = {
        "scripted-reasoning-content": {"reasoning_content", "content"},
        "scripted-reasoning": {"reasoning", "content"},
        "scripted-think-tags": {"content"},
        "scripted-think-no-open": {"content"},
        "scripted-deepseek-legacy": {"reasoning_content", "content"},
        "scripted-openrouter": {"reasoning", "reasoning_details", "content"},
        "scripted-plain": {"content"},
        "scripted-gemini": {"reasoning_content", "content"},
        "scripted-hermes-text": {"content"},
        "scripted-mistral-text": {"reasoning_content", "content"},
        "scripted-llama-text": {"reasoning", "content"},
        "scripted-pythonic-text": {"reasoning_content", "content"},
        "scripted-qwen3-coder-text": {"content"},
        "scripted-glm-text": {"reasoning_content", "content"},
        "scripted-kimi-text": {"reasoning", "content"},
        "scripted-deepseek-v3-text": {"reasoning_content", "content"},
        "scripted-harmony-text": {"content"},
    }[model]
    assert fields == expected_fields
    content_tokens = [d["content"] for d in deltas if "content" in d]
    opens = ("scripted-think-tags", "scripted-deepseek-legacy", *THINK_TAG_TEXT)
    if model in opens:
        assert content_tokens[:2] == ["<think>", "\n"]
    if model not in opens:
        assert "<think>" not in joined(deltas, "content")
    if model in (*opens, "scripted-think-no-open"):
        assert content_tokens.count("</think>") == 1
    if model == "scripted-deepseek-legacy":  # the reasoning twice in the same chunks
        assert all(
            d["content"] == d["reasoning_content"] for d in deltas if "reasoning_content" in d
        )
    if model == "scripted-openrouter":
        details = [d["reasoning_details"] for d in deltas if "reasoning_details" in d]
        for delta in deltas:
            if "reasoning" in delta:
                assert delta["reasoning_details"] == [
                    {
                        "type": "reasoning.text",
                        "text": delta["reasoning"],
                        "format": "unknown",
                        "index": 0,
                    }
                ]
        assert details[-1][0]["text"] == ""
        assert isinstance(details[-1][0]["signature"], str) and details[-1][0]["signature"]


def test_tool_results_are_quoted(client: httpx.Client) -> None:
    deltas = deltas_of(stream(client, body("scripted-plain", "tool_results")))
    assert "“Sunny, 21 degrees”" in joined(deltas, "content")
    assert "get_weather" in joined(deltas, "content")


@pytest.mark.parametrize("model", STRUCTURED_CALL_MODELS)
def test_parallel_tool_calls_interleave(client: httpx.Client, model: str) -> None:
    chunks = stream(client, body(model, "tools"))
    assert finish_of(chunks) == "tool_calls"
    deltas = deltas_of(chunks)
    pieces = [piece for d in deltas for piece in d.get("tool_calls", [])]
    assert all(len(d["tool_calls"]) == 1 for d in deltas if "tool_calls" in d)
    assert [p["index"] for p in pieces[:6]] == [0, 1, 0, 1, 0, 1]
    seen: set[int] = set()
    for piece in pieces:
        if piece["index"] not in seen:
            seen.add(piece["index"])
            own = {"extra_content"} if model == GEMINI and piece["index"] == 0 else set()
            assert set(piece) == {"index", "id", "type", "function", *own}
            assert re.fullmatch(r"[A-Za-z0-9]{32}", piece["id"])
            assert piece["type"] == "function"
            assert set(piece["function"]) == {"name", "arguments"}
        else:
            assert set(piece) == {"index", "function"} and set(piece["function"]) == {"arguments"}
        assert 1 <= len(piece["function"]["arguments"]) <= 5
    calls = accumulate(deltas)["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert calls[0]["id"] != calls[1]["id"]
    assert calls[0]["function"]["arguments"] == '{"location": "Paris", "unit": "fahrenheit"}'
    assert json.loads(calls[1]["function"]["arguments"]) == {"timezone": "Asia/Tokyo"}
    answer = split(model, deltas)[1]
    assert answer == ""
    tool_deltas = [i for i, d in enumerate(deltas) if "tool_calls" in d]
    assert tool_deltas == list(range(tool_deltas[0], len(deltas)))  # calls come last


@pytest.mark.parametrize(
    ("text", "tools", "expected"),
    [
        (
            "Make the background #336699",
            [BACKGROUND_TOOL],
            [("change_background", {"color": "#336699"})],
        ),
        (
            "Paint it red, change the colour",
            [BACKGROUND_TOOL],
            [("change_background", {"color": "red"})],
        ),
        (
            "Forecast for New York?",
            [WEATHER_TOOL],
            [("get_weather", {"location": "New York", "unit": "celsius"})],
        ),
        (
            "What time is it?",
            [WEATHER_TOOL, TIME_TOOL],
            [("get_time", {"timezone": "Europe/Paris"})],
        ),
        ("Tell me a joke", [WEATHER_TOOL, TIME_TOOL], []),
    ],
)
def test_tool_choice_and_arguments(
    client: httpx.Client, text: str, tools: list[Any], expected: list[Any]
) -> None:
    request = {
        "model": "scripted-plain",
        "messages": [{"role": "user", "content": text}],
        "tools": tools,
    }
    message = client.post("/v1/chat/completions", json=request).json()["choices"][0]["message"]
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls", [])
    ]
    assert calls == expected


def test_tool_choice_none_and_required(client: httpx.Client) -> None:
    def calls(text: str, choice: str) -> int:
        request = body("scripted-plain", "question", tools=[WEATHER_TOOL], tool_choice=choice)
        request["messages"] = [{"role": "user", "content": text}]
        message = client.post("/v1/chat/completions", json=request).json()["choices"][0]["message"]
        return len(message.get("tool_calls", []))

    assert calls("Weather in Paris?", "none") == 0
    assert calls("Tell me a joke", "required") == 1


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_non_stream_equals_stream(client: httpx.Client, model: str, scenario: str) -> None:
    request = body(model, scenario, stream_options={"include_usage": True})
    chunks = stream(client, request)
    response = client.post("/v1/chat/completions", json=request)
    assert response.status_code == 200
    whole = response.json()
    assert whole["object"] == "chat.completion" and whole["model"] == model
    assert whole["choices"][0]["finish_reason"] == finish_of(chunks)
    assert whole["choices"][0]["message"] == accumulate(deltas_of(chunks))
    assert whole["usage"] == chunks[-2]["usage"]


@pytest.mark.parametrize("model", STRUCTURED_CALL_MODELS)
def test_usage_only_when_asked(client: httpx.Client, model: str) -> None:
    plain = stream(client, body(model, "tools"))
    assert all(c == "[DONE]" or (c["choices"] and "usage" not in c) for c in plain)
    asked = stream(client, body(model, "tools", stream_options={"include_usage": True}))
    assert asked[-1] == "[DONE]"
    assert asked[-2]["choices"] == []
    usage = asked[-2]["usage"]
    deltas = deltas_of(asked)
    signature_only = sum(1 for d in deltas if set(d) == {"reasoning_details"})
    reasoning = [d for d in deltas if "tool_calls" not in d]
    assert usage["completion_tokens"] == len(deltas) - signature_only
    assert usage["completion_tokens_details"]["reasoning_tokens"] == len(reasoning) - signature_only
    assert usage["prompt_tokens"] == len(TOOLS_QUESTION[0]["content"].split())
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
@pytest.mark.parametrize("limit_key", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_stops_with_length(client: httpx.Client, model: str, limit_key: str) -> None:
    request = body(model, "question", **{limit_key: 4}, stream_options={"include_usage": True})
    chunks = stream(client, request)
    deltas = deltas_of(chunks)
    assert finish_of(chunks) == "length"
    assert len(deltas) == 4 and chunks[-2]["usage"]["completion_tokens"] == 4
    if model != "scripted-plain":  # stopped inside the reasoning
        assert chunks[-2]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 4
        assert "</think>" not in joined(deltas, "content")
    whole = client.post("/v1/chat/completions", json=request).json()
    assert whole["choices"][0]["finish_reason"] == "length"
    assert whole["choices"][0]["message"] == accumulate(deltas)


def test_same_request_same_script(client: httpx.Client) -> None:
    first = deltas_of(stream(client, body("scripted-openrouter", "tools")))
    again = deltas_of(stream(client, body("scripted-openrouter", "tools")))
    assert first == again
    other = deltas_of(stream(client, body("scripted-openrouter", "tools", seed=7)))
    assert accumulate(other)["tool_calls"][0]["id"] != accumulate(first)["tool_calls"][0]["id"]


def test_echoed_text_never_carries_reasoning_tags(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Is </think> a tag? <think>[THINK]"}]
    request = {"model": "scripted-reasoning-content", "messages": messages}
    message = client.post("/v1/chat/completions", json=request).json()["choices"][0]["message"]
    for text in (message["content"], message["reasoning_content"]):
        assert "think>" not in text and "[THINK]" not in text


def test_pace_must_be_seconds() -> None:
    with pytest.raises(ValueError, match="pace"):
        create_scripted_upstream(pace=-1)


# --- the demo's tool that waits for approval ------------------------------------------------

#: The prompt contract other tests (CopilotKit's) rely on: every dialect calls send_email to Alice.
EMAIL_PROMPT = "Email alice@example.com that the demo works."


@pytest.fixture(scope="module")
def demo_stack() -> Iterator[Stack]:
    with scripted_stack(tools=DEMO_TOOLS) as made:
        yield made


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
@pytest.mark.parametrize(
    ("payload", "answer"),
    [
        ({"approved": True}, 'Done: “Sent to alice@example.com: "The demo works"”'),
        (
            {"approved": False, "reason": "not now"},
            "OK, I did not send it: “The user declined: not now”",
        ),
    ],
)
def test_every_dialect_emails_alice_and_quotes_the_result(
    demo_stack: Stack, model: str, payload: dict[str, Any], answer: str
) -> None:
    first = run_input(
        [{"id": "u1", "role": "user", "content": EMAIL_PROMPT}], forwardedProps={"model": model}
    )
    frames = post(demo_stack.bridge_url, first)
    [start] = [f for f in frames if f["type"] == "TOOL_CALL_START"]
    assert start["toolCallName"] == "send_email"
    arguments = "".join(f["delta"] for f in frames if f["type"] == "TOOL_CALL_ARGS")
    assert json.loads(arguments) == {
        "to": "alice@example.com",
        "subject": "The demo works",
        "body": "The demo works.",
    }
    [interrupt] = frames[-1]["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == start["toolCallId"]
    resumed = run_input(
        [*first["messages"], *messages_from(frames)],
        threadId=first["threadId"],
        forwardedProps={"model": model},
        resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}],
    )
    frames = post(demo_stack.bridge_url, resumed)
    assert frames[-1]["type"] == "RUN_FINISHED", frames[-1]
    text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert text.strip() == answer


def test_scripted_gemini_refuses_a_follow_up_without_its_signature_as_gemini_does(
    client: httpx.Client,
) -> None:
    """Gemini 3 (https://ai.google.dev/gemini-api/docs/thought-signatures): a step of the current
    turn whose first call lacks its signature is a 400, the error as the one item of an array."""
    unsigned = client.post(
        "/v1/chat/completions", json={"model": GEMINI, **SCENARIOS["tool_results"]}
    )
    assert unsigned.status_code == 400
    [answered] = unsigned.json()
    error = answered["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    assert error["message"].startswith("Function call is missing a thought_signature")
    assert "`default_api:get_weather` , position 1." in error["message"]
    wrong = signed(AFTER_TOOLS)
    wrong[1]["tool_calls"][0]["extra_content"]["google"]["thought_signature"] = "forged"
    forged = client.post(
        "/v1/chat/completions", json={**body(GEMINI, "tool_results"), "messages": wrong}
    )
    assert forged.status_code == 400
    ok = client.post("/v1/chat/completions", json=body(GEMINI, "tool_results"))
    assert ok.status_code == 200
    # An earlier turn's calls are not checked (Gemini validates the current turn only).
    later = [*AFTER_TOOLS, {"role": "assistant", "content": "Sunny."}, *QUESTION]
    assert (
        client.post("/v1/chat/completions", json={"model": GEMINI, "messages": later}).status_code
        == 200
    )
