"""Protocol negotiation (issue 13): each run's events are shaped, where they become frames, for
the AG-UI line its client speaks; the real clients run in tests/test_node_client.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TokenUsage,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bridge.config import BridgeConfig
from bridge.core.encode import encode_event
from bridge.serve.http.app import create_app
from bridge.serve.http.frames import PRE_1_0, FrameWriter, client_protocol
from bridge.serve.redact import Redactor
from node_tools import require
from servers import (
    ASK_TOOLS,
    TOOLS,
    Stack,
    messages_from,
    post,
    run_input,
    scripted_stack,
    serve,
)

NODE_DIR = Path(__file__).resolve().parent / "node"


@pytest.mark.parametrize(
    ("requested", "pinned", "expected"),
    [
        (None, "auto", "0.0"),  # the 0.0.x clients send no protocolVersion
        ("1.0", "auto", "1.0"),
        ("1.2", "auto", "1.0"),
        ("2", "auto", "1.0"),
        ("0.0.59", "auto", "0.0"),
        ("nonsense", "auto", "0.0"),
        ("1.0", "0.0", "0.0"),  # pinned for clients that announce nothing useful
        (None, "1.0", "1.0"),
    ],
)
def test_client_protocol(requested: str | None, pinned: Any, expected: str) -> None:
    assert client_protocol(requested, pinned) == expected


FINISHED = RunFinishedEvent(
    thread_id="t",
    run_id="r",
    result={"finishReason": "tool_calls"},
    usage=[TokenUsage(input_tokens=3, output_tokens=4)],
    outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["call_1"]),
)
STARTED = RunStartedEvent(thread_id="t", run_id="r", protocol_version="1.0")


def _frame(writer: FrameWriter, event: Any) -> dict[str, Any]:
    text = writer.frame(event)
    assert text.startswith("data: ") and text.endswith("\n\n")
    parsed: dict[str, Any] = json.loads(text[6:])
    return parsed


def test_a_1_0_client_gets_every_field() -> None:
    writer = FrameWriter(Redactor([]), "1.0")
    assert _frame(writer, FINISHED)["outcome"] == {
        "type": "success",
        "pendingToolCallIds": ["call_1"],
    }
    assert _frame(writer, STARTED)["protocolVersion"] == "1.0"


def test_a_pre_1_0_client_gets_no_1_0_only_field() -> None:
    writer = FrameWriter(Redactor([]), "0.0")
    finished = _frame(writer, FINISHED)
    assert "outcome" not in finished  # 0.0.59's strict outcome schema rejects pendingToolCallIds
    assert finished["usage"] == [{"inputTokens": 3, "outputTokens": 4}]  # 0.0.59 knows usage
    assert finished["result"] == {"finishReason": "tool_calls"}
    assert "protocolVersion" not in _frame(writer, STARTED)
    # Everything else goes out byte for byte as for a 1.0 client.
    for event in (
        TextMessageContentEvent(message_id="m", delta="hi"),
        RunErrorEvent(message="x", code="y"),
    ):
        assert writer.frame(event) == encode_event(event)
    assert set(PRE_1_0) == {RunStartedEvent, RunFinishedEvent}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack() as running:
        yield running


def _tool_run(url: str, **extra: Any) -> list[dict[str, Any]]:
    body = run_input(
        [{"id": "u", "role": "user", "content": ASK_TOOLS}],
        tools=TOOLS,
        forwardedProps={"model": "scripted-reasoning-content"},
        **extra,
    )
    return post(f"{url}/", body)


def test_the_stream_follows_the_announced_protocol(stack: Stack) -> None:
    modern = _tool_run(stack.bridge_url)
    assert modern[0]["protocolVersion"] == "1.0"
    assert len(modern[-1]["outcome"]["pendingToolCallIds"]) == 2
    legacy = _tool_run(stack.bridge_url, protocolVersion=None)
    assert "protocolVersion" not in legacy[0]
    assert legacy[-1]["type"] == "RUN_FINISHED" and "outcome" not in legacy[-1]
    # The same answer otherwise: the same event types in the same order.
    assert [f["type"] for f in legacy] == [f["type"] for f in modern]


def test_a_pinned_protocol_wins() -> None:
    with scripted_stack(agui_protocol="0.0") as pinned:
        frames = _tool_run(pinned.bridge_url)
        capabilities = httpx.get(f"{pinned.bridge_url}/capabilities").json()
    assert "outcome" not in frames[-1]
    assert capabilities["custom"]["aguiProtocols"] == ["1.0", "0.0"]
    assert capabilities["custom"]["aguiProtocol"] == "0.0"


def test_copilotkits_client_rejects_the_1_0_stream_it_is_spared() -> None:
    """Why the shaping exists: @ag-ui/client 0.0.59 (CopilotKit 1.74 / runtime 1.75) fails a tool
    run whose RUN_FINISHED carries 1.0's outcome, as a bridge pinned to 1.0 sends it."""
    node = require("node", "this test runs the official AG-UI client 0.0.59")
    with scripted_stack(agui_protocol="1.0") as pinned:
        env = {
            **os.environ,
            "AGUI_BRIDGE_URL": f"{pinned.bridge_url}/",
            "AGUI_MODELS": "scripted-reasoning-content",
            "AGUI_CLIENT": "0.0.59",
        }
        done = subprocess.run(
            [node, "--test", "--test-reporter=tap", "client.test.mjs"],
            cwd=NODE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0
    assert "pendingToolCallIds" in done.stdout


# -- the message and id rules CopilotKit relies on ----------------------------------------------


def _chunk(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


#: A turn whose reasoning resumes after text, then a call (interleaved thinking).
INTERLEAVED = [
    _chunk(reasoning_content="First I look."),
    _chunk(content="Let me check."),
    _chunk(reasoning_content="Now the clock."),
    _chunk(content=" Checking the time."),
    _chunk(
        tool_calls=[{"index": 0, "id": "c1", "function": {"name": "get_time", "arguments": "{}"}}]
    ),
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
]


@pytest.fixture(scope="module")
def interleaved() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def chat(request: Request) -> Response:
        seen.append(await request.json())
        chunks = INTERLEAVED if len(seen) == 1 else [_chunk(content="It is noon."), INTERLEAVED[-1]]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return Response(body, media_type="text/event-stream")

    upstream = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve(upstream) as url:
        config = BridgeConfig(upstream_url=f"{url}/v1", model="m", retries=0)
        with serve(create_app(config)) as bridge:
            yield bridge, seen


def test_resumed_reasoning_shows_in_order_and_goes_back_as_one_turn(
    interleaved: tuple[str, list[dict[str, Any]]],
) -> None:
    bridge, seen = interleaved
    user = {"id": "u1", "role": "user", "content": "What time is it?"}
    tools = [{"name": "get_time", "description": "now", "parameters": {"type": "object"}}]
    first = post(f"{bridge}/", run_input([user], tools=tools))
    held = messages_from(first)
    # What the client shows, in the order the model produced it.
    assert [(m["role"], m.get("content")) for m in held] == [
        ("reasoning", "First I look."),
        ("assistant", "Let me check."),
        ("reasoning", "Now the clock."),
        ("assistant", " Checking the time."),
    ]
    assert [c["id"] for c in held[3]["toolCalls"]] == ["c1"]
    result = {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "12:00"}
    second = post(f"{bridge}/", run_input([user, *held, result], tools=tools))
    assistants = [m for m in seen[1]["messages"] if m["role"] == "assistant"]
    assert assistants == [
        {
            "role": "assistant",
            "content": "Let me check. Checking the time.",
            "reasoning_content": "First I look.\n\nNow the clock.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        }
    ]
    # Fresh ids for every message of every run; the stream ends with its terminal event.
    ids = {f.get("messageId") for f in first if "messageId" in f}
    assert not ids & {f.get("messageId") for f in second if "messageId" in f}
    assert second[-1]["type"] == "RUN_FINISHED" and "TOOL_CALL_RESULT" not in {
        f["type"] for f in first + second
    }
