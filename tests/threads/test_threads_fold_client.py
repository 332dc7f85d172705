"""The official clients judge the thread fold (``bridge/serve/threads/fold.py``), over real
sockets: a scripted upstream, a real bridge, ``@ag-ui/client`` 1.0.0 and 0.0.59 in Node.

Issue 42, point 1: the bridge keeps each thread's messages "as the client would hold them after
applying the events". Each conversation goes through the client over HTTP; the bytes it
received are folded by ``ThreadFold`` from what the client held before the run, and the fold
must give exactly the client's ``agent.messages``, ``agent.state`` and ``pendingInterrupts``
(compared as JSON). And a run cut anywhere (a cancel) and closed with ``open_ends`` and its
``RUN_FINISHED`` is a stream the client accepts, holding what the fold holds.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fold_node import CLIENTS, applied, as_json, conversations, folded, frames

from bridge.cli.demo import SCRIPTED_MODELS
from bridge.core.encode import encode_event
from bridge.serve.threads.fold import ThreadFold
from bridge.serve.tools.python_tools import requires_approval
from servers import ASK_TOOLS, TOOLS, post, run_input, scripted_stack

SECRET = "Qx7Vb2Kp9Lm4Nz8Rt1Wy6Hd5Jf0Gs3"
TESTS = Path(__file__).resolve().parents[1]
MEDIA = TESTS / "hostile" / "peers_tool_parts.py"
UI = TESTS / "mcp_ui_server.py"


def get_time() -> str:
    """The current time."""
    return "12:00"


@requires_approval
def send_mail(to: str, subject: str) -> str:
    """Send an e-mail."""
    return f"mail sent to {to}"


def user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def talks(url: str) -> dict[str, dict[str, Any]]:
    """The conversations, by what each shows."""
    out: dict[str, dict[str, Any]] = {
        "reasoning and text, then a second run on the first": {
            "turns": [{"add": [user("Hi")]}, {"add": [user("Hi again", "u2")]}]
        },
        "a server tool's result and a frontend call left pending": {
            "turns": [
                {
                    "add": [user("What time is it? And make the background lightblue.")],
                    "tools": TOOLS,
                }
            ]
        },
        "an approval's interrupt, then its resume": {
            "turns": [{"add": [user("Please send_mail and get_time")]}, {"approve": True}]
        },
        "shared state: a plan ticked off, then a to-do added": {
            "state": {"todos": [{"text": "buy milk", "done": False}]},
            "turns": [
                {"add": [user("Make a plan to bake a cake")]},
                {"add": [user("Add a to-do: call Bob", "u2")]},
            ],
        },
    }
    for model in SCRIPTED_MODELS:  # every dialect: reasoning fields, tags, calls written as text
        turn = {"add": [user(ASK_TOOLS)], "tools": TOOLS, "forwardedProps": {"model": model}}
        out[f"frontend calls in the {model} dialect"] = {"turns": [turn]}
    for name, talk in out.items():
        talk.update(url=url, threadId=name[:40])
    return out


def judged(turn: dict[str, Any]) -> tuple[ThreadFold, Counter[str]]:
    """The fold of the bytes the client received, from what it held before the run, checked
    against what it held after; and the count of each event type in them."""
    assert not turn["failed"] and turn["rejected"] is None, turn["rejected"]
    body = frames(turn["body"])
    fold = folded(turn["before"], turn["stateBefore"], body, turn["interruptsBefore"])
    assert fold.skipped == 0
    assert fold.ended
    assert as_json(fold.messages) == turn["messages"]
    assert as_json(fold.state) == turn["state"]
    assert as_json(fold.interrupts) == turn["pendingInterrupts"]
    return fold, Counter(json.loads(frame[len("data: ") :])["type"] for frame in body)


@pytest.mark.parametrize("client", CLIENTS)
def test_the_fold_of_what_the_client_received_is_what_it_holds(client: str) -> None:
    """Point 1 (the thread as the client holds it): reasoning and text, every scripted dialect
    (reasoning fields and tags, tool calls as text), frontend calls left pending, a server
    tool's result, an approval's interrupt and its resume (the result placed after the call's
    message, before the messages that followed it), shared state edited by ``STATE_DELTA``, and
    runs that go on from the one before: for each run, the fold gives the client's messages,
    state and pending interrupts exactly."""
    with scripted_stack(
        tools=[get_time, send_mail], shared_state=True, secret=SECRET, approve=("delete_*",)
    ) as stack:
        by_name = talks(stack.bridge_url)
        reports = dict(zip(by_name, conversations(client, list(by_name.values())), strict=True))

    (first, kinds), (second, again) = map(
        judged, reports["reasoning and text, then a second run on the first"]
    )
    for counted in (kinds, again):
        assert counted["REASONING_MESSAGE_CONTENT"] > 1 and counted["TEXT_MESSAGE_CONTENT"] > 1
    held = as_json(first.messages)
    assert as_json(second.messages)[: len(held)] == held and len(second.messages) == len(held) + 3

    (mixed, kinds), *_ = map(
        judged, reports["a server tool's result and a frontend call left pending"]
    )
    results = {m["toolCallId"] for m in mixed.messages if m["role"] == "tool"}
    calls = [c["id"] for m in mixed.messages for c in m.get("toolCalls", [])]
    assert kinds["TOOL_CALL_RESULT"] == 1 and len(calls) == 2 and len(results) == 1
    assert results < set(calls)  # one answered by the bridge, one left to the page

    interrupted, resumed = (judged(t) for t in reports["an approval's interrupt, then its resume"])
    assert [i["reason"] for i in interrupted[0].interrupts] == ["tool_call"]
    assert resumed[0].interrupts == []
    waiting = interrupted[0].interrupts[0]["toolCallId"]
    roles = [(m["role"], m.get("toolCallId")) for m in resumed[0].messages]
    answer = roles.index(("tool", waiting))
    assert answer < len(roles) - 1, "the result goes after its call, not at the end"

    planned, added = (
        judged(t) for t in reports["shared state: a plan ticked off, then a to-do added"]
    )
    assert planned[1]["STATE_DELTA"] == 4 and added[1]["STATE_DELTA"] == 1
    assert [s["status"] for s in planned[0].state["steps"]] == ["completed"] * 3
    assert [t["text"] for t in added[0].state["todos"]] == ["buy milk", "call Bob"]

    for model in SCRIPTED_MODELS:
        ((fold, kinds),) = map(judged, reports[f"frontend calls in the {model} dialect"])
        assert kinds["TOOL_CALL_START"] == 2 and kinds["TOOL_CALL_RESULT"] == 0, model
        assert sum(len(m.get("toolCalls", [])) for m in fold.messages) == 2, model


@pytest.mark.parametrize("client", CLIENTS)
def test_the_fold_holds_tool_parts_and_activities_as_each_client_line_does(client: str) -> None:
    """Point 1, where the client lines differ: an MCP tool's result reaches a 1.0 client as
    content parts and a 0.0.x client as text, and the fold of each stream holds what each holds;
    an MCP App's ``ACTIVITY_SNAPSHOT`` becomes the activity message the client keeps."""
    servers = {"media": f"{sys.executable} {MEDIA} --size 64", "ui": f"{sys.executable} {UI}"}
    with scripted_stack(mcp_servers=servers) as stack:
        talk = {
            "url": stack.bridge_url,
            "turns": [
                {"add": [user("Please media__picture now")]},
                {"add": [user("Please show ui__board", "u2")]},
            ],
        }
        ((pictured, shown),) = conversations(client, [talk])
    fold, kinds = judged(pictured)
    (tool,) = [m for m in fold.messages if m["role"] == "tool"]
    assert isinstance(tool["content"], list if client == "1.0.0" else str)
    fold, kinds = judged(shown)
    assert kinds["ACTIVITY_SNAPSHOT"] == 1
    assert [m["activityType"] for m in fold.messages if m["role"] == "activity"] == ["mcp-apps"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_run_cut_at_any_event_and_closed_by_open_ends_is_accepted(client: str) -> None:
    """Point 5 (a cancelled run ends cleanly): a recorded run with reasoning, a tool call's
    arguments, its result from a server tool and the answer's text, cut after each of its
    events, then closed with ``open_ends()`` and ``RUN_FINISHED`` (outcome ``cancelled`` for 1.0; none for 0.0.x, whose
    schema has no such outcome), is accepted by the client's verifier, without a warning, and
    the client then holds what the fold holds."""
    with scripted_stack(tools=[get_time]) as stack:
        body = run_input([user("What time is it?")])
        events = post(stack.bridge_url, body)
    kinds = {e["type"] for e in events}
    assert {"REASONING_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"} <= kinds
    assert "TOOL_CALL_RESULT" in kinds and len(events) > 50
    finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": "thread-1"}
    finished["runId"] = events[0]["runId"]
    if client == "1.0.0":
        finished["outcome"] = {"type": "cancelled"}
    cases, folds = [], []
    for cut in range(1, len(events)):
        fold = ThreadFold(body["messages"], {})
        for event in events[:cut]:
            fold.apply(event)
        ends = [json.loads(encode_event(e)[len("data: ") : -2]) for e in fold.open_ends()]
        for event in [*ends, finished]:
            fold.apply(event)
        assert fold.ended and fold.skipped == 0, cut
        cases.append(
            {"messages": body["messages"], "state": {}, "events": [*events[:cut], *ends, finished]}
        )
        folds.append(fold)
    for cut, (report, fold) in enumerate(zip(applied(client, cases), folds, strict=True), 1):
        assert report["rejected"] is None and not report["failed"], (cut, report["rejected"])
        assert report["logged"] == [], (cut, report["logged"])
        assert as_json(fold.messages) == report["messages"], cut
