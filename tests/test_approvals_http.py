"""Approvals over real HTTP (README "Approving tools"): a call to a server tool under approval
ends the run with an AG-UI interrupt; the next run's ``resume`` runs it, or tells the model it
was declined; every way a resume can be wrong ends with RUN_ERROR and runs nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import AssistantMessage, FunctionCall, ToolCall, ToolMessage, UserMessage

from bridge.cli.demo import create_scripted_upstream
from bridge.cli.parser import build_parser
from bridge.cli.settings import config_from_args
from bridge.serve.http.app import create_app
from bridge.serve.run.resume import APPROVED_STATEMENT, UNANSWERED_STATEMENT, settle_approvals
from bridge.serve.tools.python_tools import requires_approval
from bridge.serve.tools.question import RESPONSE_SCHEMA
from servers import TOOLS as FRONTEND_TOOLS
from servers import Stack, messages_from, post, run_input, scripted_config, scripted_stack, serve

SECRET = "Qx7Vb2Kp9Lm4Nz8Rt1Wy6Hd5Jf0Gs3"
PROMPT = "Please send_mail and get_time"

#: What the tools did, in the order they did it (the servers run in threads).
DONE: list[tuple[str, dict[str, Any]]] = []
_LOCK = threading.Lock()


@requires_approval
def send_mail(to: str, subject: str) -> str:
    """Send an e-mail."""
    with _LOCK:
        DONE.append(("send_mail", {"to": to, "subject": subject}))
    return f"mail sent to {to}"


def delete_file(path: str) -> str:
    """Delete a file."""
    with _LOCK:
        DONE.append(("delete_file", {"path": path}))
    return f"deleted {path}"


def get_time() -> str:
    """The current time."""
    with _LOCK:
        DONE.append(("get_time", {}))
    return "12:00"


TOOLS = [send_mail, delete_file, get_time]


@pytest.fixture(autouse=True)
def _nothing_done() -> Iterator[None]:
    DONE.clear()
    yield
    DONE.clear()


@contextlib.contextmanager
def stack(**overrides: Any) -> Iterator[Stack]:
    overrides.setdefault("secret", SECRET)
    overrides.setdefault("approve", ("delete_*",))
    with scripted_stack(tools=TOOLS, **overrides) as made:
        yield made


def ask(text: str = PROMPT, **extra: Any) -> dict[str, Any]:
    return run_input([{"id": "u1", "role": "user", "content": text}], **extra)


def calls_of(frames: list[dict[str, Any]]) -> dict[str, str]:
    """Tool name → call id."""
    return {f["toolCallName"]: f["toolCallId"] for f in frames if f["type"] == "TOOL_CALL_START"}


def results(frames: list[dict[str, Any]]) -> dict[str, str]:
    """Call id → TOOL_CALL_RESULT content."""
    return {f["toolCallId"]: f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"}


def names() -> list[str]:
    return [name for name, _ in DONE]


def interrupted(
    made: Stack, text: str = PROMPT, **extra: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Run until the interrupt: (the first run's input, its frames, the history after it)."""
    first = ask(text, **extra)
    frames = post(made.bridge_url, first)
    assert frames[-1]["type"] == "RUN_FINISHED", frames[-1]
    history = [*first["messages"], *messages_from(frames)]
    return first, frames, history


def resume(
    first: dict[str, Any],
    history: list[dict[str, Any]],
    frames: list[dict[str, Any]],
    payload: Any = None,
    *,
    status: str = "resolved",
    **extra: Any,
) -> dict[str, Any]:
    """The next run as @ag-ui/client sends it: the same thread and (CopilotKit) run id, every
    interrupt answered with ``payload``."""
    interrupts = frames[-1]["outcome"]["interrupts"]
    entries = [{"interruptId": i["id"], "status": status} for i in interrupts]
    if payload is not None:
        for entry in entries:
            entry["payload"] = payload
    body = run_input(history, threadId=first["threadId"], runId=first["runId"], resume=entries)
    body.update(extra)
    return body


def error_of(frames: list[dict[str, Any]]) -> str:
    assert frames[-1]["type"] == "RUN_ERROR", frames[-1]
    return str(frames[-1]["code"])


# --- the interrupt --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["1.0", None])
def test_a_call_under_approval_ends_the_run_with_an_interrupt(protocol: str | None) -> None:
    """The call streams, the round's other server tool runs, this one does not, and the run
    ends with the interrupt outcome: for a 1.0 client and a 0.0 one (no protocolVersion)."""
    with stack() as made:
        before = time.time()
        first, frames, _ = interrupted(made, protocolVersion=protocol)
        caps = httpx.get(f"{made.bridge_url}/capabilities").json()
    ids = calls_of(frames)
    assert set(ids) == {"send_mail", "get_time"}
    assert results(frames) == {ids["get_time"]: "12:00"}
    assert names() == ["get_time"]
    finished = frames[-1]
    [interrupt] = finished["outcome"]["interrupts"]
    assert finished["outcome"]["type"] == "interrupt"
    assert interrupt["id"].startswith("int1.")
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == ids["send_mail"]
    assert interrupt["message"].startswith("Run send_mail({")
    assert interrupt["responseSchema"] == RESPONSE_SCHEMA
    expires = time.mktime(time.strptime(interrupt["expiresAt"], "%Y-%m-%dT%H:%M:%SZ"))
    assert 890 <= expires - time.timezone - before <= 901
    assert caps["humanInTheLoop"] == {
        "supported": True,
        "approvals": True,
        "interrupts": True,
        "approveWithEdits": True,
    }
    assert first["threadId"] == finished["threadId"]


def test_a_tool_under_a_pattern_waits_and_capabilities_say_nothing_without_approvals() -> None:
    with stack() as made:
        _, frames, _ = interrupted(made, "delete_file please")
    assert [i["toolCallId"] for i in frames[-1]["outcome"]["interrupts"]] == [
        calls_of(frames)["delete_file"]
    ]
    assert DONE == []
    with scripted_stack(tools=[get_time]) as plain:
        caps = httpx.get(f"{plain.bridge_url}/capabilities").json()
    assert "humanInTheLoop" not in caps


# --- the resume -----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["1.0", None])
def test_approved_the_tool_runs_and_the_model_goes_on_in_the_same_run(
    protocol: str | None,
) -> None:
    with stack() as made:
        first, frames, history = interrupted(made, protocolVersion=protocol)
        call_id = calls_of(frames)["send_mail"]
        resumed = post(made.bridge_url, resume(first, history, frames, {"approved": True}))
        upstream = made.upstream_requests[-1]["messages"]
    assert names() == ["get_time", "send_mail"]
    assert results(resumed) == {call_id: DONE[-1][1] and f"mail sent to {DONE[-1][1]['to']}"}
    assert "TOOL_CALL_START" not in [f["type"] for f in resumed]  # against the original call
    kinds = [f["type"] for f in resumed]
    assert kinds.index("TOOL_CALL_RESULT") < kinds.index("TEXT_MESSAGE_START")
    assert resumed[-1]["type"] == "RUN_FINISHED" and "outcome" not in resumed[-1]
    assert resumed[-1]["runId"] == first["runId"]  # the same run id is accepted
    tool_messages = {m["tool_call_id"]: m["content"] for m in upstream if m["role"] == "tool"}
    assert tool_messages[call_id].startswith("mail sent to ")


def test_copilotkits_approval_message_is_not_the_result_on_this_turn_or_later_ones() -> None:
    """CopilotKit appends the answer as a tool message before resuming, and keeps it instead of
    the bridge's result afterwards: upstream, the call gets its real result in the resumed run
    and a statement of what happened on later turns, never the payload."""
    with stack() as made:
        first, frames, history = interrupted(made)
        call_id = calls_of(frames)["send_mail"]
        approval = {
            "id": "ck-1",
            "role": "tool",
            "toolCallId": call_id,
            "content": '{"approved":true}',
        }
        history = [*history, approval]
        resumed = post(made.bridge_url, resume(first, history, frames, {"approved": True}))
        in_run = made.upstream_requests[-1]["messages"]
        # CopilotKit's history after the run: its approval stays, the bridge's result goes.
        kept = [m for m in messages_from(resumed) if m.get("toolCallId") != call_id]
        later = [*history, *kept, {"id": "u2", "role": "user", "content": "Thanks!"}]
        post(made.bridge_url, run_input(later, threadId=first["threadId"]))
        next_turn = made.upstream_requests[-1]["messages"]
    assert names() == ["get_time", "send_mail"]
    sent = [m["content"] for m in in_run if m.get("tool_call_id") == call_id]
    assert len(sent) == 1 and sent[0].startswith("mail sent to ")
    assert [m["content"] for m in next_turn if m.get("tool_call_id") == call_id] == [
        APPROVED_STATEMENT
    ]
    assert '"approved"' not in json.dumps(next_turn)


@pytest.mark.parametrize(
    ("payload", "status", "told"),
    [
        (
            {"approved": False, "reason": "too expensive"},
            "resolved",
            "The user declined: too expensive",
        ),
        ({"approved": False}, "resolved", "The user declined."),
        (None, "cancelled", "The user cancelled this call without deciding; it was not run."),
        ({"approved": "yes"}, "resolved", "Not run: the user's answer was not an approval"),
    ],
    ids=["declined-with-reason", "declined", "cancelled", "unreadable"],
)
def test_declined_or_cancelled_the_model_is_told_and_nothing_runs(
    payload: Any, status: str, told: str
) -> None:
    with stack() as made:
        first, frames, history = interrupted(made)
        call_id = calls_of(frames)["send_mail"]
        resumed = post(made.bridge_url, resume(first, history, frames, payload, status=status))
        upstream = made.upstream_requests[-1]["messages"]
        # Later: CopilotKit's answer is all the history keeps for the call.
        if payload is not None:
            kept = [m for m in messages_from(resumed) if m.get("toolCallId") != call_id]
            answer = {
                "id": "ck",
                "role": "tool",
                "toolCallId": call_id,
                "content": json.dumps(payload),
            }
            later = [*history, answer, *kept, {"id": "u2", "role": "user", "content": "ok"}]
            post(made.bridge_url, run_input(later, threadId=first["threadId"]))
            next_turn = made.upstream_requests[-1]["messages"]
            [statement] = [m["content"] for m in next_turn if m.get("tool_call_id") == call_id]
            assert statement.startswith(told)
    assert names() == ["get_time"]
    assert results(resumed)[call_id].startswith(told)
    assert next(m["content"] for m in upstream if m.get("tool_call_id") == call_id).startswith(told)
    assert resumed[-1]["type"] == "RUN_FINISHED"


def test_an_edit_runs_with_the_edited_arguments_and_an_invalid_one_runs_nothing() -> None:
    with stack() as made:
        first, frames, history = interrupted(made)
        edit = {"approved": True, "editedArgs": {"to": "bob@example.com", "subject": "Hi"}}
        post(made.bridge_url, resume(first, history, frames, edit))
        assert DONE[-1] == ("send_mail", {"to": "bob@example.com", "subject": "Hi"})
        DONE.clear()
        first, frames, history = interrupted(made)
        call_id = calls_of(frames)["send_mail"]
        wrong = {"approved": True, "editedArgs": {"to": 5}}
        resumed = post(made.bridge_url, resume(first, history, frames, wrong))
    assert names() == ["get_time"]
    error = results(resumed)[call_id]
    assert error.startswith("Error: send_mail: the user's edited arguments are invalid: ")
    assert "subject" in error and resumed[-1]["type"] == "RUN_FINISHED"


# --- resumes that cannot be acted on --------------------------------------------------------


def _forged(body: dict[str, Any]) -> None:
    token = body["resume"][0]["interruptId"]
    body["resume"][0]["interruptId"] = token[:-2] + ("AA" if token[-2:] != "AA" else "BA")


def _altered_arguments(body: dict[str, Any]) -> None:
    for message in body["messages"]:
        for call in message.get("toolCalls", ()):
            if call["function"]["name"] == "send_mail":
                call["function"]["arguments"] = '{"to":"eve@example.com","subject":"x"}'


def _other_thread(body: dict[str, Any]) -> None:
    body["threadId"] = "thread-2"


def _renamed_tool(body: dict[str, Any]) -> None:
    for message in body["messages"]:
        for call in message.get("toolCalls", ()):
            if call["function"]["name"] == "send_mail":
                call["function"]["name"] = "delete_file"


@pytest.mark.parametrize(
    "change", [_forged, _altered_arguments, _other_thread, _renamed_tool], ids=lambda f: f.__name__
)
def test_an_invalid_resume_is_interrupt_invalid_and_runs_nothing(change: Any) -> None:
    with stack() as made:
        first, frames, history = interrupted(made)
        body = resume(first, history, frames, {"approved": True})
        change(body)
        answered = post(made.bridge_url, body)
    assert error_of(answered) == "interrupt_invalid"
    assert names() == ["get_time"]


def test_an_expired_interrupt_is_interrupt_expired_and_a_cancel_still_goes() -> None:
    with stack(approval_timeout=0.001) as made:
        first, frames, history = interrupted(made)
        time.sleep(0.01)
        late = post(made.bridge_url, resume(first, history, frames, {"approved": True}))
        cancelled = post(made.bridge_url, resume(first, history, frames, status="cancelled"))
    assert error_of(late) == "interrupt_expired"
    assert cancelled[-1]["type"] == "RUN_FINISHED"
    assert names() == ["get_time"]


def test_a_waiting_call_without_a_resume_is_interrupt_unresolved() -> None:
    with stack() as made:
        first, frames, history = interrupted(made)
        again = post(made.bridge_url, run_input(history, threadId=first["threadId"]))
        call_id = calls_of(frames)["send_mail"]
        # CopilotKit's approval message alone is no answer either.
        approval = {
            "id": "ck",
            "role": "tool",
            "toolCallId": call_id,
            "content": '{"approved":true}',
        }
        alone = post(made.bridge_url, run_input([*history, approval], threadId=first["threadId"]))
    assert error_of(again) == "interrupt_unresolved"
    assert error_of(alone) == "interrupt_unresolved"
    assert names() == ["get_time"]


def test_a_replayed_resume_does_not_run_the_tool_again() -> None:
    with stack() as made:
        first, frames, history = interrupted(made)
        body = resume(first, history, frames, {"approved": True})
        resumed = post(made.bridge_url, body)
        replay = resume(first, [*history, *messages_from(resumed)], frames, {"approved": True})
        again = post(made.bridge_url, replay)
    assert error_of(again) == "interrupt_invalid"
    assert names() == ["get_time", "send_mail"]


def test_a_resume_to_a_bridge_without_tools_is_interrupt_invalid() -> None:
    with stack() as made:
        first, frames, history = interrupted(made)
        body = resume(first, history, frames, {"approved": True})
    with scripted_stack() as plain:
        answered = post(plain.bridge_url, body)
    assert error_of(answered) == "interrupt_invalid"


# --- the secret -----------------------------------------------------------------------------


def test_bridges_with_one_secret_accept_each_others_interrupts_and_others_do_not() -> None:
    upstream_app = create_scripted_upstream()
    with serve(upstream_app) as upstream_url:
        config = scripted_config(upstream_url, secret=SECRET)
        other = scripted_config(upstream_url, secret="another-secret-0123456789abcdef")
        with (
            serve(create_app(config, tools=TOOLS)) as one,
            serve(create_app(config, tools=TOOLS)) as two,
            serve(create_app(other, tools=TOOLS)) as three,
        ):
            made = Stack(upstream_url, one, upstream_app, config)
            first, frames, history = interrupted(made)
            body = resume(first, history, frames, {"approved": True})
            refused = post(three, body)
            assert names() == ["get_time"]
            accepted = post(two, body)
    assert error_of(refused) == "interrupt_invalid"
    assert accepted[-1]["type"] == "RUN_FINISHED"
    assert names() == ["get_time", "send_mail"]


def test_the_secret_never_appears_in_frames_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    """A tool that returns the secret, a prompt holding it: every frame and log line is
    redacted of it (and the interrupt, signed over the arguments as the client holds them,
    still verifies)."""
    caplog.set_level(logging.DEBUG)
    text = f"Please send_mail {SECRET}"
    with stack() as made:
        first = ask(text)
        raw = httpx.post(made.bridge_url, json=first, timeout=30).text
        frames = post(made.bridge_url, first)
        history = [*first["messages"], *messages_from(frames)]
        body = resume(first, history, frames, {"approved": True})
        resumed = httpx.post(made.bridge_url, json=body, timeout=30).text
        caps = httpx.get(f"{made.bridge_url}/capabilities").text
    assert "interrupt" in raw and "RUN_FINISHED" in resumed
    for shown in (raw, resumed, caps, caplog.text):
        assert SECRET not in shown
        assert SECRET[:12] not in shown
    assert names() == ["send_mail"]


def test_without_a_secret_the_bridge_makes_one_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agui_bridge")
    with stack(secret=None) as made:
        first, frames, history = interrupted(made)
        resumed = post(made.bridge_url, resume(first, history, frames, {"approved": True}))
    assert resumed[-1]["type"] == "RUN_FINISHED"
    assert names() == ["get_time", "send_mail"]
    assert caplog.text.count("do not survive a restart or span processes") == 1


# --- configuration --------------------------------------------------------------------------


def test_the_flags_map_onto_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SECRET", SECRET)
    args = build_parser().parse_args(
        [
            "serve",
            "--model",
            "m",
            "--approve",
            "mail__*",
            "--approve",
            "files__write_*",
            "--secret-env",
            "MY_SECRET",
            "--approval-timeout",
            "60",
        ]
    )
    config = config_from_args(
        args, upstream_url="http://127.0.0.1:1/v1", model="m", models=[], api_key=None
    )
    assert config.approve == ("mail__*", "files__write_*")
    assert config.secret == SECRET and SECRET not in repr(config)
    assert config.approval_timeout == 60
    monkeypatch.delenv("AGUI_BRIDGE_SECRET", raising=False)
    default = build_parser().parse_args(["serve", "--model", "m"])
    plain = config_from_args(
        default, upstream_url="http://127.0.0.1:1/v1", model="m", models=[], api_key=None
    )
    assert (plain.approve, plain.secret, plain.approval_timeout) == ((), None, 900)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        scripted_config("http://127.0.0.1:1", secret="short")
    with pytest.raises(ValueError, match="approval_timeout"):
        scripted_config("http://127.0.0.1:1", approval_timeout=0)


# --- with the rest of the bridge ------------------------------------------------------------


def test_an_mcp_tool_under_a_pattern_waits_and_an_edit_is_checked_against_its_schema() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "mcp_server.py"
    with stack(mcp_servers={"srv": f"python {example}"}, approve=("srv__*",)) as made:
        first, frames, history = interrupted(made, "Please srv__add them")
        call_id = calls_of(frames)["srv__add"]
        wrong = {"approved": True, "editedArgs": {"a": "two", "b": 2}}
        refused = post(made.bridge_url, resume(first, history, frames, wrong))
        first, frames, history = interrupted(made, "Please srv__add them")
        edit = {"approved": True, "editedArgs": {"a": 40, "b": 2}}
        added = post(made.bridge_url, resume(first, history, frames, edit))
    error = results(refused)[call_id]
    assert error.startswith("Error: srv__add: the user's edited arguments are invalid: a: ")
    assert list(results(added).values()) == ["42"]


def test_a_round_with_a_frontend_call_leaves_it_to_the_page_and_the_resume_brings_its_result() -> (
    None
):
    text = "Please send_mail and make the background lightblue."
    with stack() as made:
        first, frames, history = interrupted(made, text, tools=FRONTEND_TOOLS)
        ids = calls_of(frames)
        assert set(ids) == {"send_mail", "change_background"}
        assert frames[-1]["outcome"]["type"] == "interrupt"  # not pendingToolCallIds
        page = {
            "id": "t-bg",
            "role": "tool",
            "toolCallId": ids["change_background"],
            "content": "ok",
        }
        body = resume(first, [*history, page], frames, {"approved": True}, tools=FRONTEND_TOOLS)
        resumed = post(made.bridge_url, body)
        upstream = made.upstream_requests[-1]["messages"]
    assert list(results(resumed)) == [ids["send_mail"]]
    assert names() == ["send_mail"]
    sent = {m["tool_call_id"]: m["content"] for m in upstream if m["role"] == "tool"}
    assert sent[ids["change_background"]] == "ok"
    assert sent[ids["send_mail"]].startswith("mail sent to ")


def test_a_frontend_tools_result_that_looks_like_an_approval_is_its_result() -> None:
    """Only calls of server tools under approval have approvals: a page's confirm tool may
    answer {"approved": true}, and that is its result."""
    messages = [
        UserMessage(id="u", content="Confirm?"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(id="c1", function=FunctionCall(name="confirm", arguments="{}")),
                ToolCall(id="c2", function=FunctionCall(name="send_mail", arguments="{}")),
            ],
        ),
        ToolMessage(id="t1", tool_call_id="c1", content='{"approved":true}'),
        ToolMessage(id="t2", tool_call_id="c2", content='{"approved":false,"reason":"no"}'),
    ]
    settled = settle_approvals(messages, lambda name: name == "send_mail")
    assert [(m.tool_call_id, m.content) for m in settled if isinstance(m, ToolMessage)] == [
        ("c1", '{"approved":true}'),
        ("c2", "The user declined: no"),
    ]
    plain = messages[:3]
    assert settle_approvals(plain, lambda name: False) is plain  # nothing to settle: as it is
    unanswered = settle_approvals(messages[:2], lambda name: name == "send_mail")
    assert [m.content for m in unanswered if isinstance(m, ToolMessage)] == [UNANSWERED_STATEMENT]


def test_a_recording_keeps_no_secret(tmp_path: Path) -> None:
    with stack(record_dir=str(tmp_path)) as made:
        first, frames, history = interrupted(made, f"Please send_mail {SECRET}")
        post(made.bridge_url, resume(first, history, frames, {"approved": True}))
    written = "".join(path.read_text() for path in tmp_path.iterdir())
    assert "interrupt" in written
    assert SECRET not in written and SECRET[:12] not in written


def test_a_client_that_goes_away_during_the_approved_tool_cancels_it() -> None:
    started, cancelled = threading.Event(), threading.Event()

    @requires_approval
    async def slow_mail(to: str) -> str:
        """Send an e-mail, slowly."""
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "sent"

    with scripted_stack(tools=[slow_mail], secret=SECRET) as made:
        first, frames, history = interrupted(made, "Please slow_mail now")
        body = resume(first, history, frames, {"approved": True})
        with httpx.stream("POST", made.bridge_url, json=body, timeout=30) as response:
            for line in response.iter_lines():
                if "RUN_STARTED" in line:
                    break
            assert started.wait(10)
        assert cancelled.wait(10)


# --- several processes ----------------------------------------------------------------------


@contextlib.contextmanager
def demo_process(secret: str | None) -> Iterator[tuple[str, list[str]]]:
    """``agui-bridge demo --approve get_time``, its secret from the environment: its agent's
    URL and what it printed before it opened."""
    env = {k: v for k, v in os.environ.items() if k != "AGUI_BRIDGE_SECRET"}
    if secret is not None:
        env["AGUI_BRIDGE_SECRET"] = secret
    command = [sys.executable, "-m", "bridge", "demo", "--port", "0", "--log-level", "warning"]
    process = subprocess.Popen(
        [*command, "--approve", "get_*", "--pace", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        printed: list[str] = []
        while not (
            found := re.search(
                r"open (http://127\.0\.0\.1:\d+)/ ", line := process.stdout.readline()
            )
        ):
            assert line, printed
            printed.append(line)
        yield f"{found.group(1)}/agent", printed
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_two_processes_with_one_secret_accept_each_others_interrupts() -> None:
    """The secret from AGUI_BRIDGE_SECRET (``--secret-env``'s default): an interrupt made by one
    process is answered in another; a process with no secret says so at start, and refuses."""
    with (
        demo_process(SECRET) as (one, _),
        demo_process(SECRET) as (two, quiet),
        demo_process(None) as (alone, said),
    ):
        first = ask("What time is it?")
        frames = post(one, first)
        [interrupt] = frames[-1]["outcome"]["interrupts"]
        assert interrupt["message"] == "Run get_time({})?"
        history = [*first["messages"], *messages_from(frames)]
        body = resume(first, history, frames, {"approved": True})
        refused = post(alone, body)
        answered = post(two, body)
    assert error_of(refused) == "interrupt_invalid"
    assert list(results(answered)) == [interrupt["toolCallId"]]
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert not any("restart" in line for line in quiet)
    assert sum("do not survive a restart or span processes" in line for line in said) == 1


def test_over_the_responses_api_the_approved_result_goes_up_as_the_calls_output() -> None:
    with stack(upstream_api="responses") as made:
        first, frames, history = interrupted(made)
        call_id = calls_of(frames)["send_mail"]
        answer = {"id": "ck", "role": "tool", "toolCallId": call_id, "content": '{"approved":true}'}
        body = resume(first, [*history, answer], frames, {"approved": True})
        resumed = post(made.bridge_url, body)
        items = made.upstream_requests[-1]["input"]
    outputs = {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}
    assert outputs[call_id].startswith("mail sent to ")
    assert '"approved"' not in json.dumps(items)
    assert resumed[-1]["type"] == "RUN_FINISHED"


def test_a_shutdown_during_the_approved_tool_ends_the_run_with_shutting_down() -> None:
    """The bridge's shutdown (SIGTERM: ``begin_shutdown``) while the approved tool runs: the
    run ends with RUN_ERROR ``shutting_down`` after the grace, and the tool is cancelled."""
    cancelled = threading.Event()
    apps: list[Any] = []

    @requires_approval
    async def slow_mail(to: str) -> str:
        """Send an e-mail, slowly."""
        apps[0].state.bridge.begin_shutdown(0.2)  # as the SIGTERM handler does, on the loop
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "sent"

    upstream_app = create_scripted_upstream()
    with serve(upstream_app) as upstream_url:
        config = scripted_config(upstream_url, secret=SECRET)
        apps.append(create_app(config, tools=[slow_mail]))
        with serve(apps[0]) as bridge_url:
            made = Stack(upstream_url, bridge_url, upstream_app, config)
            first, frames, history = interrupted(made, "Please slow_mail now")
            body = resume(first, history, frames, {"approved": True})
            began = time.monotonic()
            ended = httpx.post(bridge_url, json=body, timeout=30).text
            took = time.monotonic() - began
    assert ended.rstrip().endswith('"code":"shutting_down"}')
    assert "TOOL_CALL_RESULT" not in ended
    assert cancelled.wait(5) and took < 5
