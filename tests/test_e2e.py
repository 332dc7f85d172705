"""End to end over real HTTP: a uvicorn bridge in front of the uvicorn scripted upstream."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from bridge.cli.demo import SCRIPTED_MODELS
from bridge.cli.demo.dialects import thought_signature
from bridge.serve.http.app import create_app, mount
from servers import (
    ASK_TOOLS,
    TOOLS,
    Stack,
    joined,
    messages_from,
    post,
    run_input,
    scripted_config,
    scripted_stack,
    serve,
)

REASONING_MODELS = [m for m in SCRIPTED_MODELS if m != "scripted-plain"]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack() as running:
        yield running


def test_health_and_capabilities(stack: Stack) -> None:
    assert httpx.get(f"{stack.bridge_url}/health").json() == {"status": "ok"}
    caps = httpx.get(f"{stack.bridge_url}/capabilities").json()
    assert caps["reasoning"] == {"supported": True, "streaming": True, "encrypted": True}
    assert caps["tools"]["clientProvided"] is True
    assert caps["tools"]["parallelCalls"] is True
    assert caps["transport"]["streaming"] is True
    assert caps["custom"]["models"] == list(SCRIPTED_MODELS)


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_plain_answer_in_every_dialect(stack: Stack, model: str) -> None:
    frames = post(
        f"{stack.bridge_url}/",
        run_input(
            [{"id": "u1", "role": "user", "content": "Hello there"}],
            forwardedProps={"model": model},
        ),
    )
    assert frames[0]["type"] == "RUN_STARTED"
    assert frames[0]["protocolVersion"] == "1.0"
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert frames[-1]["result"] == {"finishReason": "stop"}
    text = joined(frames, "TEXT_MESSAGE_CONTENT")
    reasoning = joined(frames, "REASONING_MESSAGE_CONTENT")
    assert text.strip()
    assert "<think>" not in text + reasoning and "</think>" not in text + reasoning
    if model == "scripted-plain":
        assert reasoning == ""
    else:
        assert "Hello there" in reasoning
    usage = frames[-1]["usage"][0]
    assert (
        usage["outputTokens"] > 0
        and usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    )


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_frontend_tool_round_trip(stack: Stack, model: str) -> None:
    url = f"{stack.bridge_url}/"
    history: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": ASK_TOOLS}]
    first = post(url, run_input(history, tools=TOOLS, forwardedProps={"model": model}))
    finished = first[-1]
    assert finished["type"] == "RUN_FINISHED"
    pending = finished["outcome"]["pendingToolCallIds"]
    assert len(pending) == 2
    produced = messages_from(first)
    assistants = [m for m in produced if m["role"] == "assistant"]
    assert len(assistants) == 1  # both parallel calls in one assistant message
    calls = assistants[0]["toolCalls"]
    assert [c["id"] for c in calls] == pending
    args = {c["function"]["name"]: c["function"]["arguments"] for c in calls}
    assert json.loads(args["get_weather"]) == {"city": "Paris"}
    assert json.loads(args["change_background"]) == {"color": "lightblue"}
    assert any(m["role"] == "reasoning" for m in produced) == (model != "scripted-plain")

    # Run 2: the client sends everything back, with the tool results.
    results = [
        {"id": f"t{i}", "role": "tool", "toolCallId": c["id"], "content": f"result {i}: 18°C sunny"}
        for i, c in enumerate(calls)
    ]
    history = [*history, *produced, *results]
    seen = len(stack.upstream_requests)
    second = post(url, run_input(history, tools=TOOLS, forwardedProps={"model": model}))
    assert second[-1]["type"] == "RUN_FINISHED"
    assert "outcome" not in second[-1]
    assert "18°C sunny" in joined(second, "TEXT_MESSAGE_CONTENT")

    sent = stack.upstream_requests[seen]["messages"]
    sent_assistants = [m for m in sent if m["role"] == "assistant"]
    assert len(sent_assistants) == 1
    sent_calls = sent_assistants[0]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent_calls] == [
        c["function"]["arguments"] for c in calls
    ]  # byte for byte
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == pending
    reasoning = "\n\n".join(m["content"] for m in produced if m["role"] == "reasoning")
    if model == "scripted-plain":
        assert "reasoning_content" not in sent_assistants[0]
    else:  # current turn (after the last user message): reasoning goes back as the field
        assert sent_assistants[0]["reasoning_content"] == reasoning
    if model == "scripted-gemini":  # its first call's thought signature, on that call
        first, *others = sent_calls
        signature = {"google": {"thought_signature": thought_signature(first["id"])}}
        assert first["extra_content"] == signature
        assert all("extra_content" not in other for other in others)
    else:
        assert all("extra_content" not in call for call in sent_calls)
    if model == "scripted-openrouter":  # its signed detail, as OpenRouter documents
        detail = sent_assistants[0]["reasoning_details"]
        assert detail == [
            {
                "type": "reasoning.text",
                "text": reasoning,
                "signature": base64.b64encode(hashlib.sha256(reasoning.encode()).digest()).decode(),
                "format": "unknown",
                "index": 0,
            }
        ]
    else:
        assert "reasoning_details" not in sent_assistants[0]


def test_earlier_turns_reasoning_is_not_sent_back(stack: Stack) -> None:
    history = [
        {"id": "u1", "role": "user", "content": "Hi"},
        {"id": "r1", "role": "reasoning", "content": "old thoughts"},
        {"id": "a1", "role": "assistant", "content": "Hello!"},
        {"id": "u2", "role": "user", "content": "And now?"},
    ]
    seen = len(stack.upstream_requests)
    post(f"{stack.bridge_url}/", run_input(history))
    sent = stack.upstream_requests[seen]["messages"]
    assert sent[1] == {"role": "assistant", "content": "Hello!"}


def test_length_finishes_and_says_the_answer_was_cut(stack: Stack) -> None:
    frames = post(
        f"{stack.bridge_url}/",
        run_input([{"id": "u", "role": "user", "content": "Hi"}], forwardedProps={"max_tokens": 3}),
    )
    result = frames[-1]["result"]
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert result["finishReason"] == "length"
    assert result["truncated"] is True
    assert "cut" in result["message"]


def test_forwarded_props_only_allow_listed(stack: Stack) -> None:
    seen = len(stack.upstream_requests)
    props = {
        "temperature": 0.2,
        "seed": 7,
        "url": "http://evil.example/v1",
        "headers": {"Authorization": "x"},
        "stream": False,
        "messages": [],
    }
    post(
        f"{stack.bridge_url}/",
        run_input([{"id": "u", "role": "user", "content": "Hi"}], forwardedProps=props),
    )
    sent = stack.upstream_requests[seen]
    assert sent["temperature"] == 0.2
    assert sent["seed"] == 7
    assert sent["stream"] is True
    assert sent["messages"] == [{"role": "user", "content": "Hi"}]
    assert "url" not in sent and "headers" not in sent


def test_camel_case_run_settings_are_read_and_snake_case_wins(stack: Stack) -> None:
    """assistant-ui's AG-UI runtime spreads its call settings and model config (camelCase, its
    ``apiKey`` and ``baseUrl`` among them) into forwardedProps."""
    seen = len(stack.upstream_requests)
    props = {
        "modelName": "scripted-plain",
        "maxTokens": 40,
        "topP": 0.5,
        "temperature": 0.3,
        "presencePenalty": 0.1,
        "stopSequences": ["\n\n"],
        "seed": 3,
        "apiKey": "sk-from-the-browser",
        "baseUrl": "http://evil.example/v1",
        "headers": {"Authorization": "x"},
    }
    post(
        f"{stack.bridge_url}/",
        run_input([{"id": "u", "role": "user", "content": "Hi"}], forwardedProps=props),
    )
    sent = stack.upstream_requests[seen]
    assert sent["model"] == "scripted-plain"
    assert (sent["max_tokens"], sent["top_p"], sent["temperature"]) == (40, 0.5, 0.3)
    assert (sent["presence_penalty"], sent["stop"], sent["seed"]) == (0.1, ["\n\n"], 3)
    for name in ("maxTokens", "topP", "modelName", "apiKey", "api_key", "baseUrl", "base_url"):
        assert name not in sent
    assert "sk-from-the-browser" not in json.dumps(sent)

    both = {
        "maxTokens": 40,
        "max_tokens": 7,
        "modelName": "scripted-plain",
        "model": "scripted-reasoning",
    }
    post(
        f"{stack.bridge_url}/",
        run_input([{"id": "u", "role": "user", "content": "Hi"}], forwardedProps=both),
    )
    sent = stack.upstream_requests[-1]
    assert (sent["max_tokens"], sent["model"]) == (7, "scripted-reasoning")


def test_model_outside_the_configured_ones_is_refused(stack: Stack) -> None:
    response = httpx.post(
        f"{stack.bridge_url}/",
        json=run_input(
            [{"id": "u", "role": "user", "content": "Hi"}], forwardedProps={"model": "gpt-9"}
        ),
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert "gpt-9" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [("{nope", 400, "invalid_json"), ('{"threadId": 1}', 422, "invalid_input"), ('{"threadId":"t","runId":"r","messages":[{"id":"x","role":"wizard","content":"a"}]}', 422, "invalid_input")],
    ids=["bad-json", "schema", "unknown-role"],
)  # fmt: skip
def test_bad_input_is_a_4xx_json_error(stack: Stack, body: str, status: int, code: str) -> None:
    response = httpx.post(
        f"{stack.bridge_url}/", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert "Traceback" not in error["message"]


def test_upstream_http_error_becomes_run_error_with_its_message(stack: Stack) -> None:
    # A model the bridge allows but the upstream does not know: the upstream answers 404.
    config = scripted_config(stack.upstream_url, model="no-such-model")
    with serve(create_app(config)) as url:
        frames = post(f"{url}/", run_input([{"id": "u", "role": "user", "content": "Hi"}]))
    assert [f["type"] for f in frames] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "STEP_FINISHED",
        "RUN_ERROR",
    ]
    assert frames[-1]["code"] == "upstream_http_404"
    assert frames[-1]["message"] == "model 'no-such-model' not found"


def test_unreachable_upstream(stack: Stack) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connection refused
        config = scripted_config(f"http://127.0.0.1:{port}")
        with serve(create_app(config)) as url:
            frames = post(f"{url}/", run_input([{"id": "u", "role": "user", "content": "Hi"}]))
    assert frames[-1]["type"] == "RUN_ERROR"
    assert frames[-1]["code"] == "upstream_unreachable"
    assert f"127.0.0.1:{port}" in frames[-1]["message"]


def test_run_started_comes_before_the_upstream_answers() -> None:
    # An upstream that accepts the connection and never answers.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        config = scripted_config(f"http://127.0.0.1:{listener.getsockname()[1]}", idle_timeout=1.0)
        with serve(create_app(config)) as url:
            body = run_input([{"id": "u", "role": "user", "content": "Hi"}])
            with httpx.stream("POST", f"{url}/", json=body, timeout=10) as response:
                lines = response.iter_lines()
                first = next(line for line in lines if line)
                assert json.loads(first.removeprefix("data: "))["type"] == "RUN_STARTED"
                rest = "\n".join(lines)
        assert '"code":"upstream_timeout"' in rest
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


@pytest.mark.parametrize("style", ["mount-helper", "plain-mount"])
def test_mounted_under_a_parent_app(stack: Stack, style: str) -> None:
    agent = create_app(stack.config)
    routes = mount("/agent", agent) if style == "mount-helper" else [Mount("/agent", app=agent)]
    parent = Starlette(routes=routes, lifespan=agent.router.lifespan_context)
    with serve(parent) as url:
        paths = ["/agent", "/agent/"] if style == "mount-helper" else ["/agent/"]
        for path in paths:
            frames = post(url + path, run_input([{"id": "u", "role": "user", "content": "Hi"}]))
            assert frames[-1]["type"] == "RUN_FINISHED"
        assert httpx.get(f"{url}/agent/health").json() == {"status": "ok"}
        if style == "plain-mount":  # a bare Mount redirects POST /agent to /agent/ (307)
            response = httpx.post(f"{url}/agent", json={}, follow_redirects=False)
            assert response.status_code == 307


def test_star_admits_every_model_the_upstream_lists() -> None:
    with scripted_stack(model="scripted-plain", models=("*",)) as running:
        caps = httpx.get(f"{running.bridge_url}/capabilities").json()
        others = [m for m in SCRIPTED_MODELS if m != "scripted-plain"]
        assert caps["custom"]["models"] == ["scripted-plain", *others]
        frames = post(
            f"{running.bridge_url}/",
            run_input(
                [{"id": "u", "role": "user", "content": "Hi"}],
                forwardedProps={"model": "scripted-openrouter"},
            ),
        )
        assert frames[-1]["type"] == "RUN_FINISHED"
        refused = httpx.post(
            f"{running.bridge_url}/",
            json=run_input(
                [{"id": "u", "role": "user", "content": "Hi"}], forwardedProps={"model": "gpt-9"}
            ),
        )
        assert refused.status_code == 400


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_upstream_stream_off_gives_what_streaming_gives(stack: Stack, model: str) -> None:
    """--upstream-stream off: whole answers through the same decoder, filters and emitter."""
    history: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": ASK_TOOLS}]
    body = run_input(history, tools=TOOLS, forwardedProps={"model": model})
    streamed = post(f"{stack.bridge_url}/", body)
    with serve(create_app(replace(stack.config, upstream_stream=False))) as url:
        seen = len(stack.upstream_requests)
        whole = post(f"{url}/", body)
        assert stack.upstream_requests[seen]["stream"] is False
        assert "stream_options" not in stack.upstream_requests[seen]

    def seen_by_user(frames: list[dict[str, Any]]) -> tuple[Any, ...]:
        calls = [m.get("toolCalls") for m in messages_from(frames) if m["role"] == "assistant"]
        strip = [
            [(c["function"]["name"], c["function"]["arguments"]) for c in cs or []] for cs in calls
        ]
        return (
            joined(frames, "REASONING_MESSAGE_CONTENT"),
            joined(frames, "TEXT_MESSAGE_CONTENT"),
            strip,
            frames[-1]["type"],
            frames[-1].get("result"),
        )

    assert seen_by_user(whole) == seen_by_user(streamed)
