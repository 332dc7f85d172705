"""CopilotKit answers a server tool's question (issue 43, point 4): the scripted model's
``ask_user`` call (``--ask-user``) ends the run with an ``input_required`` interrupt, the example's
``useInterrupt`` card (``examples/copilotkit/src/question_card.tsx``) shows a form made from its
schema, and Send resumes the run; the answer is the call's result upstream, once, and the model
quotes it. Through both wirings (CopilotRuntime, and the page's own HttpAgent), in Debian's
Chromium (``tests/browser/copilotkit-ask.test.mjs``)."""

from __future__ import annotations

import json
import os

from bridge.cli.demo.script import ASK_USER_ARGUMENTS
from copilotkit_example import ARTIFACTS, BROWSER_TESTS, example_server, ready_for_chromium
from node_tools import check_tap, run
from servers import free_port, scripted_stack

WIRINGS = ("runtime", "direct")
#: What the test fills in the form.
ANSWER = {"date": "2026-12-01", "time": "19:00", "seats": 2}


def test_copilotkit_answers_a_question_in_chromium() -> None:
    node = ready_for_chromium()
    app_port = free_port()
    app_origin = f"http://127.0.0.1:{app_port}"
    with (
        scripted_stack(cors_origins=(app_origin,), ask_user=True) as stack,
        example_server(stack.bridge_url, app_port),
    ):
        env = {
            **os.environ,
            "APP_URL": f"{app_origin}/",
            "WIRINGS": ",".join(WIRINGS),
            "ARTIFACTS_DIR": str(ARTIFACTS),
        }
        output = run(
            [node, "--test", "--test-reporter=tap", "copilotkit-ask.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=240,
            what="the CopilotKit browser test",
        )
        requests = list(stack.upstream_requests)
    check_tap(output, "the CopilotKit test", len(WIRINGS))
    # Per wiring: the turn that asks, then the one after the answer, whose history holds the
    # call once and its result once: the answer, not CopilotKit's copy of it beside it.
    asked = [r for r in requests if r["messages"][-1]["role"] == "user"]
    assert len(asked) == len(WIRINGS)
    after = [r for r in requests if r["messages"][-1]["role"] == "tool"]
    assert len(after) == len(WIRINGS)
    for request in after:
        calls = [c for m in request["messages"] for c in m.get("tool_calls") or []]
        assert [c["function"]["name"] for c in calls] == ["ask_user"]
        assert json.loads(calls[0]["function"]["arguments"]) == ASK_USER_ARGUMENTS
        results = [m for m in request["messages"] if m["role"] == "tool"]
        assert [json.loads(m["content"]) for m in results] == [ANSWER]
