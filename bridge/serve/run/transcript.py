"""The messages a run adds to the conversation, folded from its events as ``@ag-ui/client``
folds them: reasoning messages, the assistant message with its text and tool calls (each call
under its ``parentMessageId``), tool messages from ``TOOL_CALL_RESULT``.

The tool loop sends them back upstream through the same history builder as the next run's
``messages``, so the model sees this run's turns exactly as it will see them in the next run
(the same bytes: the server's prefix cache keeps working). ``KeptOutput``: a run's output
that keeps every batch in its transcript on the way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Message,
    ReasoningEncryptedValueEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageStartEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)

from bridge.serve.run.output import RunOutput


class Transcript:
    """Feed it every event of a run (``add``); ``messages`` is what the client now holds.

    Texts arrive a token at a time: the deltas of each are collected and joined once, when the
    messages or calls are read (before each request of the tool loop), so folding a turn is
    linear in its length (``+=`` on a model's field copied the whole text for every delta)."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._by_id: dict[str, Message] = {}
        self._calls: dict[str, ToolCall] = {}
        #: The texts with deltas not joined yet, by the id() of the model that holds each:
        #: (that model, the text's field, the text so far and the deltas since).
        self._unjoined: dict[int, tuple[Message | FunctionCall, str, list[str]]] = {}

    @property
    def messages(self) -> list[Message]:
        self._join()
        return self._messages

    def add(self, events: Iterable[BaseEvent]) -> None:
        for event in events:
            if isinstance(event, TextMessageContentEvent):
                self._fold(self._assistant(event.message_id), "content", event.delta)
            elif isinstance(event, ReasoningMessageContentEvent):
                reasoning = self._by_id[event.message_id]
                assert isinstance(reasoning, ReasoningMessage)
                self._fold(reasoning, "content", event.delta)
            elif isinstance(event, ToolCallArgsEvent):
                self._fold(self._calls[event.tool_call_id].function, "arguments", event.delta)
            elif isinstance(event, TextMessageStartEvent):
                self._assistant(event.message_id)
            elif isinstance(event, ReasoningMessageStartEvent):
                self._append(ReasoningMessage(id=event.message_id, content=""))
            elif isinstance(event, ReasoningEncryptedValueEvent):
                if event.subtype == "tool-call":
                    held = self._calls.get(event.entity_id)
                    if held is not None:
                        held.encrypted_value = event.encrypted_value
                    continue
                target = self._by_id.get(event.entity_id)
                if isinstance(target, ReasoningMessage):
                    target.encrypted_value = event.encrypted_value
            elif isinstance(event, ToolCallStartEvent):
                parent = self._assistant(event.parent_message_id or event.tool_call_id)
                call = ToolCall(
                    id=event.tool_call_id,
                    function=FunctionCall(name=event.tool_call_name, arguments=""),
                )
                if parent.tool_calls is None:
                    parent.tool_calls = []
                parent.tool_calls.append(call)  # in place: a turn may hold thousands of calls
                self._calls[call.id] = call
            elif isinstance(event, ToolCallResultEvent):
                self._append(
                    ToolMessage(
                        id=event.message_id, tool_call_id=event.tool_call_id, content=event.content
                    )
                )

    def calls(self, ids: Iterable[str]) -> list[ToolCall]:
        """The tool calls with these ids, whole (name and arguments)."""
        self._join()
        return [self._calls[call_id] for call_id in ids]

    def _fold(self, holder: Message | FunctionCall, field: str, delta: str) -> None:
        entry = self._unjoined.get(id(holder))
        if entry is None:
            entry = self._unjoined[id(holder)] = (holder, field, [getattr(holder, field) or ""])
        entry[2].append(delta)

    def _join(self) -> None:
        for holder, field, parts in self._unjoined.values():
            setattr(holder, field, "".join(parts))
        self._unjoined.clear()

    def _assistant(self, message_id: str) -> AssistantMessage:
        message = self._by_id.get(message_id)
        if not isinstance(message, AssistantMessage):
            message = AssistantMessage(id=message_id)
            self._append(message)
        return message

    def _append(self, message: Message) -> None:
        self._messages.append(message)
        self._by_id[message.id] = message


class KeptOutput:
    """A run's output that keeps each batch in the run's transcript too (the tool loop builds
    the next request from it)."""

    __slots__ = ("_out", "_transcript", "flush")

    def __init__(self, out: RunOutput, transcript: Transcript) -> None:
        self._out, self._transcript = out, transcript
        self.flush = out.flush

    def write(self, batch: Sequence[BaseEvent]) -> None:
        self._transcript.add(batch)
        self._out.write(batch)
