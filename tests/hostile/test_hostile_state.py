"""Shared state against a hostile model (issue 40, findings 2, 3 and 4; README "Shared state"):
the model writes every ``update_state`` patch, so a patch is bounded before the work it would
cost, can make no state the bridge would not take back, and its delta reaches the client in the
order the patches applied; and whatever event cannot be encoded, the run ends with one
terminal event. The model is ``peers_state.hostile_model``, a real upstream whose turns each
test writes; the bridge and the official clients are real too.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import subprocess
import threading
import tracemalloc
from dataclasses import dataclass
from typing import Any

import httpx
import jsonpatch
import pytest
from ag_ui.core import CustomEvent

from bridge.serve.http.run_input import MAX_DEPTH
from bridge.serve.tools.server_tools import ServerTool, ToolOutput
from bridge.serve.tools.state import RUN_STATE
from node_tools import NODE_DIR, npm_install, require_node
from peers_state import Call, Model, bridge_on, hostile_model, update_state
from servers import post, run_input

#: The deepest state a client may send back: the body's depth, less the body itself.
DEEPEST_STATE = MAX_DEPTH - 1


@dataclass
class Run:
    frames: list[dict[str, Any]]
    model: Model
    metrics: str

    def kinds(self) -> list[str]:
        return [frame["type"] for frame in self.frames]

    def results(self) -> list[str]:
        return [f["content"] for f in self.frames if f["type"] == "TOOL_CALL_RESULT"]

    def deltas(self) -> list[list[dict[str, Any]]]:
        return [f["delta"] for f in self.frames if f["type"] == "STATE_DELTA"]

    def count(self, outcome: str) -> float:
        """``agui_bridge_state_updates_total`` for ``outcome``."""
        found = re.search(
            rf'agui_bridge_state_updates_total{{outcome="{outcome}"}} (\S+)', self.metrics
        )
        return float(found.group(1)) if found else 0.0


def run(turns: list[list[Call]], state: Any, **config: Any) -> Run:
    """One run of the hostile model's turns, with ``state``, through a bridge of its own."""
    with hostile_model(turns) as model, bridge_on(model, metrics=True, **config) as url:
        frames = post(url, run_input(state=state))
        metrics = httpx.get(f"{url}/metrics").text
    return Run(frames, model, metrics)


def nested(levels: int) -> dict[str, Any]:
    """An object nesting ``levels`` levels deep (``{}`` is one)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def followed(state: Any, frames: list[dict[str, Any]]) -> Any:
    """The state as a client that applies each STATE_DELTA in turn holds it (a delta that
    does not apply fails the test, as it fails the client)."""
    state = copy.deepcopy(state)
    for frame in frames:
        if frame["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, frame["delta"])
    return state


# -- Finding 2: a patch cannot grow the state past its limit, nor stall the loop ---------------
def test_finding_2_copies_of_the_state_into_itself_are_refused_before_it_grows() -> None:
    """Finding 2: 18 copies of a subtree into itself would double it 18 times; the copy that
    would bring the patch past ``--max-state-bytes`` is refused before it is made, so the
    bridge's memory never holds more than about the limit's worth, and the model reads why."""
    copies = [{"op": "copy", "from": "/a", "path": f"/a/c{i}"} for i in range(18)]
    state = {"a": {"text": "x" * 50}}
    tracemalloc.start()
    try:
        done = run([update_state(copies)], state, max_state_bytes=100_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    [result] = done.results()
    assert re.fullmatch(
        r"Error: update_state: the new state would be over 100000 bytes: operation \d+ copies "
        r"\d+ bytes, and the patch would add \d+ in all\. The state is unchanged\.",
        result,
    ), result
    assert done.count("too_large") == 1 and done.count("applied") == 0
    assert not done.deltas() and "STATE_SNAPSHOT" not in done.kinds()
    assert done.kinds()[-1] == "RUN_FINISHED"
    # 2^18 copies of a 60-byte object: 16 MB of JSON and far more of Python objects. Refused
    # at about 100 KB, the whole run (two servers and a client in this process) holds little.
    assert peak < 30_000_000, f"the process held {peak} bytes at its peak"


def test_finding_2_every_patch_is_applied_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 2: the model chooses a patch's size, so every patch (a small state's too) is
    applied in a worker thread, never on the thread of the bridge's event loop."""
    threads: list[str] = []
    apply = jsonpatch.JsonPatch.apply

    def watched(self: jsonpatch.JsonPatch, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return apply(self, *args, **kwargs)

    monkeypatch.setattr(jsonpatch.JsonPatch, "apply", watched)
    turns = [update_state([{"op": "add", "path": f"/k{i}", "value": i}]) for i in range(3)]
    done = run(turns, {})
    assert followed({}, done.frames) == {"k0": 0, "k1": 1, "k2": 2}
    loop_threads = [name for name in threads if name.startswith("uvicorn-")]
    assert threads and not loop_threads, threads


# -- Finding 3: one terminal event, whatever cannot be encoded ----------------------------------
def test_finding_3_patches_nested_past_what_a_client_may_send_back_are_refused() -> None:
    """Finding 3: three patches of 100 levels nested in each other made a state 300 deep that
    no encoder could write (the stream was cut, with no terminal event). Each is refused (a
    state deeper than a client may send back would lock the thread out), counted, and the
    run ends as usual."""
    deep = nested(100)
    turns = [
        update_state([{"op": "add", "path": "/d", "value": deep}]),
        update_state([{"op": "add", "path": "/d" + "/a" * 99, "value": deep}]),
        update_state([{"op": "add", "path": "/d" + "/a" * 198, "value": deep}]),
    ]
    done = run(turns, {})
    results = done.results()
    assert len(results) == 3
    for result in results:
        assert result == (
            "Error: update_state: the new state would nest arrays and objects deeper than "
            f"{DEEPEST_STATE} levels, the deepest state a client may send back. "
            "The state is unchanged."
        )
    assert done.count("too_deep") == 3 and not done.deltas()
    assert done.kinds()[-1] == "RUN_FINISHED"


def test_finding_3_the_deepest_state_a_patch_makes_goes_back_to_the_bridge() -> None:
    """Finding 3: a patch may make the state as deep as the bridge takes back from a client,
    and no deeper: the next run, which sends the state back, is accepted (a state one level
    deeper got ``400 too_deep`` until the client reset it)."""
    deepest = [{"op": "add", "path": "/d", "value": nested(DEEPEST_STATE - 1)}]
    deeper = [{"op": "add", "path": "/d" + "/a" * (DEEPEST_STATE - 2), "value": {"b": {}}}]
    with (
        hostile_model([update_state(deepest), update_state(deeper)]) as model,
        bridge_on(model) as url,
    ):
        frames = post(url, run_input(state={}))
        state = followed({}, frames)
        again = httpx.post(url, json=run_input(state=state), timeout=30)
    [made, refused] = [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert made.startswith("State updated.")
    assert refused.startswith("Error: update_state: the new state would nest arrays and objects")
    assert frames[-2]["snapshot"] == state == {"d": nested(DEEPEST_STATE - 1)}
    assert again.status_code == 200, again.text


def _tool_with_after(value: Any) -> ServerTool:
    """A server tool whose answer brings an event the bridge cannot encode."""

    async def invoke(arguments: str) -> ToolOutput:
        return ToolOutput("done", after=(CustomEvent(name="leak", value=value),))

    return ServerTool("leak", "A tool whose event cannot be encoded.", {"type": "object"}, invoke)


@pytest.mark.parametrize(
    "value",
    [nested(300), "\ud800", {"not JSON": object()}],
    ids=["300-deep", "lone-surrogate", "not-a-json-type"],
)
def test_finding_3_an_event_that_cannot_be_encoded_ends_the_run_with_run_error(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 3: whatever fails in encoding an event (its depth, a lone surrogate, a value of
    no JSON type), the run ends with ``RUN_ERROR unencodable_event``, after the state's snapshot
    (the run changed it), and the run line and the metrics say ``error``, not ``finished``."""
    turns = [update_state([{"op": "add", "path": "/seen", "value": True}]), [("leak", {})]]
    caplog.set_level(logging.INFO, logger="agui_bridge.runs")
    with (
        hostile_model(turns) as model,
        bridge_on(model, metrics=True, server_tools=[_tool_with_after(value)]) as url,
    ):
        frames = post(url, run_input(state={}))  # protocol order checked: one terminal event
        metrics = httpx.get(f"{url}/metrics").text
    kinds = [frame["type"] for frame in frames]
    assert kinds[-2:] == ["STATE_SNAPSHOT", "RUN_ERROR"]
    assert frames[-2]["snapshot"] == {"seen": True}
    assert frames[-1]["code"] == "unencodable_event"
    assert (
        frames[-1]["message"] == "the bridge could not encode this run's TOOL_CALL_RESULT, CUSTOM"
    )
    assert "CUSTOM" not in kinds  # nothing of the batch that failed went out
    [line] = [r.getMessage() for r in caplog.records if r.name == "agui_bridge.runs"]
    assert "outcome=error code=unencodable_event" in line
    assert re.search(
        r'agui_bridge_runs_ended_total\{code="unencodable_event",model="hostile",outcome="error"\} 1\.0',
        metrics,
    ), metrics


def test_finding_3_a_snapshot_that_cannot_be_encoded_leaves_run_error_alone() -> None:
    """Finding 3: when the state's own snapshot is what cannot be encoded (a tool put a value
    of no JSON type in it), the run still ends with one terminal event: ``RUN_ERROR`` alone."""

    async def spoil(arguments: str) -> str:
        state = RUN_STATE.get()
        assert state is not None
        state.value["spoiled"], state.changed = object(), True
        return "done"

    tool = ServerTool("spoil", "Puts a value of no JSON type in the state.", {}, spoil)
    with hostile_model([[("spoil", {})]]) as model, bridge_on(model, server_tools=[tool]) as url:
        frames = post(url, run_input(state={}))
    kinds = [frame["type"] for frame in frames]
    assert "STATE_SNAPSHOT" not in kinds and kinds[-1] == "RUN_ERROR"
    assert frames[-1] == {
        "type": "RUN_ERROR",
        "message": "the bridge could not encode this run's STATE_SNAPSHOT, RUN_FINISHED",
        "code": "unencodable_event",
    }


# -- Finding 4: patches apply and go out in the order the model made them ----------------------
PARALLEL = 30


def _parallel_appends() -> list[list[Call]]:
    """One turn of 30 update_state calls, each adding at the next index: out of order, one
    fails on the client (``/items/5`` before ``/items/4`` is there)."""
    return [
        update_state(*([{"op": "add", "path": f"/items/{i}", "value": i}] for i in range(PARALLEL)))
    ]


def test_finding_4_parallel_patches_go_out_in_the_order_they_applied() -> None:
    """Finding 4: 30 update_state calls at once apply in the order made, and their deltas go
    out in that order (they went out as each call finished: out of order in 5 of 5 runs)."""
    for _ in range(3):
        done = run(_parallel_appends(), {"items": []})
        assert [delta[0]["value"] for delta in done.deltas()] == list(range(PARALLEL))
        assert followed({"items": []}, done.frames) == {"items": list(range(PARALLEL))}
        assert done.frames[-2]["snapshot"] == {"items": list(range(PARALLEL))}


@pytest.mark.parametrize("client", ["1.0.0", "0.0.59"])
def test_finding_4_the_official_clients_apply_parallel_patches(client: str) -> None:
    """Finding 4: ``@ag-ui/client`` 1.0.0 applies every delta (it logged "Failed to apply state
    patch"), and 0.0.59's ``compactEvents`` folds them (it threw)."""
    node = require_node("the official AG-UI client judges the state's deltas")
    npm_install(
        NODE_DIR,
        NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json",
        "the official AG-UI client",
    )
    with hostile_model(_parallel_appends()) as model, bridge_on(model) as url:
        spec = {"client": client, "url": url, "state": {"items": []}}
        done = subprocess.run(
            [node, "state_deltas.mjs"],
            cwd=NODE_DIR,
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    expected = {"items": list(range(PARALLEL))}
    assert report["logged"] == [] and not report["failed"] and report["rejected"] is None
    assert report["deltas"] == PARALLEL
    assert report["state"] == expected
    assert report["compactError"] is None and report["compacted"] == expected


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "add", "path": "/__proto__/polluted", "value": True},
        {"op": "add", "path": "/x/constructor/prototype", "value": {}},
        {"op": "copy", "from": "/__proto__", "path": "/y"},
    ],
    ids=["__proto__", "constructor-prototype", "from-__proto__"],
)
def test_finding_4_pointers_into_the_prototype_are_refused(operation: dict[str, Any]) -> None:
    """Finding 4: the official client refuses a patch whose pointer goes into ``__proto__`` or
    ``constructor/prototype`` (and the run with it); the bridge refuses it first."""
    done = run([update_state([operation])], {"x": {"constructor": {}}})
    [result] = done.results()
    assert result.startswith("Error: update_state: the pointer ")
    assert "goes into __proto__ or constructor/prototype, which AG-UI clients refuse" in result
    assert done.count("invalid") == 1 and not done.deltas()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_finding_4_nan_and_infinities_never_reach_the_model(constant: str) -> None:
    """Finding 4: ``NaN`` is no JSON number: the patch is refused and counted, and no request
    to the model carries it: it reads the refusal (it was shown the state back as
    ``{"x":NaN}``)."""
    arguments = f'{{"patch": [{{"op": "add", "path": "/x", "value": {constant}}}]}}'
    done = run([[("update_state", arguments)]], {})
    [result] = done.results()
    assert result == (
        "Error: update_state: the arguments are not valid JSON: "
        f"{constant} is not a JSON number; write null, or a string. The state is unchanged."
    )
    assert done.count("invalid") == 1 and not done.deltas()
    assert done.model.requests[-1]["messages"][-1]["content"] == result  # what the model read


def test_finding_4_a_lone_surrogate_is_refused_counted_and_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Finding 4: a lone surrogate (``"\\ud800"``) cannot be written out: the patch is refused
    with a clear result, counted as invalid, and nothing is logged as a failure of the tool."""
    arguments = '{"patch": [{"op": "add", "path": "/x", "value": "a\\ud800b"}]}'
    caplog.set_level(logging.WARNING, logger="agui_bridge")
    done = run([[("update_state", arguments)]], {})
    [result] = done.results()
    assert result == (
        "Error: update_state: a lone surrogate ('\\ud800') is not Unicode text; write characters "
        "outside the BMP as a surrogate pair. The state is unchanged."
    )
    assert done.count("invalid") == 1 and not done.deltas()
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_finding_4_a_schema_format_is_enforced() -> None:
    """Finding 4: ``--state-schema``'s ``format`` keywords are checked, not only annotations."""
    schema = {
        "type": "object",
        "properties": {"email": {"format": "email"}, "due": {"format": "date"}},
    }
    bad = [
        {"op": "add", "path": "/email", "value": "nobody"},
        {"op": "add", "path": "/due", "value": "2024-13-45"},
    ]
    good = [
        {"op": "add", "path": "/email", "value": "a@b.example"},
        {"op": "add", "path": "/due", "value": "2024-12-31"},
    ]
    done = run([update_state(bad), update_state(good)], {}, state_schema=schema)
    refused, applied = done.results()
    assert refused == (
        "Error: update_state: the new state breaks the schema: email: 'nobody' is not a 'email'; "
        "due: '2024-13-45' is not a 'date'. The state is unchanged."
    )
    assert applied.startswith("State updated.")
    assert done.count("schema") == 1 and done.count("applied") == 1
    assert followed({}, done.frames) == {"email": "a@b.example", "due": "2024-12-31"}
