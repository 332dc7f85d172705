"""The thread fold (``bridge/serve/threads/fold.py``) event by event, and against input no one
checked (issue 42, point 1: the bridge keeps each thread "as the client would hold it after
applying the events"; nothing from outside is trusted).

Each crafted stream below is also run through ``@ag-ui/client`` 1.0.0's own pipeline (no HTTP,
``tests/node/apply_events.mjs``), which must end holding what the fold holds: the client, not
this file, says what each event does. The malformed events are the fold's own promise: none
raises, none changes what is held, each is counted; and nothing grows past what came in.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from fold_node import applied, as_json

from agui_rules import check_frames
from bridge.core.encode import encode_event
from bridge.serve.threads.fold import ThreadFold
from bridge.serve.threads.held import TITLE_CHARS


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


STARTED = ev("RUN_STARTED", threadId="t", runId="r")
FINISHED = ev("RUN_FINISHED", threadId="t", runId="r")
USER = {"id": "u1", "role": "user", "content": "Hi"}


def text(message_id: str, *deltas: str, **start: Any) -> list[dict[str, Any]]:
    start.setdefault("role", "assistant")
    return [
        ev("TEXT_MESSAGE_START", messageId=message_id, **start),
        *(ev("TEXT_MESSAGE_CONTENT", messageId=message_id, delta=d) for d in deltas),
        ev("TEXT_MESSAGE_END", messageId=message_id),
    ]


def call(call_id: str, name: str, *deltas: str, **start: Any) -> list[dict[str, Any]]:
    return [
        ev("TOOL_CALL_START", toolCallId=call_id, toolCallName=name, **start),
        *(ev("TOOL_CALL_ARGS", toolCallId=call_id, delta=d) for d in deltas),
        ev("TOOL_CALL_END", toolCallId=call_id),
    ]


def result(message_id: str, call_id: str, content: Any = "ok") -> dict[str, Any]:
    return ev("TOOL_CALL_RESULT", messageId=message_id, toolCallId=call_id, content=content)


ASKED = [
    USER,
    {
        "id": "a1",
        "role": "assistant",
        "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    },
    {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "one"},
    {"id": "u2", "role": "user", "content": "And?"},
]
HELD = [
    USER,
    {"id": "r0", "role": "reasoning", "content": "thinking"},
    {"id": "x0", "role": "activity", "activityType": "board", "content": {"n": 1}},
    {"id": "a0", "role": "assistant", "content": "old"},
]

#: name → (the messages held before, the state, the events): every kind the fold applies.
CASES: dict[str, tuple[list[dict[str, Any]], Any, list[dict[str, Any]]]] = {
    "text, deltas joined": ([USER], {}, [STARTED, *text("a", "Hel", "lo", " you"), FINISHED]),
    "text of another role, with a name": (
        [],
        {},
        [STARTED, *text("d", "be brief", role="developer", name="ops"), FINISHED],
    ),
    "reasoning, its span, its encrypted value": (
        [USER],
        {},
        [
            STARTED,
            ev("REASONING_START", messageId="r"),
            ev("REASONING_MESSAGE_START", messageId="r", role="reasoning"),
            ev("REASONING_MESSAGE_CONTENT", messageId="r", delta="Let me "),
            ev("REASONING_MESSAGE_CONTENT", messageId="r", delta="think."),
            ev("REASONING_MESSAGE_END", messageId="r"),
            ev("REASONING_END", messageId="r"),
            ev("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="r", encryptedValue="e1"),
            *text("a", "Done."),
            FINISHED,
        ],
    ),
    "tool calls under the text's message, a new parent, none, a user's id": (
        [USER],
        {},
        [
            STARTED,
            *text("a", "Calling."),
            *call("c1", "f", '{"x"', ": 1}", parentMessageId="a"),
            *call("c2", "g", "{}", parentMessageId="p-new"),
            *call("c3", "h", "{}"),
            *call("c4", "k", "{}", parentMessageId="u1"),
            ev("REASONING_ENCRYPTED_VALUE", subtype="tool-call", entityId="c2", encryptedValue="e"),
            FINISHED,
        ],
    ),
    "results after their call's message and its results, or at the end": (
        ASKED,
        {},
        [
            STARTED,
            result("t2", "c2", [{"type": "text", "text": "two"}]),
            result("t3", "c-unknown"),
            FINISHED,
        ],
    ),
    "a start for a call held already renames it; its arguments go on": (
        ASKED,
        {},
        [STARTED, *call("c2", "g2", ', "more"'), FINISHED],
    ),
    "state: a snapshot, deltas, one that fails and changes nothing": (
        [USER],
        {"n": 0},
        [
            STARTED,
            ev("STATE_DELTA", delta=[{"op": "replace", "path": "/n", "value": 1}]),
            ev("STATE_SNAPSHOT", snapshot={"todos": ["a"], "n": 2}),
            ev(
                "STATE_DELTA",
                delta=[
                    {"op": "add", "path": "/todos/-", "value": "b"},
                    {"op": "copy", "from": "/todos", "path": "/copy"},
                    {"op": "move", "from": "/n", "path": "/m"},
                ],
            ),
            ev(
                "STATE_DELTA",
                delta=[
                    {"op": "remove", "path": "/copy"},
                    {"op": "test", "path": "/m", "value": 99},
                ],
            ),
            FINISHED,
        ],
    ),
    "a messages snapshot: the client's reasoning and activities stay": (
        HELD,
        {},
        [
            STARTED,
            ev(
                "MESSAGES_SNAPSHOT",
                messages=[{**USER, "content": "Hi!"}, {"id": "a9", "role": "assistant"}],
            ),
            FINISHED,
        ],
    ),
    "a messages snapshot that owns the activities and holds reasoning": (
        HELD,
        {},
        [
            STARTED,
            ev(
                "MESSAGES_SNAPSHOT",
                messages=[USER, {"id": "r9", "role": "reasoning", "content": "x"}],
                metadata={"@ag-ui/client": {"authoritativeActivityTypes": ["board"]}},
            ),
            FINISHED,
        ],
    ),
    "a messages snapshot that owns every activity type, holding none": (
        HELD,
        {},
        [
            STARTED,
            ev(
                "MESSAGES_SNAPSHOT",
                messages=[USER],
                metadata={"@ag-ui/client": {"authoritativeActivityTypes": None}},
            ),
            FINISHED,
        ],
    ),
    "activities: new, replaced, kept, patched": (
        HELD,
        {},
        [
            STARTED,
            ev("ACTIVITY_SNAPSHOT", messageId="x1", activityType="card", content={"a": 1}),
            ev("ACTIVITY_SNAPSHOT", messageId="x0", activityType="board", content={"n": 2}),
            ev(
                "ACTIVITY_SNAPSHOT",
                messageId="x1",
                activityType="card",
                content={"a": 9},
                replace=False,
            ),
            ev(
                "ACTIVITY_DELTA",
                messageId="x1",
                activityType="card",
                patch=[{"op": "add", "path": "/b", "value": 2}],
            ),
            FINISHED,
        ],
    ),
    "a run's input messages join those held": (
        [USER],
        {},
        [
            {
                **STARTED,
                "input": {
                    "threadId": "t",
                    "runId": "r",
                    "messages": [
                        {**USER, "content": "ignored: held already"},
                        {"id": "u3", "role": "user", "content": "new"},
                    ],
                    "tools": [],
                    "context": [],
                    "state": {},
                    "forwardedProps": {},
                },
            },
            FINISHED,
        ],
    ),
    "metadata merged into the message and the call": (
        [USER],
        {},
        [
            STARTED,
            ev("TEXT_MESSAGE_START", messageId="a", role="assistant", metadata={"k": 1}),
            ev("TEXT_MESSAGE_CONTENT", messageId="a", delta="x", metadata={"k": 2, "j": 1}),
            ev("TEXT_MESSAGE_END", messageId="a", metadata={"done": True}),
            *call("c", "f", "{}", parentMessageId="a", metadata={"m": "call"}),
            FINISHED,
        ],
    ),
    "an interrupt, then a run that finishes": (
        [USER],
        {},
        [
            STARTED,
            *call("c", "f", "{}"),
            {
                **FINISHED,
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": "c"}],
                },
            },
            STARTED,
            *text("b", "after"),
            FINISHED,
        ],
    ),
    "steps, custom and raw events change nothing": (
        [USER],
        {},
        [
            STARTED,
            ev("STEP_STARTED", stepName="s"),
            ev("CUSTOM", name="PredictState", value=[]),
            ev("RAW", event={"x": 1}),
            ev("STEP_FINISHED", stepName="s"),
            FINISHED,
        ],
    ),
}


def fold_of(messages: list[dict[str, Any]], state: Any, events: list[Any]) -> ThreadFold:
    fold = ThreadFold(copy.deepcopy(messages), copy.deepcopy(state))
    for event in events:
        fold.apply(copy.deepcopy(event))
    return fold


def test_the_client_holds_what_the_fold_holds_for_every_kind_of_event() -> None:
    """Point 1: for each crafted stream, ``@ag-ui/client`` 1.0.0's own pipeline (its verifier,
    then its reducer) ends with the messages, state and pending interrupts the fold ends with."""
    cases = [{"messages": m, "state": s, "events": e} for m, s, e in CASES.values()]
    for name, report in zip(CASES, applied("1.0.0", cases), strict=True):
        fold = fold_of(*CASES[name])
        assert report["rejected"] is None, (name, report["rejected"])
        assert fold.skipped == (1 if "fails" in name else 0), name
        assert as_json(fold.messages) == report["messages"], name
        assert as_json(fold.state) == report["state"], name
        assert as_json(fold.interrupts) == report["pendingInterrupts"], name


def test_what_each_kind_of_event_makes() -> None:
    """The same cases, read: what the fold holds after a few of them, written out."""
    fold = fold_of(*CASES["text, deltas joined"])
    assert fold.messages[-1] == {"id": "a", "role": "assistant", "content": "Hello you"}
    assert fold.ended and fold.interrupts == []
    fold = fold_of(*CASES["results after their call's message and its results, or at the end"])
    assert [m["id"] for m in fold.messages] == ["u1", "a1", "t1", "t2", "u2", "t3"]
    fold = fold_of(*CASES["state: a snapshot, deltas, one that fails and changes nothing"])
    assert fold.state == {"todos": ["a", "b"], "copy": ["a", "b"], "m": 2}
    fold = fold_of(*CASES["tool calls under the text's message, a new parent, none, a user's id"])
    assert [(m["id"], [c["id"] for c in m.get("toolCalls", [])]) for m in fold.messages] == [
        ("u1", []),
        ("a", ["c1"]),
        ("p-new", ["c2"]),
        ("c3", ["c3"]),
        ("c4", ["c4"]),
    ]
    assert fold.messages[1]["toolCalls"][0]["function"]["arguments"] == '{"x": 1}'
    messages, state, events = CASES["an interrupt, then a run that finishes"]
    fold = fold_of(messages, state, events[:5])
    assert [i["id"] for i in fold.interrupts] == ["i1"]


def test_frames_are_read_as_the_bridge_writes_them() -> None:
    """``apply_frame`` reads the bridge's ``data:`` frames, with an ``id:`` line or comments
    too (what a reconnect replays), and a keep-alive comment changes nothing."""
    fold = ThreadFold([USER], {})
    for event in [STARTED, *text("a", "x", "y")]:
        fold.apply_frame(f"data: {json.dumps(event)}\n\n")
    fold.apply_frame(": keep-alive\n\n")
    fold.apply_frame(f"id: r.9\ndata: {json.dumps(FINISHED)}\n\n")
    assert fold.messages[-1]["content"] == "xy" and fold.ended and fold.skipped == 0


#: Events no client would apply; after a stream that left a text open.
MALFORMED: list[Any] = [
    None,
    [],
    "TEXT_MESSAGE_END",
    {"type": 7},
    {"type": ["TEXT_MESSAGE_END"]},
    {"messageId": "a"},
    ev("TEXT_MESSAGE_CONTENT", messageId="a", delta=5),
    ev("TEXT_MESSAGE_CONTENT", messageId=["a"], delta="x"),
    ev("TEXT_MESSAGE_CONTENT", delta="x"),
    ev("TEXT_MESSAGE_CONTENT", messageId="nobody", delta="x"),
    ev("TEXT_MESSAGE_START", messageId="a", role="assistant"),
    ev("TEXT_MESSAGE_START", messageId="b", role={"x": 1}),
    ev("TEXT_MESSAGE_END", messageId="nobody"),
    ev("REASONING_MESSAGE_CONTENT", messageId="a", delta="x"),
    ev("REASONING_END", messageId="a"),
    ev("TOOL_CALL_ARGS", toolCallId="nobody", delta="{}"),
    ev("TOOL_CALL_START", toolCallId="c", toolCallName=None),
    ev("TOOL_CALL_END", toolCallId="c9"),
    ev("TOOL_CALL_RESULT", messageId="t", toolCallId="c", content={"not": "text"}),
    ev("TOOL_CALL_RESULT", messageId="t", toolCallId="c", content=3),
    ev("TOOL_CALL_RESULT", messageId=None, toolCallId="c", content="x"),
    ev("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="nobody", encryptedValue="e"),
    ev("STATE_SNAPSHOT"),
    ev("STATE_DELTA", delta={"op": "add"}),
    ev("STATE_DELTA", delta=[{"op": "add", "path": "/x"}]),
    ev("STATE_DELTA", delta=[{"op": "remove", "path": "/nothing"}]),
    ev("STATE_DELTA", delta=[{"op": "add", "path": "/__proto__/x", "value": 1}]),
    ev("STATE_DELTA", delta=[{"op": "add", "path": "/x", "value": "\ud800"}]),
    ev("MESSAGES_SNAPSHOT", messages={"id": "m"}),
    ev("MESSAGES_SNAPSHOT", messages=[{"role": "user"}]),
    ev("MESSAGES_SNAPSHOT", messages=[{"id": 1, "role": "user"}]),
    ev("ACTIVITY_SNAPSHOT", messageId="x", activityType="t", content="text"),
    ev("ACTIVITY_DELTA", messageId="nobody", activityType="t", patch=[]),
    ev("ACTIVITY_DELTA", messageId="u1", activityType="t", patch=[]),
    ev("STEP_FINISHED", stepName="never"),
    {**STARTED, "input": {"messages": "all of them"}},
    STARTED,  # a run is going
    FINISHED,  # a text is open
    {**FINISHED, "outcome": {"type": "interrupt", "interrupts": "i1"}},
]
FRAMES = [
    "data: {not json\n\n",
    'data: "\\ud800"\n\n',
    "data: " + "[" * 2000 + "]" * 2000 + "\n\n",
    "data: [1, 2]\n\n",
]


@pytest.mark.parametrize("bad", MALFORMED, ids=lambda bad: json.dumps(bad)[:60])
def test_an_event_no_client_would_apply_is_skipped_and_changes_nothing(bad: Any) -> None:
    """Nothing from outside is trusted: an event of the wrong shape or out of order raises
    nothing, changes nothing the fold holds, and is counted."""
    fold = fold_of([USER], {"n": 1}, [STARTED, *text("a", "x")[:2]])
    before = json.dumps([fold.messages, fold.state, fold.interrupts, fold.ended])
    fold.apply(copy.deepcopy(bad))
    assert json.dumps([fold.messages, fold.state, fold.interrupts, fold.ended]) == before
    assert fold.skipped == 1


@pytest.mark.parametrize("frame", FRAMES, ids=range(len(FRAMES)))
def test_a_frame_that_is_no_event_is_skipped(frame: str) -> None:
    """Bad JSON, a lone surrogate, JSON nested past orjson's limit (no recursion of ours), JSON
    that is no event: skipped and counted."""
    fold = fold_of([USER], {}, [STARTED])
    fold.apply_frame(frame)
    assert fold.messages == [USER] and fold.skipped == 1


def test_after_the_end_only_a_new_run_is_applied() -> None:
    fold = fold_of([USER], {}, [STARTED, FINISHED, *text("late", "x")])
    assert fold.messages == [USER] and fold.skipped == 3
    fold.apply(STARTED)
    fold.apply(ev("RUN_ERROR", message="boom"))
    assert fold.ended and fold.skipped == 3


def test_the_interrupts_a_thread_waits_on_outlive_an_error_not_a_finished_run() -> None:
    """As the client's ``pendingInterrupts``: set by an interrupt outcome, kept by a run that
    errs, cleared by one that finishes."""
    waiting = [{"id": "i1", "reason": "tool_call"}]
    fold = ThreadFold([USER], {}, interrupts=waiting)
    for event in [STARTED, ev("RUN_ERROR", message="x")]:
        fold.apply(event)
    assert fold.interrupts == waiting
    for event in [STARTED, FINISHED]:
        fold.apply(event)
    assert fold.interrupts == []


def test_the_callers_messages_and_events_are_left_as_they_were() -> None:
    messages = copy.deepcopy(ASKED)
    events = [STARTED, *call("c2", "g", "+"), *text("a1", "more"), result("t2", "c2"), FINISHED]
    kept = copy.deepcopy(events)
    fold = ThreadFold(messages, {})
    for event in events:
        fold.apply(event)
    assert messages == ASKED and events == kept
    assert fold.messages[1]["toolCalls"][1]["function"]["arguments"] == "{}+"


def test_copies_bring_in_no_more_than_the_input_brought() -> None:
    """A patch that copies the state into itself doubles it: eighteen such operations in one
    patch, or one per patch thirty times, would make it 2^18 or 2^30 times bigger. The fold
    applies the copies the input pays for and skips the rest, so what it holds stays within
    twice what it was given."""
    state = {"v": ["x" * 1000]}
    double = {"op": "copy", "from": "/v", "path": "/v/-"}  # v: [x] → [x, [x]] → …
    once = fold_of([USER], state, [STARTED, ev("STATE_DELTA", delta=[double])])
    assert once.skipped == 0 and once.state["v"] == ["x" * 1000, ["x" * 1000]]  # paid for
    frames = [STARTED, ev("STATE_DELTA", delta=[double] * 18)]
    frames += [ev("STATE_DELTA", delta=[double])] * 30
    fold = fold_of([USER], state, frames)
    given = len(orjson.dumps(state)) + sum(len(orjson.dumps(frame)) for frame in frames)
    assert fold.skipped >= 29
    assert len(orjson.dumps(fold.state)) <= 2 * given


def test_a_patch_on_a_state_nested_past_the_bound_is_skipped_without_recursion() -> None:
    deep: Any = 1
    for _ in range(500):
        deep = {"d": deep}
    fold = ThreadFold([USER], deep)
    for event in [STARTED, ev("STATE_DELTA", delta=[{"op": "add", "path": "/x", "value": 1}])]:
        fold.apply(event)
    assert fold.skipped == 1 and "x" not in fold.state


@pytest.mark.parametrize(
    ("messages", "title"),
    [
        ([USER], "Hi"),
        (
            [{"id": "u", "role": "user", "content": "  What's \n\n the\tweather  "}],
            "What's the weather",
        ),
        (
            [
                {
                    "id": "u",
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}},
                        {"type": "text", "text": "Describe"},
                        {"type": "text", "text": " this"},
                    ],
                }
            ],
            "Describe this",
        ),
        ([{"id": "s", "role": "system", "content": "Be brief"}], ""),
        ([{"id": "u", "role": "user", "content": "   "}, USER], "Hi"),
        ([], ""),
    ],
)
def test_a_thread_is_titled_by_its_first_user_words(
    messages: list[dict[str, Any]], title: str
) -> None:
    assert ThreadFold(messages).title() == title


def test_a_long_title_is_cut_with_an_ellipsis() -> None:
    words = " ".join(f"word{i}" for i in range(100_000))
    title = ThreadFold([{"id": "u", "role": "user", "content": words}]).title()
    assert len(title) == TITLE_CHARS and title.endswith("…")
    assert words.startswith(title[:-1].rstrip())


def test_open_ends_close_everything_open_with_each_openers_subagent() -> None:
    """Point 5: what a cancelled run has open is closed in an order the client accepts, each
    closer tagged as its opener was; then a ``RUN_FINISHED`` ends the run."""
    events = [
        STARTED,
        ev("STEP_STARTED", stepName="plan"),
        ev("REASONING_START", messageId="r"),
        ev("REASONING_MESSAGE_START", messageId="r", role="reasoning"),
        ev("TEXT_MESSAGE_START", messageId="a", role="assistant", subagentRunId="s1"),
        ev("TOOL_CALL_START", toolCallId="c", toolCallName="f", parentMessageId="a"),
        ev("TOOL_CALL_ARGS", toolCallId="c", delta='{"x":'),
    ]
    fold = fold_of([USER], {}, events)
    ends = fold.open_ends()
    assert [(e.type.value, getattr(e, "subagent_run_id", None)) for e in ends] == [
        ("TOOL_CALL_END", None),
        ("TEXT_MESSAGE_END", "s1"),
        ("REASONING_MESSAGE_END", None),
        ("REASONING_END", None),
        ("STEP_FINISHED", None),
    ]
    closers = [json.loads(encode_event(end)[len("data: ") : -2]) for end in ends]
    for closer in [*closers, FINISHED]:
        fold.apply(closer)
    assert fold.ended and fold.skipped == 0 and fold.open_ends() == []
    check_frames([*events, *closers, FINISHED])
