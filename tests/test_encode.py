"""The fast frame writer gives exactly ``EventEncoder``'s bytes, for any text."""

from __future__ import annotations

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    ReasoningStartEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
)
from ag_ui.encoder import EventEncoder
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.encode import encode_event
from helpers import fixture_chunks, run

ENCODER = EventEncoder()
# Every JSON-escaping corner: quotes, backslashes, control characters, DEL, U+2028/9, emoji.
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=["Cs"]),
        st.sampled_from(
            ['"', "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "\u2028", "\u2029", "🙂"]
        ),
    )
)


@settings(max_examples=300, deadline=None)
@given(identifier=TEXT, delta=TEXT)
def test_delta_frames_are_byte_identical(identifier: str, delta: str) -> None:
    events: list[BaseEvent] = [
        TextMessageContentEvent(message_id=identifier, delta=delta),
        ReasoningMessageContentEvent(message_id=identifier, delta=delta),
        ToolCallArgsEvent(tool_call_id=identifier, delta=delta),
    ]
    for event in events:
        assert encode_event(event) == ENCODER.encode(event)


def test_optional_fields_take_the_full_encoder() -> None:
    for event in [
        TextMessageContentEvent(message_id="m", delta="x", timestamp=1),
        ToolCallArgsEvent(tool_call_id="c", delta="{}", raw_event={"a": None}),
        ReasoningMessageContentEvent(message_id="r", delta="y", metadata={"k": "v"}),
        ReasoningStartEvent(message_id="r"),
    ]:
        assert encode_event(event) == ENCODER.encode(event)


def test_a_whole_stream_is_byte_identical() -> None:
    events = run(fixture_chunks("deepseek_tools_parallel_stream")).events
    assert "".join(map(encode_event, events)) == "".join(map(ENCODER.encode, events))
