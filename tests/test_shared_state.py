"""Shared state over real HTTP (README "Shared state"): with ``--shared-state`` the model is shown
the run's state and edits it with ``update_state`` (a JSON Patch the bridge applies): each edit
that applies is a ``STATE_DELTA`` after its result, a run that changed the state ends with its
``STATE_SNAPSHOT`` (before an interrupt or a ``RUN_ERROR`` too); an edit that does not apply, breaks
the schema or the size changes nothing and tells the model why. ``--predict-state`` opens every
run with a ``CUSTOM`` ``PredictState``. The scripted model plans, ticks steps off and edits to-dos
(``bridge/cli/demo/state.py``)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from bridge.cli.parser import build_parser
from bridge.cli.settings import config_from_args
from bridge.serve.http.run_input import MAX_DEPTH
from bridge.serve.tools.state import RunState
from servers import approving, post, run_input, scripted_config, scripted_stack

PLAN = "Make a plan to bake a cake"
TODOS = {"todos": [{"text": "buy milk", "done": False}, {"text": "call Bob", "done": False}]}


def run_with(state: Any, text: str, **overrides: Any) -> tuple[list[dict[str, Any]], Any]:
    """One run with ``state`` (left out when ``None``): its frames and the upstream requests."""
    overrides.setdefault("shared_state", True)
    extra = {"state": state} if state is not None else {"state": None}
    with scripted_stack(**overrides) as made:
        frames = post(
            made.bridge_url, run_input([{"id": "u", "role": "user", "content": text}], **extra)
        )
        return frames, list(made.upstream_requests)


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


def followed(state: Any, frames: list[dict[str, Any]]) -> Any:
    """The state as a client that applies each STATE_DELTA in turn holds it."""
    state = copy.deepcopy(state)
    for frame in frames:
        if frame["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, frame["delta"])
        elif frame["type"] == "STATE_SNAPSHOT":
            assert frame["snapshot"] == state, "the snapshot is the state the deltas made"
    return state


def results(frames: list[dict[str, Any]]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]


def test_the_model_writes_a_plan_and_ticks_it_off_one_delta_at_a_time() -> None:
    frames, upstream = run_with({}, PLAN)
    types = kinds(frames)
    assert types.count("STATE_DELTA") == 4  # the plan, then three ticks
    assert types[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    # Each delta comes right after its call's result.
    for index, kind in enumerate(types):
        if kind == "STATE_DELTA":
            assert types[index - 1] == "TOOL_CALL_RESULT"
    final = followed({}, frames)
    assert [step["status"] for step in final["steps"]] == ["completed"] * 3
    assert frames[-2]["snapshot"] == final
    assert all(result.startswith("State updated.") for result in results(frames))
    # The model is shown the state and offered the tool; every turn of the run goes upstream.
    first = upstream[0]
    assert any(
        m["role"] == "system" and m["content"].startswith("Shared state (JSON)")
        for m in first["messages"]
    )
    assert "update_state" in [tool["function"]["name"] for tool in first["tools"]]
    assert len(upstream) == 5
    assert "Done: the 3 steps of the plan are complete." in "".join(
        f.get("delta", "") for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Add a to-do: water the plants",
            [*TODOS["todos"], {"text": "water the plants", "done": False}],
        ),
        ("Mark call Bob done", [TODOS["todos"][0], {"text": "call Bob", "done": True}]),
        ("Remove buy milk", [TODOS["todos"][1]]),
    ],
    ids=["add", "done", "remove"],
)
def test_the_model_edits_a_todo_list(text: str, expected: list[dict[str, Any]]) -> None:
    frames, _ = run_with(TODOS, text)
    assert followed(TODOS, frames) == {"todos": expected}
    assert kinds(frames).count("STATE_DELTA") == 1 and frames[-2]["type"] == "STATE_SNAPSHOT"


@pytest.mark.parametrize(
    ("patch", "overrides", "why"),
    [
        ([{"op": "remove", "path": "/nothing"}], {}, "the patch does not apply"),
        ([{"op": "jump", "path": "/todos"}], {}, "the patch does not apply"),
        (
            [{"op": "add", "path": "/todos/-", "value": {"text": "x", "done": "no"}}],
            {
                "state_schema": {
                    "type": "object",
                    "properties": {
                        "todos": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"done": {"type": "boolean"}},
                                "required": ["text", "done"],
                            },
                        }
                    },
                }
            },
            "the new state breaks the schema: todos/2/done: 'no' is not of type 'boolean'",
        ),
        (
            [{"op": "add", "path": "/big", "value": "x" * 500}],
            {"max_state_bytes": 300},
            "the new state would be",
        ),
    ],
    ids=["missing-path", "unknown-op", "schema", "too-large"],
)
def test_an_edit_that_does_not_hold_changes_nothing_and_the_model_reads_why(
    patch: list[dict[str, Any]], overrides: dict[str, Any], why: str
) -> None:
    frames, upstream = run_with(TODOS, f"Update it with patch: {json.dumps(patch)}", **overrides)
    [result] = results(frames)
    assert result.startswith(f"Error: update_state: {why}")
    assert result.endswith("The state is unchanged.")
    assert "STATE_DELTA" not in kinds(frames) and "STATE_SNAPSHOT" not in kinds(frames)
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert upstream[-1]["messages"][-1]["content"] == result  # the model reads it


def test_without_shared_state_or_without_a_state_object_there_is_no_tool_and_no_state_event() -> (
    None
):
    off, off_upstream = run_with(TODOS, PLAN, shared_state=False)
    absent, absent_upstream = run_with(None, PLAN)
    listed, _ = run_with([1, 2], PLAN)
    for frames, upstream in ((off, off_upstream), (absent, absent_upstream)):
        assert not {"STATE_DELTA", "STATE_SNAPSHOT"} & set(kinds(frames))
        offered = [t["function"]["name"] for t in upstream[0].get("tools") or []]
        assert "update_state" not in offered
    assert not {"STATE_DELTA", "STATE_SNAPSHOT"} & set(kinds(listed))


def test_predict_state_opens_every_model_step() -> None:
    """PredictState goes first in each model step (CopilotKit's converter forgets it at every
    step's start and end), right after the step's STEP_STARTED."""
    predicted = (("document", "write_document", "document"), ("title", "write_document", "title"))
    for shared in (True, False):
        frames, _ = run_with({}, "Hello", shared_state=shared, predict_state=predicted)
        assert kinds(frames)[:3] == ["RUN_STARTED", "STEP_STARTED", "CUSTOM"]
        assert frames[1]["stepName"] == "model"
        assert frames[2]["name"] == "PredictState"
        assert frames[2]["value"] == [
            {"state_key": "document", "tool": "write_document", "tool_argument": "document"},
            {"state_key": "title", "tool": "write_document", "tool_argument": "title"},
        ]
        steps = [i for i, frame in enumerate(frames) if frame["type"] == "STEP_STARTED"]
        models = [i for i in steps if frames[i]["stepName"] == "model"]
        assert all(frames[i + 1].get("name") == "PredictState" for i in models)


def test_a_run_that_fails_after_an_edit_ends_with_its_snapshot_before_run_error() -> None:
    """One round allowed: the plan is written, the next tick is over the limit."""
    frames, _ = run_with({}, PLAN, max_tool_rounds=1)
    assert kinds(frames)[-2:] == ["STATE_SNAPSHOT", "RUN_ERROR"]
    assert frames[-1]["code"] == "tool_rounds_exceeded"
    assert frames[-2]["snapshot"] == followed({}, frames)
    assert len(frames[-2]["snapshot"]["steps"]) == 3


def test_a_frontend_tool_named_update_state_is_refused() -> None:
    tool = {"name": "update_state", "description": "mine", "parameters": {"type": "object"}}
    with scripted_stack(shared_state=True) as made:
        response = httpx.post(made.bridge_url, json=run_input(state={}, tools=[tool]), timeout=30)
    assert response.status_code == 400
    assert "update_state" in response.json()["error"]["message"]


def test_update_state_under_approval_waits_and_its_resume_applies_it() -> None:
    with scripted_stack(shared_state=True, approve=("update_state",), secret="s" * 32) as made:
        ask = [{"id": "u", "role": "user", "content": "Add a to-do: water the plants"}]
        first = run_input(ask, state=TODOS)
        frames = post(made.bridge_url, first)
        resumed = post(made.bridge_url, approving(first, frames, state=TODOS))
    assert "STATE_DELTA" not in kinds(frames)  # nothing applied while it waits
    assert kinds(resumed).count("STATE_DELTA") == 1 and resumed[-2]["type"] == "STATE_SNAPSHOT"
    assert followed(TODOS, resumed)["todos"][-1] == {"text": "water the plants", "done": False}


def test_metrics_the_run_line_the_recording_and_redaction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-state-Qx7Vb2Kp9Lm4Nz8Rt1Wy6"
    state = {"note": f"the key is {key}"}
    caplog.set_level(logging.INFO, logger="agui_bridge.runs")
    with scripted_stack(
        shared_state=True, metrics=True, api_key=key, record_dir=str(tmp_path)
    ) as made:
        frames = post(
            made.bridge_url, run_input([{"id": "u", "role": "user", "content": PLAN}], state=state)
        )
        bad = 'Update it with patch: [{"op": "remove", "path": "/nothing"}]'
        post(made.bridge_url, run_input([{"id": "u", "role": "user", "content": bad}], state=state))
        metrics = httpx.get(f"{made.bridge_url}/metrics").text
    assert 'agui_bridge_state_updates_total{outcome="applied"} 4.0' in metrics
    assert 'agui_bridge_state_updates_total{outcome="invalid"} 1.0' in metrics
    assert "state_updates=4" in caplog.text and "state_updates=0" in caplog.text
    recorded = "".join(path.read_text() for path in tmp_path.iterdir())
    assert '"type":"STATE_DELTA"' in recorded and '"type":"STATE_SNAPSHOT"' in recorded
    assert key not in json.dumps(frames) + recorded + caplog.text


def test_the_flags_map_onto_the_config(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["todos"]}))
    args = build_parser().parse_args(
        [
            "serve", "--model", "m", "--shared-state", "--state-schema", str(schema),
            "--max-state-bytes", "5000", "--predict-state", "document=write_document.document",
        ]
    )  # fmt: skip
    config = config_from_args(
        args, upstream_url="http://127.0.0.1:1/v1", model="m", models=[], api_key=None
    )
    assert config.shared_state and config.max_state_bytes == 5000
    assert config.state_schema == {"type": "object", "required": ["todos"]}
    assert config.predict_state == (("document", "write_document", "document"),)
    for wrong, says in (
        (["--predict-state", "document"], "STATE_KEY=TOOL.ARGUMENT"),
        (["--state-schema", str(tmp_path / "none.json")], "--state-schema"),
    ):
        bad = build_parser().parse_args(["serve", "--model", "m", *wrong])
        with pytest.raises(ValueError, match=says):
            config_from_args(
                bad, upstream_url="http://127.0.0.1:1/v1", model="m", models=[], api_key=None
            )
    with pytest.raises(ValueError, match="not a JSON Schema"):
        scripted_config("http://127.0.0.1:1", shared_state=True, state_schema={"type": 5})


@pytest.mark.anyio
async def test_every_patch_is_applied_off_the_event_loop_in_the_calls_order() -> None:
    """Every patch, whatever the state's size (the model chooses the patch's), is read, applied
    and checked in a worker thread. Calls made at once apply in the order made."""
    seen: list[str] = []

    def watch(state: RunState) -> RunState:
        patched = state._patched

        def watched(arguments: str) -> tuple[list[Any], dict[str, Any], str]:
            seen.append(threading.current_thread().name)
            return patched(arguments)

        state._patched = watched  # type: ignore[method-assign]
        return state

    depth = MAX_DEPTH - 1
    state = watch(RunState({"items": ["x" * 100] * 2000}, max_bytes=10_000_000, max_depth=depth))
    ops = [json.dumps({"patch": [{"op": "add", "path": "/items/-", "value": i}]}) for i in range(5)]
    await asyncio.gather(*(state.update(arguments) for arguments in ops))
    assert state.value["items"][-5:] == [0, 1, 2, 3, 4]
    small = watch(RunState({}, max_depth=depth))
    for i in range(2):
        await small.update(json.dumps({"patch": [{"op": "add", "path": f"/k{i}", "value": i}]}))
    assert small.value == {"k0": 0, "k1": 1}
    assert len(seen) == 7 and threading.current_thread().name not in seen


def get_time() -> str:
    """The current time."""
    return "12:00"


@pytest.mark.parametrize("side", ["python", "mcp"])
def test_an_edit_runs_beside_python_and_mcp_tools_in_one_round(side: str) -> None:
    """The model asks the clock and edits the to-dos in one turn: both run, the edit's delta
    follows its result, and the clock's result is the tool's."""
    example = Path(__file__).resolve().parent.parent / "examples" / "mcp_server.py"
    options: dict[str, Any] = {"shared_state": True}
    if side == "mcp":
        options["mcp_servers"] = {"clock": f"{sys.executable} {example}"}
    tools = [get_time] if side == "python" else []
    with scripted_stack(tools=tools, **options) as made:
        ask = [{"id": "u", "role": "user", "content": "What time is it? Add a to-do: call Alice"}]
        frames = post(made.bridge_url, run_input(ask, state=TODOS))
    names = [f["toolCallName"] for f in frames if f["type"] == "TOOL_CALL_START"]
    assert sorted(names) == sorted([names[0], "update_state"]) and "time" in names[0]
    assert any(r.startswith("State updated.") for r in results(frames))
    assert followed(TODOS, frames)["todos"][-1] == {"text": "call Alice", "done": False}
    assert kinds(frames)[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
