"""Approvals, the pure part: signed interrupt tokens (tamper, expiry), which tools wait,
the interrupt as AG-UI carries it, and reading a resume."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from ag_ui.core import (
    FunctionCall,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    ToolCall,
)
from ag_ui.encoder import EventEncoder
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.serve.run import resume as resume_module
from bridge.serve.tools.approvals import (
    MIN_SECRET_BYTES,
    TOKEN_PREFIX,
    InterruptExpiredError,
    InterruptInvalidError,
    InterruptUnresolvedError,
    iso_utc,
    needs_approval,
    new_secret,
    read_resume,
    sign_interrupt,
    verify_interrupt,
)
from bridge.serve.tools.question import RESPONSE_SCHEMA, interrupt_for, repeated_key
from bridge.serve.tools.results import BIG_RESULT

SECRET = b"approvals-test-secret-0123456789"
NOW = datetime(2026, 4, 20, 17, 0, 0, tzinfo=UTC)
EXPIRES = NOW + timedelta(minutes=15)
THREAD = "thread-1"
CALL = ToolCall(
    id="call_abc123",
    function=FunctionCall(
        name="files__write_file", arguments='{"path": "notes.txt", "text": "hi"}'
    ),
)
FIELDS: dict[str, str] = {
    "thread_id": THREAD,
    "tool_call_id": CALL.id,
    "tool_name": CALL.function.name,
    "arguments": CALL.function.arguments,
}


def token_for(
    call: ToolCall = CALL, *, expires_at: datetime = EXPIRES, secret: bytes = SECRET
) -> str:
    return sign_interrupt(
        secret,
        thread_id=THREAD,
        tool_call_id=call.id,
        tool_name=call.function.name,
        arguments=call.function.arguments,
        expires_at=expires_at,
    )


def verify(token: str, *, now: datetime = NOW, secret: bytes = SECRET, **changed: str) -> Any:
    return verify_interrupt(secret, token, **{**FIELDS, **changed}, now=now)


def call(call_id: str, name: str = "mail__send", arguments: str = '{"to": "a@b.c"}') -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def entry(token: str, status: str = "resolved", payload: Any = None) -> ResumeEntry:
    return ResumeEntry(interrupt_id=token, status=status, payload=payload)  # type: ignore[arg-type]


# -- tokens ----------------------------------------------------------------------------------


def test_a_token_holds_for_its_call():
    token = token_for()
    signed = verify(token)
    assert signed.tool_call_id == CALL.id
    assert signed.expires_at == EXPIRES
    assert token.startswith(TOKEN_PREFIX)
    assert len(token) < 200  # fits in a URL, a header, a log line
    assert all(c.isalnum() or c in "._-" for c in token)  # URL-safe as it is


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("thread_id", "thread-2"),
        ("tool_call_id", "call_abc124"),
        ("tool_name", "files__write_files"),
        ("arguments", '{"path": "notes.txt", "text": "hi!"}'),
        ("arguments", '{"path":"notes.txt","text":"hi"}'),  # the same JSON, other bytes
        ("arguments", '{"text": "hi", "path": "notes.txt"}'),
        ("arguments", CALL.function.arguments + " "),
        ("arguments", ""),
    ],
)
def test_a_token_fails_for_any_other_call(field: str, value: str):
    with pytest.raises(InterruptInvalidError) as caught:
        verify(token_for(), **{field: value})
    assert caught.value.code == "interrupt_invalid"


def test_a_token_fails_under_another_secret():
    with pytest.raises(InterruptInvalidError):
        verify(token_for(), secret=b"another-secret-0123456789abcdef!")
    with pytest.raises(InterruptInvalidError):
        verify(token_for(secret=new_secret()))


def test_the_expiry_cannot_be_moved():
    token = token_for()
    later = int((EXPIRES + timedelta(days=1)).timestamp())
    payload = json.dumps({"c": CALL.id, "e": later}, separators=(",", ":"))
    moved = base64.urlsafe_b64encode(payload.encode()).rstrip(b"=").decode()
    forged = f"{TOKEN_PREFIX}{moved}.{token.rsplit('.', 1)[1]}"
    with pytest.raises(InterruptInvalidError):
        verify(forged)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: "",
        lambda t: t[:-1],
        lambda t: t[: len(t) // 2],
        lambda t: t + "A",
        lambda t: t + "=",
        lambda t: t + ".",
        lambda t: t.replace(TOKEN_PREFIX, "int2."),
        lambda t: t.replace(TOKEN_PREFIX, ""),
        lambda t: t.replace(".", ".."),
        lambda t: t.rsplit(".", 1)[0],
        lambda t: t.swapcase(),
        lambda t: t[::-1],
        lambda t: "int1.e30.AAAA",
        lambda t: "int1.!!!!.????",
        lambda t: TOKEN_PREFIX + "x" * 5000,
        lambda t: "int-call_abc123",  # pydantic-ai's shape: not ours
        lambda t: CALL.id,
    ],
)
def test_a_garbled_token_is_invalid_never_an_error_of_ours(mangle: Any):
    with pytest.raises(InterruptInvalidError):
        verify(mangle(token_for()))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_one_character_changed_is_rejected(data: st.DataObject):
    token = token_for()
    position = data.draw(st.integers(0, len(token) - 1), label="position")
    replacement = data.draw(st.characters(codec="utf-8"), label="replacement")
    if replacement == token[position]:
        return
    action = data.draw(st.sampled_from(["replace", "insert", "delete"]), label="action")
    if action == "replace":
        changed = token[:position] + replacement + token[position + 1 :]
    elif action == "insert":
        changed = token[:position] + replacement + token[position:]
    else:
        changed = token[:position] + token[position + 1 :]
    with pytest.raises(InterruptInvalidError):
        verify(changed)


def test_every_other_base64_character_at_every_position_is_rejected():
    """Exhaustive over the token's own alphabet: base64 leaves unused bits in a part's last
    character, and a lenient decoder reads four spellings of it as the same bytes."""
    token = token_for()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.="
    accepted = [
        (position, character)
        for position in range(len(token))
        for character in alphabet
        if character != token[position]
        and _holds(token[:position] + character + token[position + 1 :])
    ]
    assert accepted == []


def _holds(token: str) -> bool:
    try:
        verify(token)
    except InterruptInvalidError:
        return False
    return True


@settings(max_examples=100, deadline=None)
@given(
    thread_id=st.text(max_size=80),
    tool_call_id=st.text(max_size=80),
    tool_name=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
    arguments=st.text(max_size=300),
)
def test_any_fields_sign_and_verify(
    thread_id: str, tool_call_id: str, tool_name: str, arguments: str
):
    fields = {
        "thread_id": thread_id,
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "arguments": arguments,
    }
    token = sign_interrupt(SECRET, **fields, expires_at=EXPIRES)
    assert verify_interrupt(SECRET, token, **fields, now=NOW).tool_call_id == tool_call_id
    with pytest.raises(InterruptInvalidError):
        verify_interrupt(SECRET, token, **{**fields, "arguments": arguments + "x"}, now=NOW)


def test_arguments_are_signed_as_sent_even_when_they_are_not_json():
    broken = call("call_1", arguments='{"path": "a.txt", "text": ')  # a model cut short
    lone = call("call_2", arguments='{"text": "\ud800"}')  # a lone surrogate, if one gets here
    for each in (broken, lone):
        token = token_for(each)
        fields = {"tool_call_id": each.id, "tool_name": each.function.name}
        assert verify(token, **fields, arguments=each.function.arguments)
        with pytest.raises(InterruptInvalidError):
            verify(token, **fields, arguments=each.function.arguments[:-1])


def test_a_short_or_naive_input_is_our_bug_not_the_clients():
    with pytest.raises(ValueError, match="at least"):
        token_for(secret=b"x" * (MIN_SECRET_BYTES - 1))
    with pytest.raises(ValueError, match="timezone"):
        token_for(expires_at=datetime(2026, 1, 1))


# -- expiry ----------------------------------------------------------------------------------


def test_expiry():
    token = token_for()
    assert verify(token, now=EXPIRES - timedelta(seconds=1))
    for late in (EXPIRES, EXPIRES + timedelta(seconds=1), EXPIRES + timedelta(days=400)):
        with pytest.raises(InterruptExpiredError) as caught:
            verify(token, now=late)
        assert caught.value.code == "interrupt_expired"
        assert "2026-04-20T17:15:00Z" in caught.value.message


def test_an_expired_forgery_is_invalid_not_expired():
    with pytest.raises(InterruptInvalidError):
        verify(token_for(), now=EXPIRES + timedelta(days=1), thread_id="thread-2")


def test_expiry_counts_whole_seconds_in_utc():
    other_zone = datetime(2026, 4, 20, 19, 15, 0, 900_000, tzinfo=UTC).astimezone(
        timezone(timedelta(hours=2))
    )
    assert iso_utc(other_zone) == "2026-04-20T19:15:00Z"
    token = token_for(expires_at=other_zone)
    assert verify(token).expires_at == datetime(2026, 4, 20, 19, 15, 0, tzinfo=UTC)


# -- which tools wait ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "patterns", "waits"),
    [
        ("files__write_file", ["files__write_*"], True),
        ("files__read_file", ["files__write_*"], False),
        ("mail__send", ["files__write_*", "mail__*"], True),
        ("get_weather", ["*"], True),
        ("get_weather", [], False),
        ("Mail__send", ["mail__*"], False),  # case-sensitive on every platform
        ("mail__send", ["mail__sen?"], True),
        ("mail__send", ["mail__[st]end"], True),
        ("mail__send", ["mail"], False),  # a whole-name match, not a prefix
    ],
)
def test_needs_approval(name: str, patterns: list[str], waits: bool):
    assert needs_approval(name, patterns) is waits


# -- the interrupt ---------------------------------------------------------------------------


def test_the_interrupt_on_the_wire():
    token = token_for()
    event = RunFinishedEvent(
        thread_id=THREAD,
        run_id="run-1",
        outcome=RunFinishedInterruptOutcome(interrupts=[interrupt_for(CALL, token, EXPIRES)]),
    )
    frame = EventEncoder().encode(event)
    assert json.loads(frame.removeprefix("data: "))["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {
                "id": token,
                "reason": "tool_call",
                "message": 'Run files__write_file({"path": "notes.txt", "text": "hi"})?',
                "toolCallId": "call_abc123",
                "responseSchema": {
                    "type": "object",
                    "properties": {
                        "approved": {"type": "boolean"},
                        "editedArgs": {"type": "object"},
                        "reason": {"type": "string"},
                    },
                    "required": ["approved"],
                },
                "expiresAt": "2026-04-20T17:15:00Z",
            }
        ],
    }


def test_each_interrupt_has_its_own_schema():
    first = interrupt_for(CALL, token_for(), EXPIRES)
    assert first.response_schema is not None
    first.response_schema["required"].append("reason")
    assert RESPONSE_SCHEMA["required"] == ["approved"]
    assert interrupt_for(CALL, token_for(), EXPIRES).response_schema == RESPONSE_SCHEMA


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ("", "Run mail__send()?"),
        ("{}", "Run mail__send({})?"),
        ('{\n  "to": "a@b.c",\n\t"cc": []\n}\n', 'Run mail__send({ "to": "a@b.c", "cc": [] })?'),
    ],
)
def test_the_question_shows_the_arguments_on_one_line(arguments: str, shown: str):
    assert interrupt_for(call("c", arguments=arguments), "t", EXPIRES).message == shown


@pytest.mark.parametrize("size", [250, 5_000, 2_000_000])
def test_long_arguments_are_cut(size: int):
    message = interrupt_for(
        call("c", arguments='{"text": "' + "x" * size + '"}'), "t", EXPIRES
    ).message
    assert message is not None
    assert message.startswith('Run mail__send({"text": "xxx')
    assert message.endswith("…)?")
    assert len(message) == len("Run mail__send()?") + 200


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        ('{"to": "a", "to": "b"}', "to"),
        ('{"to": "a", "t\\u006f": "b"}', "to"),  # one key, spelled twice
        ('{"list": [1, {"deep": {"x": 1, "x": 2}}]}', "x"),
        ('{"to": "a", "cc": {"to": "b"}}', None),  # one key in each of two objects
        ("", None),
        ("not json", None),
        ("[" * 100_000, None),  # too deep for the parser: the tool refuses it anyway
    ],
)
def test_a_key_given_twice_is_found_at_any_depth(arguments: str, key: str | None):
    assert repeated_key(arguments) == key


def test_a_big_call_is_checked_off_the_event_loop(monkeypatch: pytest.MonkeyPatch):
    """Issue 40, finding 1: the check parses the arguments, which may be megabytes: in a
    worker thread, as a big tool result is made ready."""
    seen: list[str] = []

    def watched(arguments: str) -> str | None:
        seen.append(threading.current_thread().name)
        return repeated_key(arguments)

    monkeypatch.setattr(resume_module, "repeated_key", watched)
    approvals = resume_module.Approvals(secret=SECRET)
    big = '{"text": "' + "x" * BIG_RESULT + '", "text": "y"}'
    refused = asyncio.run(approvals.unaskable([call("small"), call("big", arguments=big)]))
    assert list(refused) == ["big"] and '"text"' in refused["big"]
    assert seen[0] == threading.main_thread().name and seen[1] != seen[0]


# -- reading a resume ------------------------------------------------------------------------

SEND = call("call_send")
WRITE = call("call_write", name="files__write_file", arguments='{"path": "a.txt"}')


def read(resume: list[ResumeEntry] | None, waiting: list[ToolCall], now: datetime = NOW) -> Any:
    return read_resume(SECRET, resume, waiting, thread_id=THREAD, now=now)


def test_approve_decline_and_cancel_in_the_calls_order():
    decisions = read(
        [
            entry(token_for(WRITE), "resolved", {"approved": False, "reason": "not that file"}),
            entry(token_for(SEND), "resolved", {"approved": True}),
        ],
        [SEND, WRITE],
    )
    assert [(d.call.id, d.verdict) for d in decisions] == [
        ("call_send", "approved"),
        ("call_write", "declined"),
    ]
    approved, declined = decisions
    assert approved.arguments == SEND.function.arguments  # the very bytes the person saw
    assert approved.refusal is None
    assert declined.refusal == "The user declined: not that file"

    (cancelled,) = read([entry(token_for(SEND), "cancelled")], [SEND])
    assert cancelled.verdict == "cancelled"
    assert cancelled.refusal == "The user cancelled this call without deciding; it was not run."


def test_a_decline_without_a_reason():
    (declined,) = read(
        [entry(token_for(SEND), "resolved", {"approved": False, "reason": ""})], [SEND]
    )
    assert declined.refusal == "The user declined."


def test_approve_with_edits_replaces_the_arguments_whole():
    edited = {"to": "x@y.z", "subject": "Hi", "body": "é"}
    (decision,) = read(
        [entry(token_for(SEND), "resolved", {"approved": True, "editedArgs": edited, "extra": 1})],
        [SEND],
    )
    assert decision.verdict == "approved"
    assert decision.edited_args == edited
    assert json.loads(decision.arguments) == edited
    assert '"é"' in decision.arguments


def test_the_approval_covers_the_call_in_the_history_not_another():
    token = token_for(SEND)
    changed = call("call_send", arguments='{"to": "everyone@b.c"}')
    renamed = call("call_send", name="mail__send_all")
    for waiting in (changed, renamed):
        with pytest.raises(InterruptInvalidError):
            read([entry(token, "resolved", {"approved": True})], [waiting])
    with pytest.raises(InterruptInvalidError):  # made for another thread
        read_resume(
            SECRET, [entry(token, "resolved", {"approved": True})], [SEND], thread_id="t2", now=NOW
        )


@pytest.mark.parametrize(
    "resume",
    [
        [entry("int1.forged.token", "resolved", {"approved": True})],
        [entry("int-call_send", "resolved", {"approved": True})],
        [entry(token_for(WRITE), "resolved", {"approved": True})],  # a call that is not waiting
        [
            entry(token_for(SEND), "resolved", {"approved": True}),
            entry(token_for(SEND), "cancelled"),
        ],
    ],
)
def test_an_answer_to_nothing_waiting_is_invalid(resume: list[ResumeEntry]):
    with pytest.raises(InterruptInvalidError):
        read(resume, [SEND])


def test_a_resume_when_nothing_waits_is_invalid():
    with pytest.raises(InterruptInvalidError):
        read([entry(token_for(SEND), "resolved", {"approved": True})], [])
    assert read(None, []) == []
    assert read([], []) == []


def test_waiting_calls_must_all_be_answered():
    for resume in (None, [], [entry(token_for(SEND), "resolved", {"approved": True})]):
        with pytest.raises(InterruptUnresolvedError) as caught:
            read(resume, [SEND, WRITE])
        assert caught.value.code == "interrupt_unresolved"
        assert "call_write" in caught.value.message


def test_a_late_approval_expired_a_late_cancel_accepted():
    late = EXPIRES + timedelta(seconds=1)
    with pytest.raises(InterruptExpiredError):
        read([entry(token_for(SEND), "resolved", {"approved": True})], [SEND], now=late)
    with pytest.raises(InterruptExpiredError):  # a decline is an answer too: it came too late
        read([entry(token_for(SEND), "resolved", {"approved": False})], [SEND], now=late)
    (cancelled,) = read([entry(token_for(SEND), "cancelled")], [SEND], now=late)
    assert cancelled.verdict == "cancelled"
    with pytest.raises(InterruptInvalidError):  # but only for a token of ours
        read([entry(token_for(SEND, secret=new_secret()), "cancelled")], [SEND], now=late)


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (None, "no 'approved'"),
        ({}, "no 'approved'"),
        ({"approved": "true"}, "no 'approved'"),
        ({"approved": 1}, "no 'approved'"),
        ({"approved": None}, "no 'approved'"),
        ({"status": "resolved"}, "no 'approved'"),  # CopilotKit's resolve() with no payload
        (["approved"], "no 'approved'"),
        (True, "no 'approved'"),
        ({"approved": True, "editedArgs": []}, "'editedArgs'"),
        ({"approved": True, "editedArgs": '{"to": "x"}'}, "'editedArgs'"),
        ({"approved": True, "reason": 42}, "'reason'"),
    ],
)
def test_an_answer_off_the_schema_is_declined_never_guessed(payload: Any, problem: str):
    (decision,) = read([entry(token_for(SEND), "resolved", payload)], [SEND])
    assert decision.verdict == "declined"
    assert decision.refusal is not None
    assert decision.refusal.startswith("Not run: the user's answer was not an approval (")
    assert problem in decision.refusal


def test_a_decline_needs_no_well_formed_edits():
    (decision,) = read(
        [entry(token_for(SEND), "resolved", {"approved": False, "editedArgs": [], "reason": "no"})],
        [SEND],
    )
    assert decision.refusal == "The user declined: no"


def test_a_resume_as_clients_send_it():
    """The body a client posts (camelCase, as @ag-ui/client and CopilotKit build it) reads."""
    token = token_for(SEND)
    body = {
        "threadId": THREAD,
        "runId": "run-1",  # CopilotKit resumes under the interrupted run's id
        "messages": [],
        "resume": [{"interruptId": token, "status": "resolved", "payload": {"approved": True}}],
    }
    run_input = RunAgentInput.model_validate(body)
    (decision,) = read(run_input.resume, [SEND])
    assert decision.verdict == "approved"
