"""Tool calls from a live llama-server, as the official client 1.0.0 receives them.

functionary v3.2's chat template makes llama.cpp force a call under ``tool_choice: "required"``
even at temperature 0 (Qwen3's and Hermes' do not with this model): the name, then the arguments
in pieces. A server tool's rounds are then called again each round until ``--max-tool-rounds``:
requests that go upstream at once after a streamed answer, which is where llama-server's closed
keep-alive connections bit (issue 30); none of them may be retried.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

import llama_server
from live_tools import DETERMINISTIC, bridge, joined, llama, official, one_run, types, user
from servers import approving, post, run_input

ROOT = Path(__file__).resolve().parents[2]
MCP_SERVER = ROOT / "examples" / "mcp_server.py"
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
FORCED = {**DETERMINISTIC, "max_tokens": 64, "tool_choice": "required"}
ROUNDS = 3


@pytest.fixture(scope="module")
def server(bed: llama_server.Bed) -> Iterator[llama_server.Running]:
    with llama(bed, template=llama_server.TOOLS_TEMPLATE) as running:
        yield running


def _calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call the client saw: START, its ARGS, END, in that order, and its arguments."""
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["type"] == "TOOL_CALL_START":
            assert event["toolCallId"] not in calls
            calls[event["toolCallId"]] = {"name": event["toolCallName"], "args": "", "ended": False}
        elif event["type"] == "TOOL_CALL_ARGS":
            assert not calls[event["toolCallId"]]["ended"]
            calls[event["toolCallId"]]["args"] += event["delta"]
        elif event["type"] == "TOOL_CALL_END":
            calls[event["toolCallId"]]["ended"] = True
    assert all(call["ended"] for call in calls.values())
    return list(calls.values())


def test_a_forced_call_streams_and_its_result_is_answered(
    server: llama_server.Running, bed: llama_server.Bed
) -> None:
    with bridge(server) as agent:
        first = one_run(agent, [user("What is the weather in Paris?")], tools=[WEATHER],
                        forwardedProps=FORCED)  # fmt: skip
        (call,) = _calls(first["events"])
        assert call["name"] == "get_weather"
        assert isinstance(json.loads(call["args"]), dict)
        assert types(first["events"]).count("TOOL_CALL_ARGS") > 1, "arguments came in one piece"
        assert first["events"][-1]["outcome"]["pendingToolCallIds"]
        (assistant,) = [m for m in first["messages"] if m["role"] == "assistant"]
        (tool_call,) = assistant["toolCalls"]
        answered = [
            *first["messages"],
            {
                "id": "result-1",
                "role": "tool",
                "toolCallId": tool_call["id"],
                "content": '{"temperature": 18, "sky": "sunny"}',
            },
        ]
        # The same server, still forced: it answers the result with its next call.
        again = one_run(agent, answered, tools=[WEATHER], forwardedProps=FORCED)
        assert _calls(again["events"])
    # Unforced, functionary's parser rejects what this tiny model writes after a result (a
    # server_error chunk): the model's own template answers the same history in words.
    with llama(bed, template=None) as chatty, bridge(chatty) as agent:
        words = one_run(agent, answered, tools=[WEATHER],
                        forwardedProps={**DETERMINISTIC, "max_tokens": 40})  # fmt: skip
    assert joined(words["events"], "TEXT_MESSAGE_CONTENT").strip()


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return json.dumps({"city": city, "temperature": 18, "sky": "sunny"})


def _metric(agent: str, name: str) -> float:
    """The sum of a counter's samples on the bridge's /metrics."""
    text = httpx.get(f"{agent}metrics", timeout=10).text
    pattern = re.compile(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", re.MULTILINE)
    return sum(float(value) for value in pattern.findall(text))


@pytest.mark.parametrize("side", ["python", "mcp"])
def test_a_server_tools_rounds_go_upstream_with_no_retry(
    server: llama_server.Running, side: str
) -> None:
    options: dict[str, Any] = {"metrics": True, "max_tool_rounds": ROUNDS}
    if side == "mcp":
        options["mcp_servers"] = {"clock": f"{sys.executable} {MCP_SERVER}"}
    tools = [get_weather] if side == "python" else []
    prompt = "What is the weather in Paris?" if side == "python" else "Add 2 and 3."
    with bridge(server, tools=tools, **options) as agent:
        (report,) = official([{"url": agent, "messages": [user(prompt)], "forwardedProps": FORCED}])
        events = report["events"]
        # Forced every round, the model never stops calling: the run ends at the limit.
        assert events[-1]["type"] == "RUN_ERROR", types(events)
        assert events[-1]["code"] == "tool_rounds_exceeded"
        results = [event for event in events if event["type"] == "TOOL_CALL_RESULT"]
        # One call or several a round (the model may call in parallel); the last round's
        # calls are over the limit and never run.
        assert len(results) >= ROUNDS
        assert len(_calls(events)) > len(results)
        assert _metric(agent, "agui_bridge_upstream_requests_total") == ROUNDS + 1
        assert _metric(agent, "agui_bridge_upstream_retries_total") == 0
        assert _metric(agent, "agui_bridge_upstream_failures_total") == 0


WEATHER_RUNS: list[str] = []


def watched_weather(city: str) -> str:
    """Get the current weather for a city."""
    WEATHER_RUNS.append(city)
    return json.dumps({"city": city, "temperature": 18, "sky": "sunny"})


watched_weather.__name__ = "get_weather"


def test_an_approval_resumed_three_times_at_once_runs_its_tool_once(
    server: llama_server.Running,
) -> None:
    """Issue 32 against the live model: the forced call waits for approval; three copies of
    the approving resume at once run the tool once, and each goes on to the model (forced
    again: a new interrupt) and ends cleanly."""
    WEATHER_RUNS.clear()
    with bridge(server, tools=[watched_weather], approve=("get_weather",)) as agent:
        ask_ = [user("What is the weather in Paris?")]
        first = run_input(ask_, forwardedProps=FORCED)
        resume = approving(first, post(agent, first), forwardedProps=FORCED)
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda _: post(agent, resume), range(3)))
    results = [
        f["content"] for frames in answers for f in frames if f["type"] == "TOOL_CALL_RESULT"
    ]
    assert len(WEATHER_RUNS) == 1
    assert sorted(r.startswith("Not run again") for r in results) == [False, True, True]
    assert all(frames[-1]["type"] == "RUN_FINISHED" for frames in answers), [
        frames[-1] for frames in answers
    ]


def test_the_live_model_edits_the_shared_state_and_the_client_follows(
    server: llama_server.Running,
) -> None:
    """Issue 33 against the live model: forced to call update_state (llama.cpp constrains the
    arguments to the tool's schema), the model writes a JSON Patch; the bridge runs it: a patch
    that applies is a STATE_DELTA the snapshot agrees with, one that does not is the model's
    error to read, and either way the official client accepts the run."""
    state = {"todos": [{"text": "buy milk", "done": False}]}
    with bridge(server, shared_state=True, max_tool_rounds=1) as agent:
        (report,) = official(
            [
                {
                    "url": agent,
                    "messages": [user("Mark the first to-do as done.")],
                    "state": state,
                    "forwardedProps": FORCED,
                }
            ]
        )
    events = report["events"]
    results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results, types(events)
    assert all(r.startswith(("State updated.", "Error: update_state: ")) for r in results), results
    deltas = [e for e in events if e["type"] == "STATE_DELTA"]
    applied = [r for r in results if r.startswith("State updated.")]
    assert len(deltas) == len(applied)
    snapshots = [e for e in events if e["type"] == "STATE_SNAPSHOT"]
    if applied:  # the snapshot just before the end, and the client's state is it
        assert types(events)[-2] == "STATE_SNAPSHOT"
        assert report["state"] == snapshots[-1]["snapshot"]
    else:
        assert snapshots == [] and report["state"] == state
