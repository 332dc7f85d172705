"""The messages a run adds to the conversation, folded from its events as ``@ag-ui/client``
folds them: reasoning messages, the assistant message with its text and tool calls (each call
under its ``parentMessageId``), tool messages from ``TOOL_CALL_RESULT``.

The tool loop sends them back upstream through the same history builder as the next run's
``messages``, so the model sees this run's turns exactly as it will see them in the next run
(the same bytes: the server's prefix cache keeps working).
"""

from __future__ import annotations

from collections.abc import Iterable

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


class Transcript:
    """Feed it every event of a run (``add``); ``messages`` is what the client now holds."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._by_id: dict[str, Message] = {}
        self._calls: dict[str, ToolCall] = {}

    def add(self, events: Iterable[BaseEvent]) -> None:
        for event in events:
            if isinstance(event, TextMessageStartEvent):
                self._assistant(event.message_id)
            elif isinstance(event, TextMessageContentEvent):
                message = self._assistant(event.message_id)
                message.content = (message.content or "") + event.delta
            elif isinstance(event, ReasoningMessageStartEvent):
                self._append(ReasoningMessage(id=event.message_id, content=""))
            elif isinstance(event, ReasoningMessageContentEvent):
                reasoning = self._by_id[event.message_id]
                assert isinstance(reasoning, ReasoningMessage)
                reasoning.content += event.delta
            elif isinstance(event, ReasoningEncryptedValueEvent):
                target = self._by_id.get(event.entity_id)
                if isinstance(target, ReasoningMessage):
                    target.encrypted_value = event.encrypted_value
            elif isinstance(event, ToolCallStartEvent):
                parent = self._assistant(event.parent_message_id or event.tool_call_id)
                call = ToolCall(
                    id=event.tool_call_id,
                    function=FunctionCall(name=event.tool_call_name, arguments=""),
                )
                parent.tool_calls = [*(parent.tool_calls or []), call]
                self._calls[call.id] = call
            elif isinstance(event, ToolCallArgsEvent):
                self._calls[event.tool_call_id].function.arguments += event.delta
            elif isinstance(event, ToolCallResultEvent):
                self._append(
                    ToolMessage(
                        id=event.message_id, tool_call_id=event.tool_call_id, content=event.content
                    )
                )

    def calls(self, ids: Iterable[str]) -> list[ToolCall]:
        """The tool calls with these ids, whole (name and arguments)."""
        return [self._calls[call_id] for call_id in ids]

    def _assistant(self, message_id: str) -> AssistantMessage:
        message = self._by_id.get(message_id)
        if not isinstance(message, AssistantMessage):
            message = AssistantMessage(id=message_id)
            self._append(message)
        return message

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        self._by_id[message.id] = message
