"""The run's transcript (kept when server tools are configured): the messages a client would
now hold, folded from the run's events in time linear in their length."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
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

from bridge.serve.run import transcript as transcript_module
from bridge.serve.run.transcript import Transcript


def turn(tokens: int) -> list[BaseEvent]:
    return [
        ReasoningMessageStartEvent(message_id="r1", role="reasoning"),
        *(ReasoningMessageContentEvent(message_id="r1", delta="th") for _ in range(tokens)),
        ReasoningEncryptedValueEvent(subtype="message", entity_id="r1", encrypted_value="enc"),
        TextMessageStartEvent(message_id="m1", role="assistant"),
        *(TextMessageContentEvent(message_id="m1", delta="ab") for _ in range(tokens)),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", parent_message_id="m1"),
        ToolCallStartEvent(tool_call_id="c2", tool_call_name="g", parent_message_id="m1"),
        *(ToolCallArgsEvent(tool_call_id="c1", delta="{}"[i % 2]) for i in range(2)),
        ToolCallArgsEvent(tool_call_id="c2", delta='{"a": 1}'),
        ToolCallResultEvent(message_id="t1", tool_call_id="c1", content="ok", role="tool"),
    ]


def test_the_fold_is_what_the_client_holds() -> None:
    transcript = Transcript()
    transcript.add(turn(3))
    assert transcript.calls(["c2", "c1"]) == [_call("c2", "g", '{"a": 1}'), _call("c1", "f", "{}")]
    assert transcript.messages == [
        ReasoningMessage(id="r1", content="ththth", encrypted_value="enc"),
        AssistantMessage(
            id="m1",
            content="ababab",
            tool_calls=[_call("c1", "f", "{}"), _call("c2", "g", '{"a": 1}')],
        ),
        ToolMessage(id="t1", tool_call_id="c1", content="ok"),
    ]


def test_a_text_read_midway_goes_on_from_where_it_was() -> None:
    transcript = Transcript()
    transcript.add([TextMessageStartEvent(message_id="m", role="assistant")])
    assert transcript.messages == [AssistantMessage(id="m")]  # no content yet: none
    transcript.add([TextMessageContentEvent(message_id="m", delta="one ")])
    assert transcript.messages[0].content == "one "
    transcript.add([TextMessageContentEvent(message_id="m", delta="two")])
    transcript.add([TextMessageContentEvent(message_id="m", delta=" three")])
    assert transcript.messages[0].content == "one two three"


def test_each_text_is_written_to_its_model_once_per_read_not_once_per_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``+=`` on a model's field copies the whole text for every delta: 600 KB of one-token
    deltas took 10 s of CPU. Now the deltas are joined once, when the messages are read."""
    writes: list[str] = []

    def counting(model: type[Any]) -> type[Any]:
        class Counted(model):  # type: ignore[misc, valid-type]
            def __setattr__(self, name: str, value: Any) -> None:
                writes.append(name)
                super().__setattr__(name, value)

        return Counted

    for model in (ReasoningMessage, AssistantMessage, FunctionCall):
        monkeypatch.setattr(transcript_module, model.__name__, counting(model))
    transcript = Transcript()
    transcript.add(turn(1000))
    messages = transcript.messages
    transcript.calls(["c1", "c2"])
    assert len(messages[0].content) == len(messages[1].content or "") == 2000
    # reasoning, text, two calls' arguments: once each; the encrypted value; the calls' list
    assert writes.count("content") == 2 and writes.count("arguments") == 2
    assert len(writes) <= 8


def _call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))
