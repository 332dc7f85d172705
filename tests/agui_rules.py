"""The official client's rules (``@ag-ui/client`` 1.0.0 ``verifyEvents`` and its schema checks).

``check_events`` runs on every stream the tests produce. It works on the wire form (what
``EventEncoder`` writes), so it also catches what the client's schema would reject: nulls,
snake_case keys, non-integer counts, a reasoning start without ``role: "reasoning"``, CR bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

_ENCODER = EventEncoder()
_SNAKE = re.compile(r"^[a-z]+(_[a-z0-9]+)+$")
#: Fields whose value is the application's JSON, by event type.
_DATA_FIELDS = {
    "CUSTOM": ("value",),
    "STATE_SNAPSHOT": ("snapshot",),
    "STATE_DELTA": ("delta",),
    "RUN_FINISHED": ("result",),
}
_COUNT_KEYS = {
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "reasoningTokens",
    "cachedInputTokens",
    "cacheWriteInputTokens",
}


class ProtocolViolation(AssertionError):
    pass


def wire(events: Iterable[BaseEvent]) -> list[dict[str, Any]]:
    """Encode each event as the SSE frame the client reads, check the framing, parse it back."""
    out = []
    for event in events:
        frame = _ENCODER.encode(event)
        if "\r" in frame or not frame.startswith("data: ") or not frame.endswith("\n\n"):
            raise ProtocolViolation(f"bad SSE frame {frame!r}")
        if "\n\n" in frame[:-2]:
            raise ProtocolViolation(
                f"frame holds a blank line, the client would split it: {frame!r}"
            )
        out.append(json.loads(frame[len("data: ") : -2]))
    return out


def _check_schema(value: Any, path: str) -> None:
    if value is None:
        raise ProtocolViolation(f"null at {path}: the client rejects nulls in optional fields")
    if isinstance(value, dict):
        for key, item in value.items():
            if _SNAKE.match(key):
                raise ProtocolViolation(f"snake_case key {key!r} at {path}")
            if key in _COUNT_KEYS and (isinstance(item, bool) or not isinstance(item, int)):
                raise ProtocolViolation(f"non-integer token count {key}={item!r} at {path}")
            _check_schema(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_schema(item, f"{path}[{i}]")


def check_events(events: Iterable[BaseEvent], *, complete: bool = True) -> list[dict[str, Any]]:
    """Raise ``ProtocolViolation`` where the client would reject the stream; return the wire dicts.

    A stream without RUN_STARTED is checked as the inside of a run; with ``complete`` it must
    leave nothing open, as RUN_FINISHED requires.
    """
    return check_frames(wire(events), complete=complete)


def parse_body(body: str) -> list[dict[str, Any]]:
    """The frames of an SSE response body, split as the client splits them (on LF LF only)."""
    if "\r" in body:
        raise ProtocolViolation("the body holds CR characters; the client splits frames on LF only")
    frames = []
    for block in body.split("\n\n"):
        if not block or block.startswith(":"):
            continue
        if block.startswith("id: ") and block.count("\n") == 1:  # a kept run's (--threads)
            block = block.split("\n", 1)[1]
        if not block.startswith("data: ") or "\n" in block:
            raise ProtocolViolation(f"not a one-line data frame: {block[:120]!r}")
        frames.append(json.loads(block[len("data: ") :]))
    return frames


def check_frames(frames: list[dict[str, Any]], *, complete: bool = True) -> list[dict[str, Any]]:
    """The client's order and schema rules on parsed wire frames."""
    text: set[str] = set()
    calls: set[str] = set()
    spans: set[str] = set()
    reasoning: set[str] = set()
    #: The open steps, innermost last: the client's verifier tracks them by name (one name
    #: open once); we hold ourselves to more, steps that nest (a step ends before the one it
    #: opened in).
    steps: list[str] = []
    started = finished = errored = False
    inner = bool(frames) and frames[0]["type"] not in ("RUN_STARTED", "RUN_ERROR")

    def fail(i: int, why: str) -> ProtocolViolation:
        return ProtocolViolation(f"event #{i} {frames[i]['type']}: {why}")

    def nothing_open(i: int) -> None:
        for name, ids in (("text messages", text), ("reasoning messages", reasoning),
                          ("reasoning spans", spans), ("tool calls", calls)):  # fmt: skip
            if ids:
                raise fail(i, f"{name} still open: {sorted(ids)}")
        if steps:
            raise fail(i, f"steps still active: {steps}")

    for i, frame in enumerate(frames):
        # The application's own JSON (a state, a custom value, a run's result) is data, any
        # JSON at all: the schema types it as any; only the event's own fields are checked.
        data = _DATA_FIELDS.get(frame.get("type"), ())
        _check_schema({k: v for k, v in frame.items() if k not in data}, f"#{i}")
        kind = frame["type"]
        if errored and kind != "RUN_STARTED":
            raise fail(i, "after RUN_ERROR")
        if finished and kind not in ("RUN_ERROR", "RUN_STARTED"):
            raise fail(i, "after RUN_FINISHED")
        if kind.startswith("RUN_") and inner:
            raise fail(i, "first event must be RUN_STARTED (or RUN_ERROR)")
        if kind == "RUN_STARTED":
            if started and not (finished or errored):
                raise fail(i, "a run is still active")
            started, finished, errored = True, False, False
            for ids in (text, calls, spans, reasoning):
                ids.clear()
            steps.clear()
        elif kind == "RUN_FINISHED":
            nothing_open(i)
            finished = True
        elif kind == "RUN_ERROR":
            errored = True
        elif kind == "STEP_STARTED":
            if not isinstance(frame.get("stepName"), str):
                raise fail(i, "stepName must be a string")
            if frame["stepName"] in steps:
                raise fail(i, f"step {frame['stepName']!r} is already active")
            steps.append(frame["stepName"])
        elif kind == "STEP_FINISHED":
            if frame.get("stepName") not in steps:
                raise fail(i, f"step {frame.get('stepName')!r} was not started")
            if frame["stepName"] != steps[-1]:
                raise fail(i, f"step {frame['stepName']!r} ends before {steps[-1]!r}, opened in it")
            steps.pop()
        elif kind in ("TEXT_MESSAGE_START", "TOOL_CALL_START", "REASONING_START",
                      "REASONING_MESSAGE_START"):  # fmt: skip
            ids, key = _open_set(kind, text, calls, spans, reasoning)
            if frame[key] in ids:
                raise fail(i, f"{frame[key]!r} is already open")
            if kind == "REASONING_MESSAGE_START" and frame.get("role") != "reasoning":
                raise fail(i, "needs role 'reasoning'")
            ids.add(frame[key])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "REASONING_MESSAGE_CONTENT"):
            ids, key = _open_set(kind, text, calls, spans, reasoning)
            if frame[key] not in ids:
                raise fail(i, f"{frame[key]!r} is not open")
            if not isinstance(frame.get("delta"), str):
                raise fail(i, "delta must be a string")
        elif kind in ("TEXT_MESSAGE_END", "TOOL_CALL_END", "REASONING_END",
                      "REASONING_MESSAGE_END"):  # fmt: skip
            ids, key = _open_set(kind, text, calls, spans, reasoning)
            if frame[key] not in ids:
                raise fail(i, f"{frame[key]!r} is not open")
            ids.discard(frame[key])
    if complete and not (finished or errored):
        nothing_open(len(frames) - 1) if frames else None
    return frames


def _open_set(
    kind: str, text: set[str], calls: set[str], spans: set[str], reasoning: set[str]
) -> tuple[set[str], str]:
    if kind.startswith("TEXT_MESSAGE"):
        return text, "messageId"
    if kind.startswith("TOOL_CALL"):
        return calls, "toolCallId"
    if kind.startswith("REASONING_MESSAGE"):
        return reasoning, "messageId"
    return spans, "messageId"
