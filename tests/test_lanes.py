"""Issue 34: the translator's fast lanes. A chunk of one text field that the whole pipeline
(decode, reasoning-tag filter, text tool parsers, emitter) would turn into one content event,
leaving every state as it was, is turned into it directly; these tests hold the lanes to the
whole pipeline, event for event, on generated streams of every dialect and on chunks in any
order with tags anywhere."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_properties import _WORDS, chat_streams

from bridge import TranslateOptions
from bridge.core.translate import ChatStreamTranslator
from helpers import counter_ids, run


class _NoLanes(ChatStreamTranslator):
    """The translator with its fast lanes shut: every chunk goes through the whole pipeline."""

    def _open_lanes(self) -> None:
        self._text_lane = self._reasoning_lane = None


_ANY_TEXT = st.lists(
    st.sampled_from([*_WORDS, "<think>", "</think>", "<tool_call>"]), max_size=6
).map("".join)
#: Chunks in any order: content that may hold tags anywhere (orphan closing tags too), reasoning
#: in either field, whitespace alone.
_ANY_CHUNKS = st.lists(
    st.tuples(st.sampled_from(["content", "reasoning_content", "reasoning"]), _ANY_TEXT).map(
        lambda field: {"choices": [{"index": 0, "delta": {field[0]: field[1]}}]}
    ),
    max_size=30,
)


def _content(*texts: str) -> list[Any]:
    return [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in texts]


@settings(max_examples=300, deadline=None)
@example(stream=(_content("Hi </think>", " there"), None), tools=(), fmt="auto")  # stripped
@example(stream=(_content("Hi", " <", "think> x"), None), tools=(), fmt="none")  # held
@example(stream=(_content("a", "<tool_call>", "{}"), None), tools=("get_weather",), fmt="hermes")
@given(
    stream=chat_streams().map(lambda s: (s.chunks, s.options))
    | _ANY_CHUNKS.map(lambda c: (c, None)),
    tools=st.sampled_from([(), ("get_weather",)]),
    fmt=st.sampled_from(["auto", "none", "hermes", "harmony"]),
)
def test_the_fast_lanes_give_what_the_whole_pipeline_gives(
    stream: tuple[list[Any], TranslateOptions | None], tools: tuple[str, ...], fmt: str
) -> None:
    """A chunk taken by a lane gives the events (ids included) and leaves the state the whole
    pipeline would: every dialect, with and without text tool parsers watching."""
    chunks, options = stream[0], stream[1] or TranslateOptions()
    options = TranslateOptions(
        reasoning_tags=options.reasoning_tags,
        starts_in_reasoning=options.starts_in_reasoning,
        text_tool_format=fmt,
    )
    fast = ChatStreamTranslator(options, new_id=counter_ids(), tool_names=tools)
    whole = _NoLanes(options, new_id=counter_ids(), tool_names=tools)
    fast_result, whole_result = (
        run(chunks, translator=fast),
        run(chunks, translator=whole),
    )
    assert [e.model_dump() for e in fast_result.events] == [
        e.model_dump() for e in whole_result.events
    ]
    fast_outcome, whole_outcome = fast_result.outcome, whole_result.outcome
    assert replace(fast_outcome, error=None) == replace(whole_outcome, error=None)
    assert repr(fast_outcome.error) == repr(whole_outcome.error)
    assert repr(fast_result.raised) == repr(whole_result.raised)
