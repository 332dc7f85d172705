"""The fast frame writer gives exactly ``EventEncoder``'s bytes, for any text; the delta events
the emitter makes without validation are the events validation makes."""

from __future__ import annotations

import pytest
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

from bridge.core.emitter import reasoning_content, text_content, tool_call_args
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


@settings(max_examples=200, deadline=None)
@given(identifier=TEXT, delta=TEXT)
def test_delta_events_made_without_validation_are_the_validated_ones(
    identifier: str, delta: str
) -> None:
    pairs = [
        (text_content, TextMessageContentEvent(message_id=identifier, delta=delta)),
        (reasoning_content, ReasoningMessageContentEvent(message_id=identifier, delta=delta)),
        (tool_call_args, ToolCallArgsEvent(tool_call_id=identifier, delta=delta)),
    ]
    for make, validated in pairs:
        made = make(identifier, delta)
        assert type(made) is type(validated)
        assert made == validated  # pydantic compares the fields, extras and private state
        assert list(made.__dict__.items()) == list(validated.__dict__.items())  # order too
        assert made.model_fields_set == validated.model_fields_set
        assert made.model_extra == validated.model_extra
        assert made.__pydantic_private__ == validated.__pydantic_private__
        assert made.model_dump(by_alias=True) == validated.model_dump(by_alias=True)
        assert ENCODER.encode(made) == ENCODER.encode(validated)
        assert encode_event(made) == encode_event(validated)
        # Each event its own: a copy with another delta, or a change of one, leaves it alone.
        copy = made.model_copy(update={"delta": "other"})
        assert (copy.delta, made.delta) == ("other", delta)  # type: ignore[attr-defined]
        assert made.model_fields_set is not make(identifier, delta).model_fields_set


def test_delta_events_made_without_validation_take_only_strings() -> None:
    for make in (text_content, reasoning_content, tool_call_args):
        with pytest.raises(TypeError):
            make("id", None)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            make(1, "text")  # type: ignore[arg-type]


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
