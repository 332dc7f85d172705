"""Exchanges recorded from a real llama.cpp server, replayed through the translator.

The expected split of every streamed exchange is read from the fixtures' own README table (the
server's split); the ``none_*`` exchanges (tags left in content) must give what the server's
``deepseek`` parser gave for the same request. Every stream is also re-read from its bytes cut
into pieces of 1 (every boundary), 2, 3, 7 and 64 bytes, as the bridge reads an upstream.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest

from bridge import UpstreamStreamError
from helpers import (
    FIXTURES,
    Result,
    fixture_chunks,
    fixture_json,
    run,
    split_every,
    sse_chunks_from_bytes,
)

_ROW = re.compile(r"^\| `(?P<name>\w+)` \| (?P<body>\w+) \| (?P<status>[^|]+) \| (?P<split>.*) \|$")
_FIELDS = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\[.*?\](?= \w+=)|\S+)")


def _readme_splits() -> dict[str, dict[str, Any]]:
    splits = {}
    for line in (FIXTURES / "README.md").read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if not match or match["body"] != "sse":
            continue
        fields = {key: value for key, value in _FIELDS.findall(match["split"] + " end=1")}
        splits[match["name"]] = {
            "reasoning": ast.literal_eval(fields["reasoning"]),
            "content": ast.literal_eval(fields["content"]),
            "tool_calls": ast.literal_eval(fields["tool_calls"]),
            "finish": fields["finish"],
        }
    return splits


SPLITS = _readme_splits()
STREAMS = sorted(SPLITS)


def _expected(name: str) -> dict[str, Any]:
    # `none` leaves the tags in content; the bridge must split like the server's deepseek mode,
    # up to the whitespace at the reasoning's edges (the README's words): the bridge strips it,
    # as llama.cpp's parser does; this build's stream kept the newline before </think>.
    if not name.startswith("none_"):
        return SPLITS[name]
    expected = dict(SPLITS[name.replace("none_", "deepseek_", 1)])
    expected["reasoning"] = expected["reasoning"].strip()
    return expected


def _assert_split(result: Result, expected: dict[str, Any]) -> None:
    assert result.raised is None
    assert result.outcome.error is None
    assert result.reasoning == expected["reasoning"]
    assert result.text == expected["content"]
    assert result.tool_calls == expected["tool_calls"]
    assert result.outcome.finish_reason == expected["finish"]
    assert "<think>" not in result.text and "</think>" not in result.text


def test_readme_table_was_read() -> None:
    assert len(STREAMS) >= 8
    assert SPLITS["deepseek_tools_parallel_stream"]["tool_calls"][0][0] == "get_time"


@pytest.mark.parametrize("name", STREAMS)
def test_stream_gives_the_servers_split(name: str) -> None:
    _assert_split(run(fixture_chunks(name)), _expected(name))


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("name", STREAMS)
def test_stream_bytes_split_anywhere(name: str, size: int) -> None:
    body = (FIXTURES / f"{name}.sse").read_bytes()
    _assert_split(run(sse_chunks_from_bytes(split_every(body, size))), _expected(name))


@pytest.mark.parametrize(
    ("nonstream", "stream"),
    [
        ("deepseek_reasoning_nonstream", "deepseek_reasoning_stream"),
        ("none_reasoning_nonstream", "deepseek_reasoning_stream"),
        ("deepseek_tools_parallel_nonstream", "deepseek_tools_parallel_stream"),
    ],
)
def test_whole_response_gives_what_the_stream_gives(nonstream: str, stream: str) -> None:
    # One path for both: the non-streamed body goes through the same decoder as one chunk.
    whole = run([fixture_json(nonstream)])
    streamed = run(fixture_chunks(stream))
    assert (whole.reasoning.strip(), whole.text, whole.tool_calls) == (
        streamed.reasoning.strip(),
        streamed.text,
        streamed.tool_calls,
    )
    assert whole.outcome.finish_reason == streamed.outcome.finish_reason


def test_usage_chunk_becomes_token_usage() -> None:
    usage = run(fixture_chunks("deepseek_reasoning_stream_usage")).outcome.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (15, 33, 48)
    assert usage.cached_input_tokens == 14
    assert usage.model == "qwen3-tiny-random"


def test_length_inside_reasoning_closes_the_reasoning() -> None:
    result = run(fixture_chunks("deepseek_length_in_reasoning_stream"))
    assert result.outcome.finish_reason == "length"
    assert result.text == ""
    assert "TEXT_MESSAGE_START" not in result.types
    assert result.types[-2:] == ["REASONING_MESSAGE_END", "REASONING_END"]


@pytest.mark.parametrize(
    "name", ["deepseek_error_context_exceeded_stream", "deepseek_error_messages_not_array"]
)
def test_error_body_as_a_chunk_is_an_upstream_error(name: str) -> None:
    body = fixture_json(name)
    result = run([body])
    assert isinstance(result.raised, UpstreamStreamError)
    assert result.raised.code == "upstream_error"
    assert result.raised.message == body["error"]["message"]
    assert result.raised.upstream_code == "400"
    assert result.outcome.error is result.raised
