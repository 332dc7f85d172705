"""Property tests (hypothesis) for the streaming parsers: chunking never changes the result.

- ``ReasoningTagFilter`` agrees with a plain whole-text reference at every split, and after each
  feed it holds back exactly the partial tag at the end, nothing more;
- the whole translator shows the reasoning, text and tool calls a generated stream carries, in
  every reasoning dialect, with every text field split anywhere;
- an SSE body read as the bridge reads it (``SseReader`` + ``chunk_from_data``) gives the same
  result when its bytes are split anywhere, inside a UTF-8 character or between CR and LF too;
- ``SseReader`` splits any event stream into the events httpx-sse's decoder finds, at any split.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar

import httpx
import pytest
from httpx_sse import EventSource
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge import DONE, KNOWN_REASONING_TAGS, ReasoningTagFilter, TranslateOptions
from bridge.core.parts import Reasoning, Text
from bridge.core.reasoning_tags import DEFAULT_REASONING_TAGS, TagPair
from bridge.serve.upstream.sse import SseReader
from helpers import Result, chunk, run, sse_chunks_from_bytes, text_chunks

S = TypeVar("S", bound=Sequence[Any])
Segment = tuple[str, str]
"""``("reasoning" | "text", text)``."""


def _cut(seq: S, cuts: Iterable[int]) -> list[S]:
    bounds = [0, *sorted(cuts), len(seq)]
    return [seq[a:b] for a, b in pairwise(bounds)]


def split(seq: S, *, max_cuts: int = 12, empty_pieces: bool = True) -> st.SearchStrategy[list[S]]:
    """``seq`` cut at arbitrary points (with ``empty_pieces``, a point may repeat)."""
    cuts = st.lists(st.integers(0, len(seq)), max_size=max_cuts, unique=not empty_pieces)
    return cuts.map(lambda points: _cut(seq, points))


# -- ReasoningTagFilter against a reference -----------------------------------------------------

_KNOWN_PAIRS = list(KNOWN_REASONING_TAGS.values())
_MARKERS = sorted({tag for pair in _KNOWN_PAIRS for tag in pair})
_PARTIAL_MARKERS = sorted(
    {piece for m in _MARKERS for k in range(1, len(m)) for piece in (m[:k], m[k:])}
)
_PLAIN = [" ", "\n", "\t", " \n ", "\u2028", "é", "日本", "🙂", "word", "a", ">", "]", "/"]
_CONTENT = st.lists(
    st.one_of(
        st.sampled_from(_MARKERS), st.sampled_from(_PARTIAL_MARKERS), st.sampled_from(_PLAIN)
    ),
    max_size=16,
).map("".join)
# None: the filter's default pairs.
_PAIR_SETS = st.none() | st.lists(
    st.sampled_from(_KNOWN_PAIRS), min_size=1, max_size=4, unique=True
)


def merged(segments: Iterable[Segment]) -> list[Segment]:
    """Adjacent segments of one kind joined, empty ones dropped."""
    out: list[Segment] = []
    for kind, text in segments:
        if not text:
            continue
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def reference_split(
    text: str, pairs: Sequence[TagPair], *, starts_in_reasoning: bool, final: bool = True
) -> list[Segment]:
    """The filter's documented semantics, computed on the whole text at once.

    In text an opening tag enters reasoning, which only its own closing tag ends; a closing
    tag in text is a dropped marker; whitespace after any tag, and before the tag that ends
    reasoning, is dropped. With
    ``starts_in_reasoning`` the text starts in reasoning (any closing tag ends it), leading
    whitespace dropped. ``final=False`` leaves out the end that could still become a tag:
    exactly what a live filter must be holding back.
    """
    close_of = dict(pairs)
    closes = [close for _, close in pairs]
    ending = closes if starts_in_reasoning else None  # the tags that end reasoning; None: text
    if starts_in_reasoning:
        text = text.lstrip()
    segments: list[Segment] = []
    while True:
        kind = "text" if ending is None else "reasoning"
        active = [*close_of, *closes] if ending is None else ending
        hits = [(text.find(tag), -len(tag), tag) for tag in active if tag in text]
        if not hits:
            break
        position, _, tag = min(hits)
        before = text[:position]
        segments.append((kind, before if ending is None else before.rstrip()))
        ending = [close_of[tag]] if ending is None and tag in close_of else None
        text = text[position + len(tag) :].lstrip()
    if not final:
        held = next(
            (
                len(text) - i
                for i in range(len(text))
                if any(t.startswith(text[i:]) for t in active)
            ),
            0,
        )
        text = text[: len(text) - held]
        if ending is not None:  # whitespace a closing tag may yet follow
            text = text.rstrip()
    segments.append((kind, text))
    return merged(segments)


def _tag_filter(pairs: Sequence[TagPair] | None, starts_in_reasoning: bool) -> ReasoningTagFilter:
    if pairs is None:
        return ReasoningTagFilter(starts_in_reasoning=starts_in_reasoning)
    return ReasoningTagFilter(pairs, starts_in_reasoning=starts_in_reasoning)


def _segments(parts: Iterable[Reasoning | Text]) -> list[Segment]:
    return merged(("reasoning" if type(p) is Reasoning else "text", p.text) for p in parts)


def filter_segments(
    pieces: Iterable[str], pairs: Sequence[TagPair] | None, *, starts_in_reasoning: bool
) -> list[Segment]:
    tag_filter = _tag_filter(pairs, starts_in_reasoning)
    parts = [part for piece in pieces for part in tag_filter.feed(piece)]
    return _segments([*parts, *tag_filter.close()])


@settings(max_examples=400, deadline=None)
@given(
    text=_CONTENT,
    pairs=_PAIR_SETS,
    starts_in_reasoning=st.booleans(),
    data=st.data(),
)
def test_tag_filter_matches_the_reference_at_any_split(
    text: str, pairs: list[TagPair] | None, starts_in_reasoning: bool, data: st.DataObject
) -> None:
    pieces = data.draw(split(text), label="pieces")
    expected = reference_split(
        text, pairs or DEFAULT_REASONING_TAGS, starts_in_reasoning=starts_in_reasoning
    )
    for feeds in ([text], pieces, list(text)):
        assert filter_segments(feeds, pairs, starts_in_reasoning=starts_in_reasoning) == expected


@settings(max_examples=300, deadline=None)
@given(
    text=_CONTENT,
    pairs=_PAIR_SETS,
    starts_in_reasoning=st.booleans(),
    data=st.data(),
)
def test_tag_filter_holds_back_only_a_partial_tag(
    text: str, pairs: list[TagPair] | None, starts_in_reasoning: bool, data: st.DataObject
) -> None:
    """After every feed, all is out but the longest end that could still become a tag (and,
    in reasoning, the whitespace before it, which a closing tag would drop)."""
    pieces = data.draw(split(text), label="pieces")
    active_pairs = pairs or DEFAULT_REASONING_TAGS
    longest = max(len(tag) for pair in active_pairs for tag in pair)
    tag_filter = _tag_filter(pairs, starts_in_reasoning)
    parts: list[Reasoning | Text] = []
    fed = ""
    for piece in pieces:
        parts += tag_filter.feed(piece)
        fed += piece
        live = reference_split(
            fed, active_pairs, starts_in_reasoning=starts_in_reasoning, final=False
        )
        assert _segments(parts) == live
        whole = reference_split(fed, active_pairs, starts_in_reasoning=starts_in_reasoning)
        held = "".join(t for _, t in whole)[len("".join(t for _, t in live)) :]
        assert len(held.lstrip()) < longest
    parts += tag_filter.close()
    assert _segments(parts) == reference_split(
        text, active_pairs, starts_in_reasoning=starts_in_reasoning
    )


@pytest.mark.parametrize(
    "pairs",
    [
        pytest.param([("<t", "</t"), ("<tt", "</tt")], id="prefix"),
        pytest.param([("<t>", "</t>"), ("<<t>>", "<</t>>")], id="inside"),
    ],
)
def test_nested_custom_tags_are_refused(pairs: list[TagPair]) -> None:
    # A tag inside another would make the split depend on where chunks are cut (a complete
    # short tag at a chunk's end could still grow into the long one): refused up front.
    with pytest.raises(ValueError, match="contains"):
        TranslateOptions(reasoning_tags=pairs)


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(st.characters(exclude_characters="<["), max_size=40),
    pairs=_PAIR_SETS,
    data=st.data(),
)
def test_tag_filter_passes_text_without_tag_characters_at_once(
    text: str, pairs: list[TagPair] | None, data: st.DataObject
) -> None:
    tag_filter = _tag_filter(pairs, starts_in_reasoning=False)
    for piece in data.draw(split(text), label="pieces"):
        assert _segments(tag_filter.feed(piece)) == merged([("text", piece)])
    assert tag_filter.close() == []


@settings(max_examples=400, deadline=None)
@given(
    reasoning=st.lists(st.sampled_from(["First,", " list", "é", "🙂", "<", "[", "/"]), min_size=1)
    .map("".join)
    .map(str.lstrip),
    whitespace=st.sampled_from([" ", "\n", "\n\n", " \n\t ", "\u2028"]),
    after=st.sampled_from(["", "\n", "\n\n"]),
    pair=st.sampled_from(_KNOWN_PAIRS),
    implicit=st.booleans(),
    data=st.data(),
)
def test_whitespace_before_a_closing_tag_at_any_split(
    reasoning: str,
    whitespace: str,
    after: str,
    pair: TagPair,
    implicit: bool,
    data: st.DataObject,
) -> None:
    """Issue 12: reasoning whitespace followed by a closing tag cut anywhere (inside the
    whitespace, inside the tag) gives what the unsplit stream gives, through the translator."""
    open_tag, close_tag = pair
    head = "" if implicit else open_tag + "\n"
    body = f"{head}{reasoning}{whitespace}{close_tag}{after}2, 3, 5, 7"
    edge = len(head) + len(reasoning)
    # At least one cut in the whitespace or the closing tag, the rest anywhere.
    inside = data.draw(st.integers(edge, edge + len(whitespace) + len(close_tag)), label="inside")
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=6), label="cuts")
    pieces = _cut(body, {inside, *cuts})
    options = TranslateOptions(reasoning_tags=[pair], starts_in_reasoning=implicit)
    whole = run(text_chunks(body), options)
    split_up = run(text_chunks(*pieces), options)
    assert (split_up.reasoning, split_up.text) == (whole.reasoning, whole.text)
    assert whole.reasoning == reasoning.rstrip()
    assert whole.text == "2, 3, 5, 7"


# -- the whole translator on generated streams --------------------------------------------------

_WORDS = [
    "word", "Paris", "a", "é", "日本", "🙂", "\u2028", '"', "\\", "{", "}", ":",
    "<", "</", "<th", "think>", "[THINK]", " ", "\n", "\t",
]  # fmt: skip
# Reasoning and answer texts: never starting with whitespace (so no stripping applies) and
# never holding the tags themselves. (Reasoning read from tags loses its trailing whitespace.)
_WORDS_TEXT = st.lists(st.sampled_from(_WORDS), max_size=12).map("".join)
_PROSE = _WORDS_TEXT.map(str.lstrip).filter(
    lambda text: "<think>" not in text and "</think>" not in text
)
_ARGUMENTS = st.dictionaries(
    st.sampled_from(["city", "q", "ünit", "名前"]),
    _WORDS_TEXT | st.integers() | st.booleans(),
    max_size=3,
).map(lambda value: json.dumps(value, ensure_ascii=False))
_CALLS = st.lists(
    st.tuples(st.sampled_from(["get_weather", "get_time", "search"]), _ARGUMENTS), max_size=3
)
# Whitespace after a tag is dropped, so servers' newlines there must not show.
_TAG_WHITESPACE = st.sampled_from(["", "\n", "\n\n", " "])

FIELD_DIALECTS = ("reasoning_content", "reasoning", "openrouter")
DIALECTS = (*FIELD_DIALECTS, "tags", "implicit-open-tag", "deepseek-legacy")


@dataclass(frozen=True)
class Stream:
    """A generated upstream stream and what it must show."""

    dialect: str
    chunks: list[Any]
    options: TranslateOptions | None
    reasoning: str
    text: str
    calls: list[tuple[str, str]]  # (name, arguments), in START order
    finish_reason: str


def _reasoning_delta(dialect: str, text: str) -> dict[str, Any]:
    if dialect == "openrouter":
        # OpenRouter sends the same text in `reasoning` and in `reasoning_details`.
        return {"reasoning": text, "reasoning_details": [{"type": "reasoning.text", "text": text}]}
    return {dialect: text}


@st.composite
def chat_streams(draw: st.DrawFn) -> Stream:
    reasoning, answer = draw(_PROSE, label="reasoning"), draw(_PROSE, label="answer")
    calls = draw(_CALLS, label="calls")
    dialect = draw(st.sampled_from(DIALECTS), label="dialect")
    options = None
    deltas: list[dict[str, Any]] = []
    if draw(st.booleans()):  # the role chunk: llama.cpp sends content null, vLLM ""
        deltas.append({"role": "assistant", "content": draw(st.sampled_from([None, ""]))})
    answer_deltas = [{"content": piece} for piece in draw(split(answer))]
    if dialect in FIELD_DIALECTS:
        if reasoning and draw(st.booleans()):
            # Documented: ignored once the server delivers reasoning in a field.
            options = TranslateOptions(starts_in_reasoning=True)
        deltas += [_reasoning_delta(dialect, piece) for piece in draw(split(reasoning))]
        deltas += answer_deltas
    elif dialect == "tags":
        content = answer
        if reasoning or draw(st.booleans()):  # Qwen3 with thinking off: an empty block
            open_ws, close_ws = draw(_TAG_WHITESPACE), draw(_TAG_WHITESPACE)
            content = f"<think>{open_ws}{reasoning}</think>{close_ws}{answer}"
        deltas += [{"content": piece} for piece in draw(split(content))]
    elif dialect == "implicit-open-tag":
        options = TranslateOptions(starts_in_reasoning=True)
        open_ws, close_ws = draw(_TAG_WHITESPACE), draw(_TAG_WHITESPACE)
        content = f"{open_ws}{reasoning}</think>{close_ws}{answer}"
        deltas += [{"content": piece} for piece in draw(split(content))]
    else:  # deepseek-legacy: the reasoning both inside tags in content and in the field
        deltas.append({"content": "<think>" + draw(_TAG_WHITESPACE)})
        deltas += [
            {"reasoning_content": piece, "content": piece} for piece in draw(split(reasoning))
        ]
        deltas.append({"content": "</think>" + draw(_TAG_WHITESPACE)})
        deltas += answer_deltas

    # Tool calls: id and name first, then argument pieces; different calls interleaved.
    sequences = []
    for index, (name, arguments) in enumerate(calls):
        first, *rest = draw(split(arguments))
        function = {"name": name, "arguments": first}
        head = {"index": index, "id": f"call_{index}", "type": "function", "function": function}
        sequences.append([head, *({"index": index, "function": {"arguments": p}} for p in rest)])
    order = draw(st.permutations([i for i, sequence in enumerate(sequences) for _ in sequence]))
    queues = [iter(sequence) for sequence in sequences]
    tool_deltas = [next(queues[i]) for i in order]
    for group in draw(split(tool_deltas, empty_pieces=False)):
        deltas.append({"tool_calls": group})

    if dialect in ("tags", "implicit-open-tag"):
        reasoning = reasoning.rstrip()  # the edge before the closing tag, as llama.cpp strips it
    finish_reason = "tool_calls" if calls else "stop"
    chunks: list[Any] = [chunk(**delta) for delta in deltas]
    chunks.append(chunk(finish=finish_reason))
    if draw(st.booleans()):
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        chunks.append({"object": "chat.completion.chunk", "choices": [], "usage": usage})
    if draw(st.booleans()):
        chunks.append(DONE)
    return Stream(
        dialect=dialect,
        chunks=chunks,
        options=options,
        reasoning=reasoning,
        text=answer,
        calls=[calls[i] for i in dict.fromkeys(order)],
        finish_reason=finish_reason,
    )


def assert_shows(result: Result, stream: Stream) -> None:
    assert result.raised is None
    assert result.outcome.error is None
    assert result.reasoning == stream.reasoning
    assert result.text == stream.text
    assert result.tool_calls == stream.calls
    assert result.outcome.finish_reason == stream.finish_reason
    assert len(result.reasoning_messages) == bool(stream.reasoning)
    assert result.types.count("TEXT_MESSAGE_START") == bool(stream.text)


@settings(max_examples=300, deadline=None)
@given(stream=chat_streams())
def test_translator_shows_what_the_model_said(stream: Stream) -> None:
    assert_shows(run(stream.chunks, stream.options), stream)


# -- the SSE path, bytes split anywhere ---------------------------------------------------------


@st.composite
def sse_bodies(draw: st.DrawFn, chunks: list[Any]) -> bytes:
    """``chunks`` as a server writes them: LF, CRLF or CR lines, ``data:`` with or without the
    space, sometimes keep-alive comments (OpenRouter), raw UTF-8."""
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    prefix = draw(st.sampled_from(["data: ", "data:"]))
    frames = []
    for item in chunks:
        if draw(st.integers(0, 9)) == 0:
            frames.append(f": keep-alive{newline}{newline}")
        data = item if item == DONE else json.dumps(item, ensure_ascii=False)
        frames.append(f"{prefix}{data}{newline}{newline}")
    return "".join(frames).encode()


def byte_splits(body: bytes) -> st.SearchStrategy[list[bytes]]:
    """``body`` cut anywhere, favouring the hard places: inside a UTF-8 character, after CR."""
    hard = [i for i in range(1, len(body)) if body[i] >> 6 == 0b10 or body[i - 1] == ord("\r")]
    anywhere = st.lists(st.integers(1, len(body) - 1), max_size=30)
    in_hard_places = st.lists(st.sampled_from(hard), max_size=30) if hard else st.just([])
    return st.tuples(anywhere, in_hard_places).map(lambda cuts: _cut(body, {*cuts[0], *cuts[1]}))


@settings(max_examples=150, deadline=None)
@given(stream=chat_streams(), data=st.data())
def test_sse_body_split_at_any_byte(stream: Stream, data: st.DataObject) -> None:
    body = data.draw(sse_bodies(stream.chunks), label="body")
    pieces = data.draw(byte_splits(body), label="pieces")
    whole = run(sse_chunks_from_bytes([body]), stream.options)
    result = run(sse_chunks_from_bytes(pieces), stream.options)
    assert result.wire == whole.wire
    assert_shows(result, stream)


_FIELD_LINES = st.one_of(
    st.builds(
        lambda v: f"data: {v}",
        st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))),
    ),
    st.builds(
        lambda v: f"data:{v}",
        st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))),
    ),
    st.just("data"),
    st.sampled_from(["event: error", "event:message", "event: delta", "id: 7", "retry: 100"]),
    st.sampled_from([": keep-alive", ":", "unknown: field", "no colon at all"]),
    st.just(""),  # an empty line: the event ends
)


@st.composite
def event_streams(draw: st.DrawFn) -> bytes:
    """Any event stream: field lines of every kind, empty lines, each ended by LF, CRLF or CR."""
    lines = draw(st.lists(_FIELD_LINES, max_size=25))
    ends = draw(
        st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(lines), max_size=len(lines))
    )
    return "".join(line + end for line, end in zip(lines, ends, strict=True)).encode()


@settings(max_examples=300, deadline=None)
@given(body=event_streams(), data=st.data())
def test_sse_reader_finds_the_events_httpx_sse_finds(body: bytes, data: st.DataObject) -> None:
    """The bridge's byte reader against httpx-sse's decoder over httpx's line splitting: the same
    events with data, in the same order, however the body is cut."""
    pieces = data.draw(byte_splits(body), label="pieces") if len(body) > 1 else [body]
    response = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=iter([body])
    )
    expected = [(e.event, e.data) for e in EventSource(response).iter_sse() if e.data]
    reader = SseReader(1 << 20)
    found = [(event, raw.decode()) for piece in pieces for event, raw in reader.feed(piece)]
    assert [(event, text) for event, text in found if text] == expected
