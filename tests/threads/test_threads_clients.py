"""The official clients restore a thread (issue 42, point 3): ``@ag-ui/client`` 1.0.0 and 0.0.59,
over real HTTP, hold a conversation; then a fresh agent of the same thread (a reload: no
messages, no state) runs with no messages, the bridge's hydrate, and ends holding exactly the
messages, state and pending interrupts the first held; an approval waiting before the reload is
answered after it, and the approved call runs."""

from __future__ import annotations

from typing import Any

import pytest
from fold_node import CLIENTS, conversations
from threads_tools import body, read_some

from bridge.serve.tools.python_tools import requires_approval
from node_tools import official
from servers import ASK_TOOLS, TOOLS, scripted_stack

SECRET = "Qx7Vb2Kp9Lm4Nz8Rt1Wy6Hd5Jf0Gs3"
SENT: list[str] = []


def get_time() -> str:
    """The current time."""
    return "12:00"


@requires_approval
def send_mail(to: str, subject: str) -> str:
    """Send an e-mail."""
    SENT.append(to)
    return f"mail sent to {to}"


def user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def _held(turn: dict[str, Any]) -> tuple[Any, Any, Any]:
    assert not turn["failed"] and turn["rejected"] is None, turn["rejected"]
    return turn["messages"], turn["state"], turn["pendingInterrupts"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_reloaded_client_holds_its_thread_again(client: str) -> None:
    talks: dict[str, list[dict[str, Any]]] = {
        "text": [{"add": [user("Hi")]}, {"add": [user("Hi again", "u2")]}],
        "tools": [{"add": [user(f"What time is it? {ASK_TOOLS}")], "tools": TOOLS}],
        "approval": [{"add": [user("Please send_mail and get_time")]}],
        "state": [{"add": [user("Make a plan to bake a cake")]}],
    }
    reload = {"approval": [{"add": []}, {"approve": True}]}
    SENT.clear()
    with scripted_stack(
        tools=[get_time, send_mail], shared_state=True, secret=SECRET, threads="memory"
    ) as stack:
        spec = [
            {"url": stack.bridge_url, "threadId": f"{client}-{name}", "turns": turns}
            for name, turns in talks.items()
        ]
        spec += [  # the same threads, reloaded: an agent with nothing, hydrated
            {
                "url": stack.bridge_url,
                "threadId": f"{client}-{name}",
                "turns": reload.get(name, [{"add": []}]),
            }
            for name in talks
        ]
        before, after = (
            dict(zip(talks, reports, strict=True))
            for reports in (lambda r: (r[: len(talks)], r[len(talks) :]))(
                conversations(client, spec)
            )
        )
    for name in talks:
        held = _held(before[name][-1])
        restored = _held(after[name][0])
        assert after[name][0]["before"] == []  # the reloaded agent began with nothing
        assert restored == held, name
    _, state, _ = _held(before["state"][-1])
    assert [s["status"] for s in state["steps"]] == ["completed"] * 3
    assert [i["reason"] for i in _held(before["approval"][-1])[2]] == ["tool_call"]
    # The approval answered after the reload runs the call, once.
    resumed, _, left = _held(after["approval"][1])
    assert left == [] and len(SENT) == 1, SENT
    assert any(m["role"] == "tool" and "mail sent" in str(m["content"]) for m in resumed)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_reloaded_client_follows_the_answer_going_on_to_its_end(client: str) -> None:
    """A reload in the middle of an answer: the fresh agent's hydrate follows the run (its
    events from its start, after the thread as it began), and the client ends holding the
    whole answer, once, as a client that never left holds it."""
    with scripted_stack(pace=0.02, threads="memory") as stack:
        thread = f"{client}-going"
        whole = official(
            [{"url": stack.bridge_url, "threadId": f"{thread}-ref", "messages": [user("Hi")]}],
            client=client,
        )[0]
        given = body(thread, "Hi")
        given["messages"] = [user("Hi")]
        read_some(stack.bridge_url, given, 4)  # the page reloads mid-answer
        [report] = official(
            [{"url": stack.bridge_url, "threadId": thread, "messages": []}], client=client
        )
    assert not report["failed"] and report["rejected"] is None, report["rejected"]
    kinds = [event["type"] for event in report["events"]]
    assert kinds[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"] and kinds[-1] == "RUN_FINISHED"

    def said(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return [(m["role"], m.get("content")) for m in messages]

    assert said(report["messages"]) == said(whole["messages"])


def test_a_thread_a_1_0_client_made_with_a_tools_parts_hydrates_in_a_0_0_59_client() -> None:
    """A 1.0 client may hold a tool's result as content parts; 0.0.59's schema takes a tool
    message's content as a string only. Its hydrate gives that client the text of the parts,
    which it accepts; a 1.0 client is given the parts as they were."""
    parts = [{"type": "text", "text": "sunny"}, {"type": "text", "text": "22 C"}]
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    messages = [
        user("What is the weather?"),
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": parts},
    ]
    with scripted_stack(threads="memory") as stack:
        [made] = official(
            [{"url": stack.bridge_url, "threadId": "parts", "messages": messages}], client="1.0.0"
        )
        assert not made["failed"] and made["rejected"] is None, made["rejected"]
        hydrate = {"url": stack.bridge_url, "threadId": "parts", "messages": []}
        [old] = official([hydrate], client="0.0.59")
        [new] = official([hydrate], client="1.0.0")
    for report in (old, new):
        assert not report["failed"] and report["rejected"] is None, report["rejected"]
    [old_tool] = [m for m in old["messages"] if m["role"] == "tool"]
    [new_tool] = [m for m in new["messages"] if m["role"] == "tool"]
    assert old_tool["content"] == "sunny\n22 C"
    assert new_tool["content"] == parts
