"""What is open in a run, as ``@ag-ui/client``'s ``verifyEvents`` tracks it (texts, tool calls,
reasoning messages and spans, steps, each with its opener's subagent), and the events that close
it: ``bridge.serve.threads.fold`` skips what the verifier would refuse, and a run cut short (a
cancel) ends with these closers, then its ``RUN_FINISHED``.
"""

from __future__ import annotations

from ag_ui.core import (
    BaseEvent,
    ReasoningEndEvent,
    ReasoningMessageEndEvent,
    StepFinishedEvent,
    TextMessageEndEvent,
    ToolCallEndEvent,
)

#: The kinds of things a run opens, by the event types that open, continue and close them.
TEXT, CALL, REASONING, SPAN, STEP = "text", "call", "reasoning", "span", "step"
OPENS = {
    "TEXT_MESSAGE_START": TEXT,
    "TOOL_CALL_START": CALL,
    "REASONING_MESSAGE_START": REASONING,
    "REASONING_START": SPAN,
    "STEP_STARTED": STEP,
}
CONTINUES = {
    "TEXT_MESSAGE_CONTENT": TEXT,
    "TOOL_CALL_ARGS": CALL,
    "REASONING_MESSAGE_CONTENT": REASONING,
}
CLOSES = {
    "TEXT_MESSAGE_END": TEXT,
    "TOOL_CALL_END": CALL,
    "REASONING_MESSAGE_END": REASONING,
    "REASONING_END": SPAN,
    "STEP_FINISHED": STEP,
}


class Opened:
    """The things open in the current run: each kind's ids (a step's: its subagent and name),
    in the order they opened, with the opener's subagent."""

    def __init__(self) -> None:
        self._open: dict[str, dict[str, str | None]] = {kind: {} for kind in CLOSES.values()}

    def __bool__(self) -> bool:
        return any(self._open.values())

    def clear(self) -> None:
        """A run starts: nothing is open."""
        for ids in self._open.values():
            ids.clear()

    def open(self, kind: str, key: str, subagent: str | None) -> bool:
        """Open ``key``; ``False`` (the verifier refuses) when it is open already."""
        ids = self._open[kind]
        if key in ids:
            return False
        ids[key] = subagent
        return True

    def is_open(self, kind: str, key: str) -> bool:
        return key in self._open[kind]

    def close(self, kind: str, key: str) -> bool:
        """Close ``key``; ``False`` (the verifier refuses) when it is not open."""
        return self._open[kind].pop(key, CLOSES) is not CLOSES

    def closers(self) -> list[BaseEvent]:
        """The events that close everything open, in an order the client accepts before a
        ``RUN_FINISHED``: tool calls, texts, reasoning messages, then their spans, then steps
        (the verifier refuses a ``RUN_FINISHED`` while any is open, whatever the order)."""
        ends: list[BaseEvent] = []
        for call_id, subagent in self._open[CALL].items():
            ends.append(ToolCallEndEvent(tool_call_id=call_id, subagent_run_id=subagent))
        for message_id, subagent in self._open[TEXT].items():
            ends.append(TextMessageEndEvent(message_id=message_id, subagent_run_id=subagent))
        for message_id, subagent in self._open[REASONING].items():
            ends.append(ReasoningMessageEndEvent(message_id=message_id, subagent_run_id=subagent))
        for message_id, subagent in self._open[SPAN].items():
            ends.append(ReasoningEndEvent(message_id=message_id, subagent_run_id=subagent))
        for name, subagent in self._open[STEP].items():
            ends.append(StepFinishedEvent(step_name=name, subagent_run_id=subagent))
        return ends
