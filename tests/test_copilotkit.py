"""CopilotKit for real: ``tests/browser/copilotkit.test.mjs`` drives the CopilotKit example
(``examples/copilotkit/``: React, ``@copilotkit/react-core`` v2, ``@copilotkit/runtime``) in
Debian's Chromium, for several scripted models, through CopilotRuntime and directly.

This test builds the example when needed, starts a scripted stack (upstream + bridge, the bridge
open to the example's origin for the direct wiring, with two server tools: ``get_time`` and the
demo's ``send_email``, which waits for approval) and the example's server, runs the Node test, then
checks what the upstream received: the tool loop's follow-up and the second turn carried the
history CopilotKit kept (reasoning, tool calls, tool results, the answer); in the mixed turn, the
bridge's result came back before the page's. A turn of interleaved thinking (reasoning, text,
reasoning again, text again) shows in the order produced. In the approval conversation (approved
on the card, then another call denied, then a third turn), the resumed runs sent the tool's result
or the refusal upstream, and the third turn sent each call with one answer: the statement the
bridge puts in place of CopilotKit's ``{"approved": …}`` message, never that message. An Approve
clicked twice (a double click, two fast clicks) sent one email: the bridge's
``agui_bridge_tool_calls_total`` counts one run per approval, and every other resume that reached
it was answered as already run.

``tests/browser/copilotkit-mcp-app.test.mjs`` shows an MCP App in the same page: the bridge runs
``examples/mcp_app_server.py`` as ``app``; CopilotKit renders the counter widget ``app__counter``
returns and the widget's clicks reach the server's ``increment`` through the bridge, never the
model.

``AGUI_UPDATE_SCREENSHOT=1`` also copies the screenshots the tests took to ``docs/copilotkit.png``,
``docs/copilotkit-approval.png`` and ``docs/copilotkit-mcp-app.png``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bridge.cli.demo.dialects import thought_signature
from bridge.cli.demo.tools import send_email
from bridge.serve.run.resume import ALREADY_RUN_STATEMENT, APPROVED_STATEMENT
from copilotkit_example import (
    ARTIFACTS,
    BROWSER_TESTS,
    EXAMPLE,
    ROOT,
    WHY,
    build_example,
    example_server,
    npm_install_example,
    question,
    ready_for_chromium,
    roles,
)
from helpers import tool_call_counts
from node_tools import check_tap, require, require_node, run
from servers import ASK_TOOLS, free_port, scripted_stack

SCREENSHOT = ROOT / "docs" / "copilotkit.png"
APPROVAL_SCREENSHOT = ROOT / "docs" / "copilotkit-approval.png"
MCP_APP_SCREENSHOT = ROOT / "docs" / "copilotkit-mcp-app.png"
MCP_APP_SERVER = ROOT / "examples" / "mcp_app_server.py"
#: The models run in both wirings: reasoning in either field, in tags, in both (deepseek-legacy),
#: signed (OpenRouter), in harmony channels; tool calls as calls or as text; no reasoning at all.
MODELS = (
    "scripted-reasoning-content",
    "scripted-reasoning",
    "scripted-think-tags",
    "scripted-deepseek-legacy",
    "scripted-openrouter",
    "scripted-hermes-text",
    "scripted-harmony-text",
    "scripted-plain",
    "scripted-gemini",
)
REASONING_FREE = ("scripted-plain",)
#: Models whose reasoning comes signed: the signature must survive CopilotKit's history.
SIGNED_REASONING = ("scripted-openrouter",)
#: Models whose first tool call of a step comes signed (Gemini 3's thought signature): the
#: scripted upstream refuses the follow-up without it, as Gemini does.
SIGNED_CALLS = ("scripted-gemini",)
WIRINGS = ("runtime", "direct")
TOOL_CALLS = [("get_weather", {"city": "Paris"}), ("change_background", {"color": "lightblue"})]
#: Models that also run the mixed turn (both wirings): the bridge's get_time beside the page's
#: change_background. Tool calls as calls and as text.
MIXED_MODELS = ("scripted-reasoning-content", "scripted-hermes-text")
MIXED_PROMPT = "What time is it? And make the background lightblue."
MIXED_CALLS = [("change_background", {"color": "lightblue"}), ("get_time", {})]
OFFERED = ["change_background", "get_time", "get_weather", "send_email"]
#: Models that also run a turn of interleaved thinking (both wirings): reasoning, text, reasoning
#: again, text again, each shown in the order produced. Reasoning in a field, and in tags.
INTERLEAVED_MODELS = ("scripted-reasoning-content", "scripted-think-tags")
INTERLEAVE_PROMPT = "Please interleave your thinking."
#: Models that also run the approval conversation (both wirings): send_email approved on the card,
#: another one denied with a reason, then a third turn. Tool calls as calls and as text.
APPROVAL_MODELS = ("scripted-reasoning-content", "scripted-hermes-text")
EMAIL_PROMPT = "Email alice@example.com that the demo works."
EMAIL_SENT = 'Sent to alice@example.com: "The demo works"'
DENIED_PROMPT = "Email bob@example.com that the demo is late."
DECLINED = "The user declined: not to Bob"
#: The call to Carol, approved with the arguments edited to Dave: Dave's result upstream.
EDIT_PROMPT = "Email carol@example.com that the plan changed."
EDITED_SENT = 'Sent to dave@example.com: "The plan changed"'
#: The call to Erin, whose Approve is clicked twice (a double click, two fast clicks), for the
#: first approval model in both wirings: one email each time.
TWICE_PROMPT = "Email erin@example.com that Approve was clicked twice."
TWICE_SENT = 'Sent to erin@example.com: "Approve was clicked twice"'
DOUBLE_CLICKED = 2 * len(WIRINGS)
#: The MCP App test's models (both wirings): tool calls as calls and as text.
MCP_APP_MODELS = ("scripted-reasoning-content", "scripted-hermes-text")
MCP_APP_PROMPT = "Show me the app__counter, please."
#: What app__counter returns as text (the widget's increment is not offered to the model).
COUNTER_TEXT = "The counter shows 1. Click +1 in the widget to add one."
MCP_APP_OFFERED = ["app__counter", "change_background", "get_weather"]


def get_time() -> str:
    """The current time."""
    return "12:00"


#: get_time's result as the bridge sends it (TOOL_CALL_RESULT: the string, not JSON text) and as
#: it must come back upstream.
SERVER_TIME = get_time()


def test_copilotkit_example_in_chromium() -> None:
    node = ready_for_chromium()
    for name in ("copilotkit.png", "copilotkit-approval.png"):
        (ARTIFACTS / name).unlink(missing_ok=True)

    app_port = free_port()
    app_origin = f"http://127.0.0.1:{app_port}"
    with (
        # Every turn's reasoning goes upstream, so the second turn shows what CopilotKit sent back.
        scripted_stack(
            cors_origins=(app_origin,),
            reasoning_scope="all",
            tools=[get_time, send_email],
            metrics=True,
        ) as stack,
        example_server(stack.bridge_url, app_port),
    ):
        env = {
            **os.environ,
            "APP_URL": f"{app_origin}/",
            "MODELS": ",".join(MODELS),
            "MIXED_MODELS": ",".join(MIXED_MODELS),
            "REASONING_FREE": ",".join(REASONING_FREE),
            "INTERLEAVED_MODELS": ",".join(INTERLEAVED_MODELS),
            "APPROVAL_MODELS": ",".join(APPROVAL_MODELS),
            "ARTIFACTS_DIR": str(ARTIFACTS),
        }
        output = run(
            [node, "--test", "--test-reporter=tap", "copilotkit.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=240,
            what="the CopilotKit browser test",
        )
        requests = list(stack.upstream_requests)
        metrics = httpx.get(f"{stack.bridge_url}/metrics", timeout=10).text

    cases = len(MODELS) + len(MIXED_MODELS) + len(INTERLEAVED_MODELS) + 2 * len(APPROVAL_MODELS)
    check_tap(output, "the CopilotKit test", cases * len(WIRINGS) + DOUBLE_CLICKED)

    for request in requests:
        offered = sorted(tool["function"]["name"] for tool in request["tools"])
        assert offered == OFFERED, request["tools"]
    for model in MODELS:
        asked = [r for r in requests if r.get("model") == model]
        _check_upstream_saw(model, [r for r in asked if question(r) == ASK_TOOLS])
        mixed = [r for r in asked if question(r) == MIXED_PROMPT]
        if model in MIXED_MODELS:
            _check_mixed_turn(model, mixed)
        else:
            assert mixed == [], model
        interleaved = [r for r in asked if question(r) == INTERLEAVE_PROMPT]
        # One request per wiring: the whole turn is one model response, nothing follows it.
        expected = [["user"]] * len(WIRINGS) if model in INTERLEAVED_MODELS else []
        assert [roles(r) for r in interleaved] == expected, model
        emails = [r for r in asked if question(r) == EMAIL_PROMPT]
        edits = [r for r in asked if question(r) == EDIT_PROMPT]
        if model in APPROVAL_MODELS:
            _check_approvals(model, emails)
            _check_edit(edits)
        else:
            assert emails == edits == [], model
    resumed = _check_double_clicked([r for r in requests if question(r) == TWICE_PROMPT])
    # One email per approval: approved and edited per model and wiring, and each double click.
    runs = tool_call_counts(metrics, "send_email")
    approved = 2 * len(APPROVAL_MODELS) * len(WIRINGS) + DOUBLE_CLICKED
    assert runs.get("ok") == approved, runs
    # A resume beyond the first of a double click (if the page sent one) ran nothing.
    assert runs.get("already_run", 0) == resumed - DOUBLE_CLICKED, runs

    assert (ARTIFACTS / "copilotkit.png").stat().st_size > 10_000, "no screenshot"
    assert (ARTIFACTS / "copilotkit-approval.png").stat().st_size > 10_000, "no approval screenshot"
    if os.environ.get("AGUI_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(ARTIFACTS / "copilotkit.png", SCREENSHOT)
        shutil.copyfile(ARTIFACTS / "copilotkit-approval.png", APPROVAL_SCREENSHOT)


def test_copilotkit_shows_an_mcp_app_and_its_clicks_reach_the_server() -> None:
    """The bridge runs the MCP Apps example; in both wirings CopilotKit shows its counter widget,
    whose clicks call ``increment`` through the bridge (runs the model never sees: the upstream
    gets only the turn's question, its follow-up and the next turn)."""
    node = ready_for_chromium()
    (ARTIFACTS / "copilotkit-mcp-app.png").unlink(missing_ok=True)

    app_port = free_port()
    app_origin = f"http://127.0.0.1:{app_port}"
    with (
        scripted_stack(
            cors_origins=(app_origin,),
            mcp_servers={"app": f"python {MCP_APP_SERVER}"},
            metrics=True,
        ) as stack,
        example_server(stack.bridge_url, app_port),
    ):
        env = {
            **os.environ,
            "APP_URL": f"{app_origin}/",
            "MCP_APP_MODELS": ",".join(MCP_APP_MODELS),
            "ARTIFACTS_DIR": str(ARTIFACTS),
        }
        output = run(
            [node, "--test", "--test-reporter=tap", "copilotkit-mcp-app.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=180,
            what="the CopilotKit MCP App browser test",
        )
        requests = list(stack.upstream_requests)
        metrics = httpx.get(f"{stack.bridge_url}/metrics", timeout=10).text

    check_tap(output, "the MCP App test", len(MCP_APP_MODELS) * len(WIRINGS))

    for request in requests:
        offered = sorted(tool["function"]["name"] for tool in request["tools"])
        assert offered == MCP_APP_OFFERED, request["tools"]
    for model in MCP_APP_MODELS:
        asked = [r for r in requests if r.get("model") == model]
        turn = ["user", "assistant", "tool"]
        assert [roles(r) for r in asked] == [["user"], turn, [*turn, "assistant", "user"]] * len(
            WIRINGS
        ), [roles(r) for r in asked]
        for request in asked:
            assert question(request) == MCP_APP_PROMPT
            if len(roles(request)) > 1:
                _, calling, result = _conversation(request)[:3]
                [call] = calling["tool_calls"]
                assert call["function"]["name"] == "app__counter"
                assert json.loads(call["function"]["arguments"]) == {"start": 1}
                assert result == {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": COUNTER_TEXT,
                }
    # Per page: the widget read once, then two clicks, each a tools/call; all answered.
    proxied = {
        (sample.labels["method"], sample.labels["outcome"]): sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "agui_bridge_proxied_mcp_requests_total"
        and sample.labels["server"] == "app"
    }
    pages = len(MCP_APP_MODELS) * len(WIRINGS)
    assert proxied == {("resources/read", "ok"): pages, ("tools/call", "ok"): 2 * pages}, proxied

    assert (ARTIFACTS / "copilotkit-mcp-app.png").stat().st_size > 10_000, "no screenshot"
    if os.environ.get("AGUI_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(ARTIFACTS / "copilotkit-mcp-app.png", MCP_APP_SCREENSHOT)


#: The model the attachments test asks (tests/browser/copilotkit-attachments.test.mjs).
ATTACHMENTS_MODEL = "scripted-reasoning-content"


def test_copilotkit_attachments_reach_the_upstream() -> None:
    """Issue 41, point 6: in both wirings, an image, a PDF, a text file and an audio clip picked
    in CopilotChat reach the upstream as ``image_url``, ``file`` (with its name), text (with
    its name) and ``input_audio``; the browser test reads the scripted model's answer naming
    each with the size it received."""
    node = ready_for_chromium()
    app_port = free_port()
    app_origin = f"http://127.0.0.1:{app_port}"
    with (
        scripted_stack(cors_origins=(app_origin,)) as stack,
        example_server(stack.bridge_url, app_port),
    ):
        env = {**os.environ, "APP_URL": f"{app_origin}/", "MODEL": ATTACHMENTS_MODEL}
        output = run(
            [node, "--test", "--test-reporter=tap", "copilotkit-attachments.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=180,
            what="the CopilotKit attachments browser test",
        )
        requests = list(stack.upstream_requests)

    check_tap(output, "the CopilotKit attachments test", len(WIRINGS))
    for wiring in WIRINGS:
        asked = [r for r in requests if _first_text(r) == f"What did I attach, from {wiring}?"]
        assert len(asked) == 1, [_first_text(r) for r in requests]
        [user] = [m for m in asked[0]["messages"] if m["role"] == "user"]
        text, image, pdf, notes, audio = user["content"]
        assert text == {"type": "text", "text": f"What did I attach, from {wiring}?"}
        assert image["type"] == "image_url"
        assert _data(image["image_url"]["url"], "image/png").startswith(b"\x89PNG")
        assert pdf["type"] == "file"
        assert pdf["file"]["filename"] == "report.pdf"
        assert _data(pdf["file"]["file_data"], "application/pdf").startswith(b"%PDF-1.4")
        assert notes["type"] == "text"
        assert "notes.txt" in notes["text"] and "Call Alice about the demo." in notes["text"]
        assert audio["type"] == "input_audio"
        assert audio["input_audio"]["format"] == "wav"
        assert base64.b64decode(audio["input_audio"]["data"], validate=True).startswith(b"RIFF")


def _first_text(request: dict[str, Any]) -> str:
    """The first user message's text: the string, or its first text part."""
    content = next(m["content"] for m in request["messages"] if m["role"] == "user")
    if isinstance(content, str):
        return content
    return next((p["text"] for p in content if p.get("type") == "text"), "")


def _data(url: str, mime: str) -> bytes:
    """The bytes of a base64 ``data:`` URL of type ``mime``."""
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix), url[:80]
    return base64.b64decode(url[len(prefix) :], validate=True)


def test_copilotkit_example_typechecks() -> None:
    """The example's TypeScript against CopilotKit's and React's own types (esbuild checks none)."""
    require_node(WHY)
    npm_install_example(EXAMPLE, EXAMPLE / "node_modules" / "typescript" / "package.json")
    run(
        [require("npm", WHY), "run", "typecheck"],
        cwd=EXAMPLE,
        env=None,
        timeout=120,
        what="npm run typecheck",
    )


def _check_upstream_saw(model: str, requests: list[dict[str, Any]]) -> None:
    """Per wiring, three requests: the question, the tool loop's follow-up, the second turn."""
    reasons = model not in REASONING_FREE
    assert len(requests) == 3 * len(WIRINGS), [roles(r) for r in requests]
    questions = [r for r in requests if roles(r) == ["user"]]
    follow_ups = [r for r in requests if roles(r) == ["user", "assistant", "tool", "tool"]]
    second_turns = [
        r
        for r in requests
        if roles(r) == ["user", "assistant", "tool", "tool", "assistant", "user"]
    ]
    assert len(questions) == len(follow_ups) == len(second_turns) == len(WIRINGS), [
        roles(r) for r in requests
    ]
    assert sorted(r["messages"][-1]["content"] for r in second_turns) == sorted(
        f"Thanks, that is all from {wiring}" for wiring in WIRINGS
    )

    for request in [*questions, *follow_ups, *second_turns]:
        user, *rest = request["messages"]
        assert user["content"] == ASK_TOOLS
        if not rest:
            continue
        calling, *results = rest[:3]
        # The tool calls as the model made them, each answered by the page's result.
        calls = calling["tool_calls"]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == (
            TOOL_CALLS
        )
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
        weather, background = (json.loads(r["content"]) for r in results)
        assert weather["city"] == "Paris"
        assert background == {"background": "lightblue"}
        # The reasoning CopilotKit kept goes back on the message it preceded, in the tool loop's
        # follow-up and in the next turn.
        if reasons:
            assert "I will call get_weather" in calling.get("reasoning_content", ""), calling
        else:
            assert "reasoning_content" not in calling, calling
        first, second = calls
        if model in SIGNED_CALLS:
            # REASONING_ENCRYPTED_VALUE (subtype tool-call), kept on CopilotKit's call, came
            # back on it as Gemini sent it; the unsigned call went back unsigned.
            signed = {"google": {"thought_signature": thought_signature(first["id"])}}
            assert first.get("extra_content") == signed, first
        assert "extra_content" not in second and (
            model in SIGNED_CALLS or "extra_content" not in first
        )
        if model in SIGNED_REASONING:
            # REASONING_ENCRYPTED_VALUE, kept on CopilotKit's reasoning message, came back.
            assert calling["reasoning_details"][-1].get("signature"), calling
        if request in second_turns:
            answer = rest[3]
            assert answer["content"].startswith("Here is what the tools returned"), answer
            if reasons:
                assert "I will answer with what they said" in answer["reasoning_content"], answer


def _check_mixed_turn(model: str, requests: list[dict[str, Any]]) -> None:
    """Per wiring, two requests: the question, then (once the page ran change_background) the
    follow-up. The bridge ran get_time inside the first run and asked the model nothing more;
    the follow-up carries its result first, byte for byte as the bridge sent it, then the page's."""
    assert [roles(r) for r in requests] == [["user"], ["user", "assistant", "tool", "tool"]] * len(
        WIRINGS
    ), [roles(r) for r in requests]
    for follow_up in requests[1::2]:
        user, calling, *results = follow_up["messages"][-4:]
        assert user["content"] == MIXED_PROMPT
        calls = calling["tool_calls"]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == (
            MIXED_CALLS
        )
        ids = {c["function"]["name"]: c["id"] for c in calls}
        server, frontend = results
        assert server == {"role": "tool", "tool_call_id": ids["get_time"], "content": SERVER_TIME}
        assert frontend["tool_call_id"] == ids["change_background"]
        assert json.loads(frontend["content"]) == {"background": "lightblue"}
        if model not in REASONING_FREE:
            assert "I will call change_background" in calling.get("reasoning_content", ""), calling


def _check_approvals(model: str, requests: list[dict[str, Any]]) -> None:
    """Per wiring, five requests: the email (interrupted: the bridge ran nothing and asked the
    model nothing more), its resumed run (the tool's result upstream, not CopilotKit's approval),
    the second email (interrupted), its resumed run (the refusal), the third turn: each call
    answered once, by the statement for the approved one and the refusal for the denied one."""
    turn = ["user", "assistant", "tool", "assistant"]
    expected = [
        ["user"],
        ["user", "assistant", "tool"],
        [*turn, "user"],
        [*turn, "user", "assistant", "tool"],
        [*turn, *turn, "user"],
    ]
    assert [roles(r) for r in requests] == expected * len(WIRINGS), [roles(r) for r in requests]
    for first, approved, second, declined, third in zip(*[iter(requests)] * 5, strict=True):
        assert question(first) == EMAIL_PROMPT
        calling, result = _conversation(approved)[1:3]
        [call] = calling["tool_calls"]
        assert call["function"]["name"] == "send_email"
        assert json.loads(call["function"]["arguments"])["to"] == "alice@example.com"
        assert result == {"role": "tool", "tool_call_id": call["id"], "content": EMAIL_SENT}
        # Later turns: CopilotKit kept its {"approved": true} message for the call; the bridge
        # sends a statement of what happened in its place.
        assert _conversation(second)[2]["content"] == APPROVED_STATEMENT
        assert _conversation(second)[-1]["content"] == DENIED_PROMPT
        bob_call, refusal = _conversation(declined)[-2:]
        [bob] = bob_call["tool_calls"]
        assert json.loads(bob["function"]["arguments"])["to"] == "bob@example.com"
        assert refusal == {"role": "tool", "tool_call_id": bob["id"], "content": DECLINED}
        history = _conversation(third)
        answers = {m["tool_call_id"]: m["content"] for m in history if m["role"] == "tool"}
        assert answers == {call["id"]: APPROVED_STATEMENT, bob["id"]: DECLINED}, history
        assert history[3]["content"].startswith("Done: “Sent to alice@example.com"), history[3]
        assert history[7]["content"].startswith("OK, I did not send it: "), history[7]
        assert history[-1]["content"].startswith("Thanks, that is all from ")
        assert '"approved"' not in json.dumps(third), model


def _check_edit(requests: list[dict[str, Any]]) -> None:
    """Per wiring: the question (interrupted), then the resumed run: the call as the model made
    it (to Carol), answered by the result of the edited one (to Dave)."""
    expected = [["user"], ["user", "assistant", "tool"]] * len(WIRINGS)
    assert [roles(r) for r in requests] == expected, [roles(r) for r in requests]
    for resumed in requests[1::2]:
        _, calling, result = _conversation(resumed)
        [call] = calling["tool_calls"]
        assert json.loads(call["function"]["arguments"])["to"] == "carol@example.com"
        assert result == {"role": "tool", "tool_call_id": call["id"], "content": EDITED_SENT}


def _check_double_clicked(requests: list[dict[str, Any]]) -> int:
    """Per Approve clicked twice: the question (interrupted), then one resumed run per resume
    that reached the bridge, each with the call's one result: the email's in one, the already-run
    statement in any other. The number of resumed runs."""
    questions = [r for r in requests if roles(r) == ["user"]]
    resumed = [r for r in requests if roles(r) == ["user", "assistant", "tool"]]
    assert len(questions) == DOUBLE_CLICKED, [roles(r) for r in requests]
    assert len(questions) + len(resumed) == len(requests), [roles(r) for r in requests]
    results = sorted(_conversation(r)[2]["content"] for r in resumed)
    extra = len(resumed) - DOUBLE_CLICKED
    assert results == sorted([TWICE_SENT] * DOUBLE_CLICKED + [ALREADY_RUN_STATEMENT] * extra)
    return len(resumed)


def _conversation(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] not in ("system", "developer")]


def test_the_example_keeps_copilotkits_telemetry_off_unless_told() -> None:
    """`npm start` (server.mjs) with nothing set reports telemetry off; set to false, on."""
    require_node(WHY)
    build_example()
    for settings, disabled in (({}, True), ({"COPILOTKIT_TELEMETRY_DISABLED": "false"}, False)):
        port = free_port()
        with example_server("http://127.0.0.1:9", port, **settings):
            info = httpx.get(f"http://127.0.0.1:{port}/api/copilotkit/info", timeout=10).json()
        assert info["telemetryDisabled"] is disabled, settings
