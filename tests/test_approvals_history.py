"""Approvals in the history, the pure part (``bridge.serve.run.resume``): which calls wait, what a
client's approval message is, and what goes upstream for a call under approval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    ResumeEntry,
    RunAgentInput,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from bridge.serve.run.resume import (
    APPROVED_STATEMENT,
    UNANSWERED_STATEMENT,
    Approvals,
    approval_payload,
    settle_approvals,
    waiting_calls,
)
from bridge.serve.tools.approvals import InterruptExpiredError, InterruptUnresolvedError

SECRET = b"resume-test-secret-0123456789abcd"


def waits(name: str) -> bool:
    return name.startswith("mail")


def call(ident: str, name: str = "mail_send", arguments: str = '{"to":"a"}') -> ToolCall:
    return ToolCall(id=ident, function=FunctionCall(name=name, arguments=arguments))


def tool(ident: str, content: str) -> ToolMessage:
    return ToolMessage(id=f"t-{ident}-{len(content)}", tool_call_id=ident, content=content)


def turn(*calls: ToolCall) -> list[Message]:
    return [UserMessage(id="u", content="go"), AssistantMessage(id="a", tool_calls=list(calls))]


@pytest.mark.parametrize(
    ("content", "payload"),
    [
        ('{"approved":true}', {"approved": True}),
        ('{"approved":false,"reason":"no"}', {"approved": False, "reason": "no"}),
        (
            '{"approved":true,"editedArgs":{"to":"b"}}',
            {"approved": True, "editedArgs": {"to": "b"}},
        ),
        ('{"status":"resolved"}', {"status": "resolved"}),  # CopilotKit with no payload
        ('{"status":"cancelled"}', {"status": "cancelled"}),
        ('{"approved":true,"sent":3}', None),  # a key no answer has: a result
        ('{"status":"done"}', None),
        ('"approved"', None),
        ("mail sent", None),
        ("[1]", None),
        ("{" * 10_000, None),
    ],
)
def test_an_approval_message_is_the_answer_alone(content: str, payload: Any) -> None:
    assert approval_payload(tool("c", content)) == payload


def test_the_waiting_calls_are_the_last_turns_gated_calls_without_a_result() -> None:
    calls = [call("c1"), call("c2", "get_time"), call("c3", "mail_draft")]
    history = [*turn(*calls), tool("c2", "12:00"), tool("c3", '{"approved":true}')]
    assert [c.id for c in waiting_calls(history, waits)] == ["c1", "c3"]
    assert waiting_calls([*history, tool("c1", "sent"), tool("c3", "drafted")], waits) == []
    # A user message since: that turn is over (what it left goes up as a statement).
    assert waiting_calls([*history, UserMessage(id="u2", content="hm")], waits) == []
    assert waiting_calls([UserMessage(id="u", content="hi")], waits) == []


def test_a_call_without_a_real_result_goes_up_with_a_statement_after_its_turns_results() -> None:
    history = [
        *turn(call("c1"), call("c2", "get_time"), call("c3")),
        tool("c1", '{"approved":false,"reason":"too late"}'),
        tool("c2", "12:00"),
        UserMessage(id="u2", content="and now?"),
    ]
    settled = settle_approvals(history, waits)
    shown = [(m.role, getattr(m, "tool_call_id", None), m.content) for m in settled[2:]]
    assert shown == [
        ("tool", "c2", "12:00"),
        ("tool", "c1", "The user declined: too late"),
        ("tool", "c3", UNANSWERED_STATEMENT),
        ("user", None, "and now?"),
    ]
    approved = [*turn(call("c1")), tool("c1", '{"approved":true}')]
    assert settle_approvals(approved, waits)[-1].content == APPROVED_STATEMENT
    ran = [*approved, tool("c1", "sent")]
    assert [m.content for m in settle_approvals(ran, waits)[2:]] == ["sent"]


def test_decisions_read_the_resume_against_the_history_with_the_clock_given() -> None:
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    clock = [now]
    approvals = Approvals(secret=SECRET, timeout=60, clock=lambda: clock[0])
    history = turn(call("c1"))
    [interrupt] = approvals.outcome("t", [call("c1")]).interrupts
    assert interrupt.expires_at == "2026-11-23T12:01:00Z"

    def run(resume: list[ResumeEntry] | None) -> Any:
        body = RunAgentInput(
            thread_id="t", run_id="r", messages=history, tools=[], context=[], state={},
            forwarded_props={}, resume=resume,
        )  # fmt: skip
        return approvals.decisions(body, waits)

    entry = ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload={"approved": True})
    [decision] = run([entry])
    assert decision.verdict == "approved" and decision.arguments == '{"to":"a"}'
    with pytest.raises(InterruptUnresolvedError):
        run(None)
    clock[0] = now + timedelta(seconds=60)
    with pytest.raises(InterruptExpiredError):
        run([entry])


def test_the_interrupt_is_signed_over_the_arguments_as_the_client_holds_them() -> None:
    approvals = Approvals(secret=SECRET, redact=lambda text: text.replace("key", "[redacted]"))
    [interrupt] = approvals.outcome("t", [call("c1", arguments='{"to":"key"}')]).interrupts
    assert interrupt.message == 'Run mail_send({"to":"[redacted]"})?'
    held = turn(call("c1", arguments='{"to":"[redacted]"}'))
    body = RunAgentInput(
        thread_id="t", run_id="r", messages=held, tools=[], context=[], state={},
        forwarded_props={}, resume=[ResumeEntry(interrupt_id=interrupt.id, status="cancelled")],
    )  # fmt: skip
    assert [d.verdict for d in approvals.decisions(body, waits)] == ["cancelled"]
