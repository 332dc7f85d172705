"""Properties of the thread fold (``bridge/serve/threads/fold.py``): for any interleaving of
texts, reasoning and tool calls with any deltas, cut anywhere, the fold holds every delta's text
once, in order, in the message or call it belongs to, and ``open_ends`` then ``RUN_FINISHED``
make the stream one the client's rules accept (``tests/agui_rules.py``)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agui_rules import check_frames
from bridge.core.encode import encode_event
from bridge.serve.threads.fold import ThreadFold

USER = {"id": "u", "role": "user", "content": "Hi"}
KINDS = ("text", "reasoning", "call")
#: What one step of a run does: open a new text, reasoning or call (a call under the last text
#: opened, or none), add a delta to the n-th thing open, or close it.
STEPS = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(KINDS), st.booleans()),
    st.tuples(st.just("delta"), st.integers(0, 5), st.text(min_size=1, max_size=6)),
    st.tuples(st.just("close"), st.integers(0, 5), st.none()),
)


def run_of(steps: list[tuple[str, Any, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events the steps make, and each thing's kind and deltas (by id, in opening order)."""
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    made: dict[str, dict[str, Any]] = {}
    opened: list[str] = []
    last_text = None
    for action, what, extra in steps:
        if action == "open":
            key = f"{what}-{len(made)}"
            made[key] = {"kind": what, "deltas": [], "parent": None}
            opened.append(key)
            if what == "text":
                last_text = key
                events.append({"type": "TEXT_MESSAGE_START", "messageId": key, "role": "assistant"})
            elif what == "reasoning":
                events.append({"type": "REASONING_START", "messageId": key})
                start = {"type": "REASONING_MESSAGE_START", "messageId": key, "role": "reasoning"}
                events.append(start)
            else:
                start = {"type": "TOOL_CALL_START", "toolCallId": key, "toolCallName": "f"}
                if extra and last_text is not None:
                    start["parentMessageId"] = made[key]["parent"] = last_text
                events.append(start)
        elif opened:
            key = opened[what % len(opened)]
            kind = made[key]["kind"]
            if action == "delta":
                made[key]["deltas"].append(extra)
                events.append(_continued(kind, key, extra))
            else:
                opened.remove(key)
                events.extend(_closed(kind, key))
    return events, made


def _continued(kind: str, key: str, delta: str) -> dict[str, Any]:
    if kind == "call":
        return {"type": "TOOL_CALL_ARGS", "toolCallId": key, "delta": delta}
    prefix = "TEXT_MESSAGE" if kind == "text" else "REASONING_MESSAGE"
    return {"type": f"{prefix}_CONTENT", "messageId": key, "delta": delta}


def _closed(kind: str, key: str) -> list[dict[str, Any]]:
    if kind == "call":
        return [{"type": "TOOL_CALL_END", "toolCallId": key}]
    if kind == "text":
        return [{"type": "TEXT_MESSAGE_END", "messageId": key}]
    return [
        {"type": "REASONING_MESSAGE_END", "messageId": key},
        {"type": "REASONING_END", "messageId": key},
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(STEPS, max_size=60))
def test_every_delta_is_held_once_in_order_and_open_ends_close_the_run(
    steps: list[tuple[str, Any, Any]],
) -> None:
    events, made = run_of(steps)
    fold = ThreadFold([USER], {})
    for event in events:
        fold.apply_frame(f"data: {json.dumps(event)}\n\n")
    closers = [json.loads(encode_event(end)[len("data: ") : -2]) for end in fold.open_ends()]
    finished = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    for event in [*closers, finished]:
        fold.apply(event)
    check_frames([*events, *closers, finished])
    assert fold.ended and fold.skipped == 0

    messages = fold.messages
    texts = {m["id"]: m.get("content") for m in messages}
    calls = {
        c["id"]: (m["id"], c["function"]["arguments"])
        for m in messages
        for c in m.get("toolCalls", [])
    }
    for key, thing in made.items():
        if thing["kind"] == "call":
            parent, arguments = calls[key]
            assert arguments == "".join(thing["deltas"])
            assert parent == (thing["parent"] or key)
        else:
            assert texts[key] == "".join(thing["deltas"])
    # One message per text, reasoning and call without a parent, in the order they opened.
    own = [k for k, t in made.items() if t["kind"] != "call" or t["parent"] is None]
    assert [m["id"] for m in messages] == ["u", *own]


#: Events a run's deltas may be mixed with: deltas the verifier refuses (to nothing open, with a
#: delta not text), one with metadata, an early end, a frame that is not JSON.
NOISE = st.sampled_from(
    [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nobody", "delta": "x"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": 5},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "text-0", "delta": "m", "metadata": {"a": 1}},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "reasoning-0", "delta": ["no"]},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        "not json",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEPS, max_size=60), st.lists(st.tuples(st.integers(0, 200), NOISE), max_size=6))
def test_frames_applied_together_hold_what_each_applied_alone_holds(
    steps: list[tuple[str, Any, Any]], noise: list[tuple[int, Any]]
) -> None:
    """``apply_frames`` (deltas in a row applied as one) ends where ``apply_frame`` on each frame
    ends: the same messages, state, interrupts, events skipped and end."""
    events: list[Any] = list(run_of(steps)[0])
    for at, event in noise:
        events.insert(at % (len(events) + 1), event)
    frames = [e if isinstance(e, str) else f"data: {json.dumps(e)}\n\n" for e in events]
    alone, together = ThreadFold([USER], {}), ThreadFold([USER], {})
    for frame in frames:
        alone.apply_frame(frame)
    together.apply_frames(frames)
    assert together.messages == alone.messages
    assert (together.state, together.interrupts) == (alone.state, alone.interrupts)
    assert (together.skipped, together.ended) == (alone.skipped, alone.ended)
