"""Shared state in CopilotKit for real: ``tests/browser/copilotkit-state.test.mjs`` drives the
example's shared-state page (``examples/copilotkit/``, ``/state``: a to-do list and a document
rendered from the agent's state, the page's ``write_document`` tool) in Debian's Chromium, through
CopilotRuntime and directly.

The bridge runs with ``--shared-state`` and ``--predict-state
document=write_document.document``; the scripted upstream paces its chunks so that a tool call's
arguments reach the page over many browser tasks. In the page: "Add a to-do: …" shows the to-do
while the run goes on (the bridge's ``update_state``, then ``STATE_DELTA``); "Mark … done" ticks
it; "Please write_document about the cake" fills the document panel piece by piece while the model
writes the call (CopilotKit's PredictState listener), then whole (the page's handler). Here: what
the upstream was shown, each turn's state as the page sent it back.

The page is photographed to ``tests/artifacts/copilotkit-state.png``. The example is built and
served, and the browser tests' packages installed, as ``test_copilotkit.py`` does (its helpers).
"""

from __future__ import annotations

import json
import os
from typing import Any

from copilotkit_example import (
    ARTIFACTS,
    BROWSER_TESTS,
    example_server,
    question,
    ready_for_chromium,
    roles,
)
from node_tools import check_tap, run
from servers import free_port, scripted_stack

WIRINGS = ("runtime", "direct")
MODEL = "scripted-reasoning-content"
#: Seconds between the scripted upstream's chunks: a stream takes many browser tasks.
PACE = 0.02
PREDICTED = (("document", "write_document", "document"),)
ADD_PROMPT = "Add a to-do: water the plants"
DONE_PROMPT = "Mark water the plants done"
DOCUMENT_PROMPT = "Please write_document about the cake"
#: What the scripted model writes as the document: the prompt (its stand-in for any string).
DOCUMENT = DOCUMENT_PROMPT
#: The system message the bridge shows the state in (bridge.serve.tools.state.state_prompt).
STATE_INTRO = "Shared state (JSON)"


def test_copilotkit_shows_the_shared_state_and_its_predicted_document() -> None:
    node = ready_for_chromium()
    (ARTIFACTS / "copilotkit-state.png").unlink(missing_ok=True)

    app_port = free_port()
    app_origin = f"http://127.0.0.1:{app_port}"
    with (
        scripted_stack(
            pace=PACE,
            cors_origins=(app_origin,),
            shared_state=True,
            predict_state=PREDICTED,
        ) as stack,
        example_server(stack.bridge_url, app_port),
    ):
        env = {
            **os.environ,
            "APP_URL": f"{app_origin}/state",
            "MODEL": MODEL,
            "WIRINGS": ",".join(WIRINGS),
            "ARTIFACTS_DIR": str(ARTIFACTS),
        }
        output = run(
            [node, "--test", "--test-reporter=tap", "copilotkit-state.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=180,
            what="the CopilotKit shared-state browser test",
        )
        requests = list(stack.upstream_requests)

    check_tap(output, "the shared-state test", len(WIRINGS))

    for request in requests:
        offered = sorted(tool["function"]["name"] for tool in request["tools"])
        assert offered == ["update_state", "write_document"], request["tools"]
    # Per wiring: each to-do turn is the question and, in the same run, the model's follow-up
    # once the bridge ran update_state; the document turn is the question, then (the page ran
    # write_document) CopilotKit's follow-up run.
    turns = [(ADD_PROMPT, 2), (DONE_PROMPT, 2), (DOCUMENT_PROMPT, 2)]
    expected = [prompt for prompt, count in turns for _ in range(count)] * len(WIRINGS)
    assert [_lastquestion(r) for r in requests] == expected, [roles(r) for r in requests]
    empty = {"todos": [], "document": ""}
    added = {"todos": [{"text": "water the plants", "done": False}], "document": ""}
    ticked = {"todos": [{"text": "water the plants", "done": True}], "document": ""}
    written = {**ticked, "document": DOCUMENT}
    for add, add_follow_up, done, done_follow_up, write, write_follow_up in zip(
        *[iter(requests)] * 6, strict=True
    ):
        # Within a run the model is shown the state the run began with; update_state's result
        # says what it is now.
        assert _state(add) == _state(add_follow_up) == empty
        assert _tool_result(add_follow_up) == f"State updated. The state is now: {_dumped(added)}"
        # The second turn carried the state the first one left: the model found the to-do.
        assert _state(done) == _state(done_follow_up) == added
        assert _tool_result(done_follow_up) == f"State updated. The state is now: {_dumped(ticked)}"
        assert _state(write) == ticked
        assert roles(write)[-1] == "user"
        # The page ran write_document, whose handler put the whole document in the state.
        [call] = _conversation_tail(write_follow_up)[0]["tool_calls"]
        assert call["function"]["name"] == "write_document"
        assert json.loads(call["function"]["arguments"]) == {"document": DOCUMENT}
        assert _state(write_follow_up) == written
        # One conversation per page: its last request carries the whole of it.
        assert question(write_follow_up) == ADD_PROMPT

    assert (ARTIFACTS / "copilotkit-state.png").stat().st_size > 10_000, "no screenshot"


def _lastquestion(request: dict[str, Any]) -> str:
    """The last user message's text: which turn a request belongs to."""
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    return str(users[-1])


def _state(request: dict[str, Any]) -> Any:
    """The state the bridge showed the model (its system message), or None."""
    for message in request["messages"]:
        content = message.get("content")
        if message["role"] == "system" and str(content).startswith(STATE_INTRO):
            return json.loads(content.split("\n")[1])
    return None


def _conversation_tail(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages after the last user message."""
    messages = request["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return list(messages[last_user + 1 :])


def _tool_result(request: dict[str, Any]) -> str:
    """The one tool result after the last user message."""
    [result] = [m for m in _conversation_tail(request) if m["role"] == "tool"]
    return str(result["content"])


def _dumped(value: Any) -> str:
    """JSON as the bridge writes a state: compact, keys sorted."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
