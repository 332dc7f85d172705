"""Questions to the person (README "Asking the user"; issue 43, point 4): the model's
``ask_user`` call and a Python tool's ``@asks_user`` end the run with an ``input_required``
interrupt; the resume's answer, held to the question's schema, becomes the call's result and the
model goes on. Over real servers: a model that asks (``peers_approvals.hostile_model``), the
bridge, and the official clients ``@ag-ui/client`` 1.0.0 and 0.0.59 (``tests/node``).

Findings held here (issue 43):
- Finding A: a bad answer is refused with the reason, before anything is used up or runs, and
  the same interrupt can be answered again.
- Finding B: asked once, answered once: a replayed answer runs nothing and asks the model
  nothing (the approvals' claim store).
- Finding C: an expired question is refused clearly; a schema or an answer past its limit is
  refused before the work it would take.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from threads.fold_node import CLIENTS, node

from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.run.resume import UNASKED_STATEMENT
from bridge.serve.tools.asking import MAX_ANSWER_BYTES, MAX_QUESTION_CHARS
from bridge.serve.tools.python_tools import asks_user
from peers_approvals import HostileModel, hostile_model, says, tool_calls
from servers import messages_from, post, run_input, serve

SECRET = "Qx7Vb2Kp9Lm4Nz8Rt1Wy6Hd5Jf0Gs3"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "date": {"type": "string", "format": "date"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 8},
    },
    "required": ["date", "seats"],
}
QUESTION = "Which day, and for how many?"
ARGUMENTS = json.dumps({"question": QUESTION, "schema": SCHEMA})
GOOD = {"date": "2026-12-01", "seats": 2}
BAD = {"date": "next tuesday", "seats": 2}

#: What the Python tool was called with (the servers run in threads).
BOOKED: list[dict[str, Any]] = []
_LOCK = threading.Lock()


@asks_user(lambda room: f"Book {room} for which day?", {"type": "string", "format": "date"})
def book_room(room: str, answer: str) -> str:
    """Book a meeting room."""
    with _LOCK:
        BOOKED.append({"room": room, "answer": answer})
    return f"{room} booked for {answer}"


@contextlib.contextmanager
def bridge(*scripts: list[dict[str, Any]], **overrides: Any) -> Iterator[tuple[str, HostileModel]]:
    """A bridge with ``--ask-user`` and ``book_room`` in front of a model answering ``scripts``."""
    BOOKED.clear()
    with hostile_model(*scripts) as (upstream, model):
        config = BridgeConfig(
            upstream_url=upstream,
            model="hostile",
            secret=SECRET,
            ask_user=True,
            reasoning_scope="current-turn",
            idle_timeout=30,
            **overrides,
        )
        with serve(create_app(config, tools=[book_room])) as url:
            yield url, model


def asks(arguments: str = ARGUMENTS, name: str = "ask_user") -> list[dict[str, Any]]:
    return tool_calls(("call-ask", name, arguments))


def asked(url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    first = run_input(
        [{"id": "u1", "role": "user", "content": "Book a table"}],
        threadId=f"t-{time.monotonic_ns()}",
    )
    return first, post(url, first)


def answering(
    first: dict[str, Any], frames: list[dict[str, Any]], payload: Any, status: str = "resolved"
) -> dict[str, Any]:
    """The resume that answers the interrupt ``frames`` ended with, as @ag-ui/client sends it."""
    [interrupt] = frames[-1]["outcome"]["interrupts"]
    entry: dict[str, Any] = {"interruptId": interrupt["id"], "status": status}
    if status == "resolved":
        entry["payload"] = payload
    history = [*first["messages"], *messages_from(frames)]
    return run_input(history, threadId=first["threadId"], resume=[entry])


def error_of(frames: list[dict[str, Any]]) -> tuple[str, str]:
    assert frames[-1]["type"] == "RUN_ERROR", frames[-1]
    return frames[-1]["code"], frames[-1]["message"]


def results(frames: list[dict[str, Any]]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]


def test_ask_user_ends_the_run_with_an_input_required_interrupt_and_the_answer_is_its_result() -> (
    None
):
    """Point 4: the interrupt carries the question, its schema and the call; the answer is the
    call's result, the model reads it, and goes on."""
    with bridge(asks(), says("Booked.")) as (url, model):
        caps = httpx.get(f"{url}/capabilities").json()
        first, frames = asked(url)
        finished = frames[-1]
        assert finished["type"] == "RUN_FINISHED"
        [interrupt] = finished["outcome"]["interrupts"]
        assert interrupt["reason"] == "input_required"
        assert interrupt["message"] == QUESTION
        assert interrupt["responseSchema"] == SCHEMA
        assert interrupt["toolCallId"] == "call-ask"
        assert "expiresAt" in interrupt
        assert results(frames) == []
        answered = post(url, answering(first, frames, GOOD))
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert results(answered) == [json.dumps(GOOD, separators=(",", ":"))]
    sent = model.requests[-1]["messages"]
    [tool] = [m for m in sent if m["role"] == "tool"]
    assert (tool["tool_call_id"], json.loads(tool["content"])) == ("call-ask", GOOD)
    assert "Booked." in "".join(f.get("delta", "") for f in answered)
    # The capabilities say a person is asked (interrupts), though nothing waits for approval.
    assert caps["humanInTheLoop"] == {
        "supported": True,
        "approvals": False,
        "interrupts": True,
        "approveWithEdits": False,
    }
    assert "ask_user" in [tool["name"] for tool in caps["tools"]["items"]]


def test_a_text_question_without_a_schema_takes_text() -> None:
    """Point 4: no schema, a line of text."""
    with bridge(asks(json.dumps({"question": "Your name?"})), says("Hello.")) as (url, _):
        first, frames = asked(url)
        [interrupt] = frames[-1]["outcome"]["interrupts"]
        assert interrupt["responseSchema"] == {"type": "string"}
        wrong = post(url, answering(first, frames, {"name": "Ada"}))
        answered = post(url, answering(first, frames, "Ada"))
    assert error_of(wrong)[0] == "answer_invalid"
    assert results(answered) == ["Ada"]


def test_a_bad_answer_is_refused_with_the_reason_and_the_interrupt_is_kept() -> None:
    """Finding A: the answer off the schema ends with RUN_ERROR answer_invalid naming the field
    and the rule; the model is not asked; the same interrupt then takes a good answer."""
    with bridge(asks(), says("Booked.")) as (url, model):
        first, frames = asked(url)
        asked_before = len(model.requests)
        refused = post(url, answering(first, frames, BAD))
        assert len(model.requests) == asked_before
        answered = post(url, answering(first, frames, GOOD))
    code, message = error_of(refused)
    assert code == "answer_invalid"
    assert "date" in message and "'next tuesday' is not a 'date'" in message
    assert results(refused) == []
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert len(results(answered)) == 1


def test_a_replayed_answer_is_refused_and_asks_the_model_nothing() -> None:
    """Finding B: asked once, answered once: the same resume again (a double click, a retried
    POST) ends with RUN_ERROR interrupt_answered; no result, no model turn."""
    with bridge(asks(), says("Booked.")) as (url, model):
        first, frames = asked(url)
        body = answering(first, frames, GOOD)
        once = post(url, body)
        turns = len(model.requests)
        again = post(url, body)
        assert len(model.requests) == turns
    assert once[-1]["type"] == "RUN_FINISHED"
    assert error_of(again)[0] == "interrupt_answered"
    assert results(again) == []


def test_an_expired_question_is_refused_clearly_and_a_dismissal_still_goes() -> None:
    """Finding C: an answer after ``expiresAt`` is interrupt_expired and says so; dismissing
    it still goes (the model reads that the user did not answer)."""
    with bridge(asks(), says("OK."), approval_timeout=0.001) as (url, _):
        first, frames = asked(url)
        time.sleep(0.01)
        late = post(url, answering(first, frames, GOOD))
        dismissed = post(url, answering(first, frames, None, status="cancelled"))
    code, message = error_of(late)
    assert code == "interrupt_expired"
    assert "call-ask" in message and "expired" in message
    assert dismissed[-1]["type"] == "RUN_FINISHED"
    assert results(dismissed) == ["The user dismissed the question without answering it."]


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (json.dumps({"question": "Q?", "schema": {"type": "nope"}}), "not valid JSON Schema"),
        (json.dumps({"question": "Q?", "schema": [1]}), "must be a JSON object"),
        (json.dumps({"schema": SCHEMA}), "'question' must be a string"),
        (json.dumps({"question": "x" * MAX_QUESTION_CHARS}), "over 16384 characters"),
    ],
)
def test_a_call_that_makes_no_question_is_not_asked_and_the_model_reads_why(
    arguments: str, reason: str
) -> None:
    """Finding C: a schema the validator cannot use, or arguments past ``MAX_QUESTION_CHARS``
    (checked before they are parsed), put nothing to a person: the model reads why."""
    with bridge(asks(arguments), says("Sorry.")) as (url, _):
        _, frames = asked(url)
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert frames[-1].get("outcome") is None
    [result] = results(frames)
    assert result.startswith("Not asked:") and reason in result


def test_an_answer_past_its_limit_is_refused_before_it_is_validated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding C: an answer over ``MAX_ANSWER_BYTES`` is refused by its size; the validator is
    never made for it. The check runs in a worker thread, not on the event loop."""
    made: list[bool] = []  # per validator made: whether an event loop ran in its thread
    real = jsonschema.Draft202012Validator

    def counting(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            made.append(True)
        except RuntimeError:
            made.append(False)
        return real(*args, **kwargs)

    counting.FORMAT_CHECKER = real.FORMAT_CHECKER  # type: ignore[attr-defined]
    counting.check_schema = real.check_schema  # type: ignore[attr-defined]
    monkeypatch.setattr(jsonschema, "Draft202012Validator", counting)
    schema = {"type": "string"}
    with bridge(asks(json.dumps({"question": "Notes?", "schema": schema}))) as (url, _):
        first, frames = asked(url)
        made.clear()
        refused = post(url, answering(first, frames, "x" * (MAX_ANSWER_BYTES + 1)))
        assert made == []
        answered = post(url, answering(first, frames, "short"))
    code, message = error_of(refused)
    assert code == "answer_invalid" and f"over the limit of {MAX_ANSWER_BYTES}" in message
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert made == [False]  # the good one's, in a worker thread


def test_a_python_tool_asks_and_runs_with_the_answer() -> None:
    """Point 4: ``@asks_user``: the question made from the call's arguments, the answer held
    to the tool's schema and given as ``answer``; the model never sees that parameter."""
    call = asks(json.dumps({"room": "Blue"}), name="book_room")
    with bridge(call, says("Done.")) as (url, model):
        first, frames = asked(url)
        [tool] = [t for t in model.requests[0]["tools"] if t["function"]["name"] == "book_room"]
        assert "answer" not in tool["function"]["parameters"]["properties"]
        [interrupt] = frames[-1]["outcome"]["interrupts"]
        assert interrupt["message"] == "Book Blue for which day?"
        assert BOOKED == []
        refused = post(url, answering(first, frames, "soon"))
        answered = post(url, answering(first, frames, "2026-12-01"))
    assert error_of(refused)[0] == "answer_invalid"
    assert BOOKED == [{"room": "Blue", "answer": "2026-12-01"}]
    assert results(answered) == ["Blue booked for 2026-12-01"]


def test_a_resume_after_the_answer_as_a_tool_message_as_copilotkit_sends_it() -> None:
    """Point 4 with CopilotKit's ``useInterrupt``, which adds a tool message holding the answer
    (``JSON.stringify(payload)``) before it resumes: the call still waits for that answer, the
    bridge's result goes upstream once, the client's copy not beside it; a replay is refused."""
    with bridge(asks(), says("Booked.")) as (url, model):
        first, frames = asked(url)
        body = answering(first, frames, GOOD)
        body["messages"].append(
            {"id": "ck", "role": "tool", "toolCallId": "call-ask", "content": json.dumps(GOOD)}
        )
        answered = post(url, body)
        again = post(url, body)
        sent = model.requests[-1]["messages"]
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert results(answered) == [json.dumps(GOOD, separators=(",", ":"))]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["call-ask"]
    assert error_of(again)[0] == "interrupt_answered"


@pytest.mark.parametrize(
    ("added", "statement"),
    [
        ([], UNASKED_STATEMENT),
        (
            [
                {
                    "id": "ck",
                    "role": "tool",
                    "toolCallId": "call-ask",
                    "content": '{"status":"cancelled"}',
                }
            ],
            "The user dismissed the question without answering it.",
        ),
    ],
)
def test_a_question_left_unanswered_goes_upstream_as_such_on_later_turns(
    added: list[dict[str, Any]], statement: str
) -> None:
    """Point 4: the person wrote something else instead (or dismissed the card, as CopilotKit
    records it): on the next turn the call goes upstream with a result saying so, never an
    approval's words."""
    with bridge(asks(), says("OK.")) as (url, model):
        first, frames = asked(url)
        later = [
            *first["messages"],
            *messages_from(frames),
            *added,
            {"id": "u2", "role": "user", "content": "Never mind."},
        ]
        done = post(url, run_input(later, threadId=first["threadId"]))
        sent = model.requests[-1]["messages"]
    assert done[-1]["type"] == "RUN_FINISHED"
    assert [m["content"] for m in sent if m["role"] == "tool"] == [statement]


# --- the official clients -------------------------------------------------------------------


def talk(client: str, url: str, thread: str, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One conversation through ``@ag-ui/client`` (``tests/node/wire_agent.mjs``)."""
    talk = {
        "url": url,
        "threadId": thread,
        "messages": [{"id": "u1", "role": "user", "content": "Book a table"}],
        "turns": turns,
    }
    result = node("wire_agent.mjs", {"client": client, "conversations": [talk]})
    assert result["logged"] == [], f"the official client complained: {result['logged']}"
    [reports] = result["reports"]
    reports_: list[dict[str, Any]] = reports
    return reports_


@pytest.mark.parametrize("client", CLIENTS)
def test_the_official_clients_answer_a_question(client: str) -> None:
    """Point 4 through @ag-ui/client 1.0.0 and 0.0.59: the client holds the input_required
    interrupt; a bad answer is refused and the client keeps it; the good one is the result;
    a replay of the used interrupt (another tab of the thread, holding it still) is refused."""
    with bridge(asks(), says("Booked.")) as (url, model):
        thread = f"t-{client}-{time.monotonic_ns()}"
        first = talk(client, url, thread, [{}, {"answer": BAD}, {"answer": GOOD}])
        [interrupt] = first[0]["pendingInterrupts"]
        replay = [{"interruptId": interrupt["id"], "status": "resolved", "payload": GOOD}]
        turns = len(model.requests)
        again = talk(client, url, thread, [{"add": first[2]["before"][1:], "resume": replay}])
        assert len(model.requests) == turns
    _, refused, answered = first
    assert interrupt["reason"] == "input_required"
    assert interrupt["message"] == QUESTION
    assert interrupt["responseSchema"] == SCHEMA
    assert interrupt["toolCallId"] == "call-ask"
    assert "answer_invalid" in refused["body"]
    assert refused["pendingInterrupts"] == [interrupt]  # kept, to be answered again
    assert answered["pendingInterrupts"] == []
    tools = [m for m in answered["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tools] == [GOOD]
    assert answered["messages"][-1]["role"] == "assistant"
    assert answered["messages"][-1]["content"] == "Booked."
    assert "interrupt_answered" in again[0]["body"]
