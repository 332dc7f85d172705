"""Issue 43 point 5, "the rest of AG-UI 1.0's run": ``RUN_STARTED`` echoes ``parentRunId``,
``RUN_ERROR`` reports the usage a run spent before it failed, each model turn and each round of
server tools is a step a person can read, and ``GET /capabilities`` is true for the
configuration it describes, by ``@ag-ui/core`` 1.0.0's own ``AgentCapabilitiesSchema``.

Real servers: a planned model server (``peers_run``), the bridge in front of it, and the official
clients (``@ag-ui/client`` 1.0.0 and 0.0.59, ``tests/node/run_verified.mjs``: their SSE parser,
event schemas and ``verifyEvents``) judging every stream.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from agui_rules import ProtocolViolation, check_frames
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from node_tools import NODE_DIR, npm_install, require_node
from peers_run import PlannedModel, turn_usage
from servers import post, run_input, scripted_stack, serve

CLIENTS = ("1.0.0", "0.0.59")


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def search(city: str) -> str:
    """Search the web about a city."""
    return f"{city} is a city"


@contextmanager
def planned(turns: list[tuple[str, Any]], **overrides: Any) -> Iterator[tuple[str, PlannedModel]]:
    """The bridge (with the two server tools) in front of a model that plays ``turns``."""
    model = PlannedModel(turns)
    with serve(model.app()) as upstream:
        config = BridgeConfig(
            upstream_url=f"{upstream}/v1", model="planned", retries=0, **overrides
        )
        with serve(create_app(config, tools=[get_weather, search])) as bridge:
            yield bridge, model


def verified(client: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One run, the body exactly as given, through the client line's parser, schemas and
    ``verifyEvents``: the events that passed, the error that stopped them, what it logged."""
    node = require_node("the run's events are judged by the official AG-UI clients")
    marker = NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json"
    npm_install(NODE_DIR, marker, "the official AG-UI client")
    # The 0.0.x lines send no protocol version (and get the events of their line).
    body = {**body, "protocolVersion": "1.0"} if client == "1.0.0" else body
    spec = {"client": client, "url": url, "input": body}
    done = subprocess.run(
        [node, "run_verified.mjs"],
        cwd=NODE_DIR,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _legacy_body(**extra: Any) -> dict[str, Any]:
    body = run_input([{"id": "u", "role": "user", "content": "Weather in Oslo?"}], **extra)
    body.pop("protocolVersion")
    return body


def steps(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]


def _within(events: list[dict[str, Any]], kind: str) -> list[str]:
    """The step open at each event of ``kind``."""
    open_step, seen = "", []
    for event in events:
        if event["type"] == "STEP_STARTED":
            open_step = event["stepName"]
        elif event["type"] == "STEP_FINISHED":
            open_step = ""
        elif event["type"] == kind:
            seen.append(open_step)
    return seen


TWO_ROUNDS = [
    ("STEP_STARTED", "model"),
    ("STEP_FINISHED", "model"),
    ("STEP_STARTED", "tools: get_weather"),
    ("STEP_FINISHED", "tools: get_weather"),
    ("STEP_STARTED", "model"),
    ("STEP_FINISHED", "model"),
    ("STEP_STARTED", "tools: get_weather, search"),
    ("STEP_FINISHED", "tools: get_weather, search"),
    ("STEP_STARTED", "model"),
    ("STEP_FINISHED", "model"),
]
CALLS = [("calls", ["get_weather"]), ("calls", ["get_weather", "search", "get_weather"])]


def _counts(usage: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(entry["inputTokens"], entry["outputTokens"]) for entry in usage]


def _spent(turns: int) -> list[tuple[int, int]]:
    return [
        (turn_usage(t)["prompt_tokens"], turn_usage(t)["completion_tokens"]) for t in range(turns)
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_run_started_echoes_the_parent_run_id_to_both_client_lines(client: str) -> None:
    """Finding: ``RUN_STARTED`` did not echo the input's ``parentRunId`` (AG-UI 1.0: a run
    says which run it follows; both client lines' schemas have the field). Promise: every run
    begins with ``RUN_STARTED`` carrying the ``parentRunId`` it was given."""
    with scripted_stack() as stack:
        result = verified(client, f"{stack.bridge_url}/", _legacy_body(parentRunId="run-before"))
    assert result["error"] is None and result["logged"] == []
    started = result["events"][0]
    assert started["type"] == "RUN_STARTED"
    assert started["parentRunId"] == "run-before"
    assert result["events"][-1]["type"] == "RUN_FINISHED"


def test_a_hydrate_and_a_run_without_a_parent_say_so() -> None:
    """Finding: as above, for the run a thread's hydrate answers with (no model called).
    Promise: it echoes ``parentRunId`` too; a run given none carries none (no null)."""
    with scripted_stack(threads="memory") as stack:
        body = _legacy_body(parentRunId="run-before")
        body["messages"] = []
        hydrated = post(f"{stack.bridge_url}/", body)
        plain = post(f"{stack.bridge_url}/", _legacy_body())
    assert hydrated[0]["type"] == "RUN_STARTED" and hydrated[0]["parentRunId"] == "run-before"
    assert plain[0]["type"] == "RUN_STARTED" and "parentRunId" not in plain[0]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_run_that_fails_after_two_model_turns_reports_their_usage_on_run_error(
    client: str,
) -> None:
    """Finding: ``RUN_ERROR`` had no ``usage``: a run that failed after two model turns with
    server tools had spent their tokens, and nobody was told. Promise: ``RUN_ERROR.usage``
    holds each turn's usage, as ``RUN_FINISHED.usage`` does (AG-UI 1.0 and 0.0.59 define it),
    and the failing turn's step is finished before it."""
    with planned([*CALLS, ("fail", 500)]) as (bridge, model):
        result = verified(client, f"{bridge}/", _legacy_body())
    assert result["error"] is None and result["logged"] == []
    events = result["events"]
    assert len(model.requests) == 3
    error = events[-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "upstream_http_500"
    assert _counts(error["usage"]) == _spent(2)
    assert steps(events) == TWO_ROUNDS
    assert [e["type"] for e in events[-2:]] == ["STEP_FINISHED", "RUN_ERROR"]


@pytest.mark.parametrize("client", CLIENTS)
def test_each_model_turn_and_each_round_of_server_tools_is_a_step(client: str) -> None:
    """Finding: no ``STEP_STARTED``/``STEP_FINISHED``, which frontends show as progress.
    Promise: a ``model`` step around each model turn (its words and calls in it), a ``tools:``
    step around each round of server tools named for a person (each tool once, in the model's
    order; their results in it), one step at a time, all finished before ``RUN_FINISHED``
    (which both client lines' verifiers require), and the usage of every turn at the end."""
    with planned([*CALLS, ("text", ["Sunny", " in Oslo"])]) as (bridge, _):
        result = verified(client, f"{bridge}/", _legacy_body())
    assert result["error"] is None and result["logged"] == []
    events = result["events"]
    assert steps(events) == TWO_ROUNDS
    assert set(_within(events, "TOOL_CALL_START")) == {"model"}
    assert set(_within(events, "TEXT_MESSAGE_CONTENT")) == {"model"}
    results = _within(events, "TOOL_CALL_RESULT")
    assert results == ["tools: get_weather"] + ["tools: get_weather, search"] * 3
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED" and events[-2]["type"] == "STEP_FINISHED"
    assert _counts(finished["usage"]) == _spent(3)


def test_a_run_past_its_tool_rounds_ends_its_steps_and_reports_its_usage() -> None:
    """Finding: as above, the run the bridge stops itself (``--max-tool-rounds``). Promise:
    every step it started is finished, then its one ``RUN_ERROR``, with the usage spent."""
    with planned(CALLS, max_tool_rounds=1) as (bridge, _):
        frames = post(f"{bridge}/", run_input())
    assert steps(frames) == TWO_ROUNDS[:6]
    error = frames[-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "tool_rounds_exceeded"
    assert [f["type"] for f in frames].count("RUN_ERROR") == 1
    assert _counts(error["usage"]) == _spent(2)


def test_the_rules_hold_steps_to_pairs_that_nest() -> None:
    """The protocol-order check every test's streams go through (``tests/agui_rules.py``)
    refuses what the client's verifier refuses of steps, and steps that do not nest."""
    start = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    end = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}

    def step(kind: str, name: str) -> dict[str, Any]:
        return {"type": f"STEP_{kind}", "stepName": name}

    check_frames([start, step("STARTED", "a"), step("FINISHED", "a"), end])
    refused = [
        [start, step("STARTED", "a"), end],  # still active at RUN_FINISHED
        [start, step("FINISHED", "a"), end],  # not started
        [start, step("STARTED", "a"), step("STARTED", "a")],  # active twice
        [start, step("STARTED", "a"), step("STARTED", "b"), step("FINISHED", "a")],  # crossed
    ]
    for frames in refused:
        with pytest.raises(ProtocolViolation):
            check_frames(frames)
    # RUN_ERROR may come at any point, as the client's verifier takes it.
    check_frames([start, step("STARTED", "a"), {"type": "RUN_ERROR", "message": "m"}])


def capabilities_of(*urls: str) -> list[dict[str, Any]]:
    """Each bridge's ``GET /capabilities``, checked by ``@ag-ui/core`` 1.0.0's schema."""
    documents = [httpx.get(f"{url}/capabilities", timeout=30).json() for url in urls]
    node = require_node("the capabilities are judged by @ag-ui/core 1.0.0's schema")
    npm_install(
        NODE_DIR, NODE_DIR / "node_modules" / "@ag-ui" / "core" / "package.json", "@ag-ui/core"
    )
    done = subprocess.run(
        [node, "capabilities.mjs"],
        cwd=NODE_DIR,
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for document, result in zip(documents, results, strict=True):
        assert result["ok"], f"AgentCapabilitiesSchema refused {document}: {result['issues']}"
    return documents


def test_capabilities_are_complete_and_true_for_each_configuration() -> None:
    """Finding: ``GET /capabilities`` left out ``state`` with ``--shared-state`` on, listed
    server tools only under ``custom``, and said nothing of multimodal input, reasoning,
    human-in-the-loop or ``execution.maxIterations``. Promise: for each configuration the
    document passes ``@ag-ui/core`` 1.0.0's ``AgentCapabilitiesSchema`` and says what that
    configuration does."""
    plain_model = PlannedModel([])
    llama = PlannedModel([], modalities={"vision": True, "audio": False, "video": False})
    with (
        scripted_stack() as plain,
        scripted_stack(
            tools=[get_weather, search],
            shared_state=True,
            approve=("search",),
            threads="memory",
            max_tool_rounds=3,
            run_timeout=600.0,
        ) as full,
        serve(plain_model.app()) as silent_url,
        serve(llama.app()) as llama_url,
        serve(
            create_app(
                BridgeConfig(upstream_url=f"{silent_url}/v1", model="m", upstream_api="responses")
            )
        ) as responses,
        serve(create_app(BridgeConfig(upstream_url=f"{llama_url}/v1", model="m"))) as llama_bridge,
    ):
        bare, rich, by_responses, by_llama = capabilities_of(
            plain.bridge_url, full.bridge_url, responses, llama_bridge
        )
    # Nothing configured: no state events, no server tools, nobody asked, 16 rounds.
    assert bare["state"] == {
        "snapshots": False,
        "deltas": False,
        "memory": False,
        "persistentState": False,
    }
    assert "items" not in bare["tools"] and bare["tools"]["clientProvided"] is True
    assert "humanInTheLoop" not in bare
    assert bare["execution"] == {"maxIterations": 16}
    assert bare["transport"]["resumable"] is False
    assert bare["multimodal"]["input"] == {"image": True, "audio": True, "video": True, "pdf": True}
    assert bare["reasoning"] == {"supported": True, "streaming": True, "encrypted": True}
    # Shared state, server tools (one under approval), threads, 3 rounds, a run's time bound.
    assert rich["state"] == {
        "snapshots": True,
        "deltas": True,
        "memory": False,
        "persistentState": True,
    }
    items = {item["name"]: item for item in rich["tools"]["items"]}
    # update_state is a server tool of --shared-state's.
    served = {"get_weather", "search", "update_state"}
    assert set(items) == served == set(rich["custom"]["serverTools"])
    assert items["get_weather"]["parameters"]["properties"]["city"]["type"] == "string"
    assert items["get_weather"]["description"] == "The weather in a city."
    assert rich["humanInTheLoop"] == {
        "supported": True,
        "approvals": True,
        "interrupts": True,
        "approveWithEdits": True,
    }
    assert rich["execution"] == {"maxIterations": 3, "maxExecutionTime": 600_000}
    assert rich["transport"]["resumable"] is True
    # The Responses API carries no video; llama.cpp says what it takes, and reads no PDFs.
    assert by_responses["multimodal"]["input"]["video"] is False
    assert by_llama["multimodal"]["input"] == {
        "image": True,
        "audio": False,
        "video": False,
        "pdf": False,
    }
    assert by_llama["reasoning"]["encrypted"] is False
