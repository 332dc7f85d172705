"""The official AG-UI client (``@ag-ui/client`` in Node), every line still in use, runs every
scripted model through the bridge.

``tests/node/client.test.mjs`` does the runs and the client-side checks; this test starts the
servers, runs it once per client line, and checks what reached the upstream. The lines are the
``ag-ui-client-<version>`` aliases in ``tests/node/package.json`` (1.0.0; 0.0.59, which CopilotKit
1.74 / runtime 1.75 pin; 0.0.52): a new line is one dependency there. Node is required, not
optional: ``make test`` must prove the real clients accept our streams.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.cli.demo import SCRIPTED_MODELS
from bridge.cli.demo.responses import chat_request, encrypt
from bridge.cli.demo.script import write_script
from bridge.serve.run.resume import ALREADY_RUN_STATEMENT
from node_tools import require, run
from servers import scripted_stack

NODE_DIR = Path(__file__).resolve().parent / "node"
NODE_TEST = "client.test.mjs"
PLAIN_MODEL = "scripted-plain"
#: Runs per model in client.test.mjs: tool calls, the answer from their results, a greeting.
RUNS_PER_MODEL = 3
_ALIAS = "ag-ui-client-"
#: The client lines the matrix runs: every ``ag-ui-client-<version>`` in package.json.
CLIENT_LINES = sorted(
    (
        name.removeprefix(_ALIAS)
        for name in json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
        if name.startswith(_ALIAS)
    ),
    key=lambda version: tuple(int(part) for part in version.split(".")),
    reverse=True,
)


def test_the_matrix_has_every_line_in_use() -> None:
    assert {"1.0.0", "0.0.59", "0.0.52"} <= set(CLIENT_LINES)


@pytest.mark.parametrize("client", CLIENT_LINES)
def test_official_client_accepts_every_scripted_model(client: str) -> None:
    with scripted_stack() as stack:
        _client_run(stack.bridge_url, SCRIPTED_MODELS, client)
        requests = list(stack.upstream_requests)

    assert len(requests) == RUNS_PER_MODEL * len(SCRIPTED_MODELS), "one upstream request per run"
    for model in SCRIPTED_MODELS:
        _check_tool_loop_requests(model, [r for r in requests if r["model"] == model])


def get_time() -> str:
    """The time where the bridge runs (fixed here: the tests compare it)."""
    return "12:00"


#: The mixed turn's models: a reasoning field, tags in the content, a text-written call, none.
SERVER_TOOL_MODELS = (
    "scripted-reasoning-content",
    "scripted-think-tags",
    "scripted-hermes-text",
    PLAIN_MODEL,
)


@pytest.mark.parametrize("client", CLIENT_LINES)
def test_official_client_with_a_server_tool_and_a_frontend_tool(client: str) -> None:
    """One turn calls the bridge's get_time and the page's change_background: the client keeps
    the server's result (the string, not JSON text) as a tool message, only the frontend call is
    left to the page, and the follow-up run sends both results back (the server's byte for
    byte), the same bytes upstream when the client keeps the server's result JSON-encoded."""
    with scripted_stack(tools=[get_time]) as stack:
        output = _client_run(
            stack.bridge_url,
            SERVER_TOOL_MODELS,
            client,
            AGUI_SERVER_TOOL="get_time",
            AGUI_SERVER_RESULT=get_time(),
        )
        requests = list(stack.upstream_requests)
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) == len(SERVER_TOOL_MODELS), output
    # Per model: the mixed turn (ended with the frontend call pending), the answer, and the
    # answer again from a history holding the server's result JSON-encoded.
    assert len(requests) == 3 * len(SERVER_TOOL_MODELS)
    for at in range(0, len(requests), 3):
        _, as_stored, encoded = requests[at : at + 3]
        results = [m["content"] for m in _tool_messages(as_stored)]
        assert results[0] == get_time(), as_stored["model"]
        assert json.dumps(encoded) == json.dumps(as_stored), as_stored["model"]


#: The clients that keep interrupts pending and send ``resume`` (0.0.52 knows neither).
APPROVAL_LINES = ("1.0.0", "0.0.59")
APPROVAL_MODELS = ("scripted-reasoning-content", PLAIN_MODEL)


@pytest.mark.parametrize("client", APPROVAL_LINES)
def test_official_client_approves_edits_denies_and_cancels_a_server_tool(client: str) -> None:
    """A server tool under approval: the client keeps the interrupt, refuses a run that does
    not answer it, and resumes with the same thread; approved (as it was or edited), the tool
    runs once and its result answers the original call; denied or cancelled, the model is told
    and nothing runs; a later turn sends the call back with that one result."""
    sent: list[str] = []

    def send_mail(to: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return f"mail sent to {to}"

    secret = "node-approvals-Qx7Vb2Kp9Lm4Nz8Rt1"
    with scripted_stack(tools=[send_mail], approve=("send_mail",), secret=secret) as stack:
        output = _client_run(
            stack.bridge_url, APPROVAL_MODELS, client, AGUI_APPROVAL_TOOL="send_mail"
        )
        requests = list(stack.upstream_requests)
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    cases = 4  # approved, edited, denied, cancelled (APPROVAL_CASES in client.test.mjs)
    assert passed and int(passed.group(1)) == cases * len(APPROVAL_MODELS), output
    # Once per approval, never for a denial or a cancel; the edit's arguments as edited.
    assert len(sent) == 2 * len(APPROVAL_MODELS)
    assert sent.count("bob@example.com") == len(APPROVAL_MODELS)
    # Per case: the run that ended with the interrupt, the resumed one, and a later turn.
    assert len(requests) == 3 * cases * len(APPROVAL_MODELS)
    contents = [m["content"] for r in requests for m in _tool_messages(r)]
    # Each result goes up twice: in the resumed run and in the later turn.
    assert contents.count("The user declined: not now") == 2 * len(APPROVAL_MODELS)
    assert sum(c.startswith("mail sent to ") for c in contents) == 2 * 2 * len(APPROVAL_MODELS)


@pytest.mark.parametrize("client", APPROVAL_LINES)
def test_official_client_resuming_an_approval_twice_runs_the_tool_once(client: str) -> None:
    """Two agents holding the same thread resume one interrupt with an approval, one after the
    other (a replay) and at once (a double click, a retried POST): the tool runs once per
    approval; the other run's result says it ran already, and the client accepts both runs to
    a normal RUN_FINISHED (client.test.mjs checks every run)."""
    sent: list[str] = []

    def send_mail(to: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return f"mail sent to {to}"

    with scripted_stack(tools=[send_mail], approve=("send_mail",)) as stack:
        output = _client_run(
            stack.bridge_url,
            APPROVAL_MODELS,
            client,
            AGUI_APPROVAL_TOOL="send_mail",
            AGUI_ALREADY_RUN=ALREADY_RUN_STATEMENT,
        )
        requests = list(stack.upstream_requests)
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    approvals = 2  # resumed in a row, and at once
    assert passed and int(passed.group(1)) == approvals * len(APPROVAL_MODELS), output
    assert len(sent) == approvals * len(APPROVAL_MODELS), "once per approval"
    # Per approval: the run that ended with the interrupt, and both resumed runs, which go on
    # to the model with the call's one result each: the real one, and the statement.
    assert len(requests) == 3 * approvals * len(APPROVAL_MODELS)
    results = [[m["content"] for m in _tool_messages(r)] for r in requests]
    resumed = [contents for contents in results if contents]
    assert len(resumed) == 2 * approvals * len(APPROVAL_MODELS)
    assert all(len(contents) == 1 for contents in resumed), resumed
    told = sorted(contents[0] for contents in resumed)
    ran = [f"mail sent to {to}" for to in sent]
    assert told == sorted([ALREADY_RUN_STATEMENT] * len(sent) + ran)


#: The clients the shared-state test runs: the newest, and CopilotKit's and assistant-ui's line.
#: 0.0.52 cannot apply a STATE_DELTA under Node: its ESM build does ``import * as a from
#: "fast-json-patch"`` (a CommonJS module), so ``a.applyPatch`` is undefined and every delta is a
#: warning ("Failed to apply state patch"); 0.0.59 imports the default.
STATE_LINES = ("1.0.0", "0.0.59")
STATE_MODELS = ("scripted-reasoning-content", PLAIN_MODEL)
INITIAL_STATE = {"todos": [{"text": "buy milk", "done": False}]}
PREDICT_STATE = (("steps", "update_state", "patch"),)
#: The plan the scripted model writes for "Make a plan to bake a cake", ticked off.
PLAN_DONE = [
    {"description": description, "status": "completed"}
    for description in (
        "Get ready to bake a cake",
        "Bake a cake",
        "Check the result",
    )
]


@pytest.mark.parametrize("client", STATE_LINES)
def test_official_client_follows_the_shared_state(client: str) -> None:
    """An agent with an initial state, against --shared-state and --predict-state: the client
    takes every STATE_DELTA, the STATE_SNAPSHOT and the CUSTOM PredictState (client.test.mjs
    checks them against agent.state), and the next run sends upstream the state it holds."""
    predict = [
        {"state_key": key, "tool": tool, "tool_argument": argument}
        for key, tool, argument in PREDICT_STATE
    ]
    with scripted_stack(shared_state=True, predict_state=PREDICT_STATE) as stack:
        output = _client_run(
            stack.bridge_url,
            STATE_MODELS,
            client,
            AGUI_SHARED_STATE=json.dumps(INITIAL_STATE),
            AGUI_PREDICT_STATE=json.dumps(predict),
        )
        requests = list(stack.upstream_requests)
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) == len(STATE_MODELS), output
    # Per model: the plan and its three ticks, then the answer; the to-do, then the answer.
    turns = 5 + 2
    assert len(requests) == turns * len(STATE_MODELS)
    for at in range(0, len(requests), turns):
        plan, todo = requests[at], requests[at + 5]
        assert {r["model"] for r in requests[at : at + turns]} == {plan["model"]}
        assert _shown_state(plan) == INITIAL_STATE, plan["model"]
        assert _shown_state(todo) == {**INITIAL_STATE, "steps": PLAN_DONE}, todo["model"]
        assert todo["messages"][-1] == {"role": "user", "content": "Add a to-do: water the plants"}


def _shown_state(request: dict[str, Any]) -> Any:
    """The state the bridge showed the model: the JSON line of its "Shared state" message."""
    [shown] = [
        m["content"]
        for m in request["messages"]
        if m["role"] == "system" and m["content"].startswith("Shared state (JSON)")
    ]
    return json.loads(shown.split("\n")[1])


#: Over the Responses API: summary parts, raw reasoning text, and no reasoning at all.
RESPONSES_MODELS = ("scripted-reasoning-content", "scripted-reasoning", PLAIN_MODEL)


@pytest.mark.parametrize("client", CLIENT_LINES)
def test_official_client_over_the_responses_api(client: str) -> None:
    """Two-run tool round trips through a Responses API upstream: the client keeps the encrypted
    reasoning on its reasoning message, and run 2 hands it to the upstream as a reasoning item."""
    with scripted_stack(upstream_api="responses") as stack:
        _client_run(stack.bridge_url, RESPONSES_MODELS, client, AGUI_API="responses")
        requests = list(stack.upstream_requests)
    assert len(requests) == RUNS_PER_MODEL * len(RESPONSES_MODELS)
    for model in RESPONSES_MODELS:
        mine = [r for r in requests if r["model"] == model]
        first = next(r for r in mine if "tools" in r and len(r["input"]) == 1)
        second = next(
            r for r in mine if any(i.get("type") == "function_call_output" for i in r["input"])
        )
        items = [i for i in second["input"] if i.get("type") == "reasoning"]
        if model == PLAIN_MODEL:
            assert items == []
            continue
        assert len(items) == 1, model
        reasoned = "".join(write_script(chat_request(first)).reasoning)
        assert items[0]["encrypted_content"] == encrypt(reasoned), model
        assert second["store"] is False


MCP_UI_SERVER = Path(__file__).resolve().parent / "mcp_ui_server.py"
#: The models that call the MCP App's UI tool: reasoning in a field, and none.
MCP_APP_MODELS = ("scripted-reasoning-content", PLAIN_MODEL)


@pytest.mark.parametrize("client", CLIENT_LINES)
def test_official_client_with_an_mcp_app(client: str) -> None:
    """An MCP App's UI tool (``--mcp ui=…``, tests/mcp_ui_server.py): every line accepts the
    ``mcp-apps`` ACTIVITY_SNAPSHOT and keeps it as an activity message (never sent back), and
    takes the widget's proxied runs (resources/read, tools/call, a refusal) as results, adding
    no message; only the model's runs reach the upstream."""
    pytest.importorskip("mcp")
    from mcp_ui_server import HTML

    with scripted_stack(mcp_servers={"ui": f"{sys.executable} {MCP_UI_SERVER}"}) as stack:
        output = _client_run(
            stack.bridge_url,
            MCP_APP_MODELS,
            client,
            AGUI_MCP_APP_TOOL="ui__board",
            AGUI_MCP_APP_HTML=HTML,
        )
        requests = list(stack.upstream_requests)
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) == 2 * len(MCP_APP_MODELS), output
    # Per model: the tool's turn (the call, then the answer in the same run) and a later turn in
    # the first test; the tool's turn in the second. The widget's three runs reach no model.
    assert len(requests) == (2 + 1 + 2) * len(MCP_APP_MODELS)
    offered = {t["function"]["name"] for t in requests[0]["tools"]}
    assert offered == {"ui__board", "ui__plain"}


def test_official_client_ignores_keep_alive_comments() -> None:
    """Keep-alive comments between every chunk: the official client must not mind them."""
    model = "scripted-openrouter"
    with scripted_stack(pace=0.02, keepalive_interval=0.005) as stack:
        body = {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": "Hi"}],
        }
        assert b": keep-alive" in httpx.post(f"{stack.bridge_url}/", json=body, timeout=30).content
        _client_run(stack.bridge_url, [model], "1.0.0")


def _check_tool_loop_requests(model: str, requests: list[dict[str, Any]]) -> None:
    """Run 2 sent back one assistant message with both parallel calls, its reasoning and results."""
    assert len(requests) == RUNS_PER_MODEL, model
    firsts = [r for r in requests if "tools" in r and not _tool_messages(r)]
    seconds = [r for r in requests if _tool_messages(r)]
    assert len(firsts) == len(seconds) == 1, model
    first, second = firsts[0], seconds[0]

    assistants = [m for m in second["messages"] if m["role"] == "assistant"]
    assert len(assistants) == 1, f"{model}: the turn's tool calls are split: {assistants}"
    assistant = assistants[0]
    calls = assistant["tool_calls"]
    assert sorted(c["function"]["name"] for c in calls) == ["change_background", "get_weather"]
    assert [m["tool_call_id"] for m in _tool_messages(second)] == [c["id"] for c in calls]
    if model == PLAIN_MODEL:
        assert "reasoning_content" not in assistant
    else:
        # The client sent its reasoning message back, and the bridge attached it to the turn's
        # assistant message: what the scripted model reasoned in run 1 (field dialects keep a
        # newline before the answer that tag dialects strip, as llama.cpp's parser does).
        reasoned = "".join(write_script(first).reasoning)
        sent = assistant.get("reasoning_content") or ""
        assert sent.rstrip("\n") == reasoned, f"{model}: run 1's reasoning was not sent back"


def _client_run(bridge_url: str, models: Sequence[str], client: str, **env: str) -> str:
    """client.test.mjs with one client line against the bridge; its TAP output, or a test
    failure unless every Node test passed (the summary, not only the exit code: a file that
    defines no test exits 0 too)."""
    node = _require("node")
    _require_node_modules()
    output = _run(
        [node, "--test", "--test-reporter=tap", NODE_TEST],
        env={
            **os.environ,
            "AGUI_BRIDGE_URL": f"{bridge_url}/",
            "AGUI_MODELS": ",".join(models),
            "AGUI_CLIENT": client,
            **env,
        },
        timeout=180,
        what="node",
    )
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    if not re.search(r"^# fail 0$", output, re.MULTILINE) or not passed or passed[1] == "0":
        pytest.fail(f"node reported failures or ran no test:\n{output}", pytrace=False)
    return output


def _tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def _require_node_modules() -> None:
    if all((NODE_DIR / "node_modules" / f"{_ALIAS}{line}").is_dir() for line in CLIENT_LINES):
        return
    npm = _require("npm")
    _run([npm, "ci", "--no-audit", "--no-fund"], env=None, timeout=300, what="npm ci")


def _require(program: str) -> str:
    return require(
        program, "this test runs the official AG-UI client and needs Node.js 20 or newer with npm"
    )


def _run(command: list[str], *, env: dict[str, str] | None, timeout: float, what: str) -> str:
    return run(command, cwd=NODE_DIR, env=env, timeout=timeout, what=what)
