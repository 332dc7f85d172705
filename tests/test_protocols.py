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

from bridge.encode import encode_event
from bridge.frames import PRE_1_0, FrameWriter, client_protocol
from bridge.redact import Redactor
from node_tools import require
from servers import ASK_TOOLS, TOOLS, Stack, post, run_input, scripted_stack

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
