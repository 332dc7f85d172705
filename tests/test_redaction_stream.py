"""Issue 22: the model's own words are redacted too, across delta boundaries, and redaction is
one C-speed pass over a text. A real upstream echoes the key into reasoning, text and a tool
call's arguments, split over deltas of every size; nothing the bridge sends holds it."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agui_rules import check_frames, parse_body
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.redact import MASK, MIN_PIECE, Redactor
from servers import run_input, serve

KEY = "sk-proj-Zq8vT2mW9xL4nB7cR1pK6hY3jD5fG0sA"
PIECES = {KEY[i : i + MIN_PIECE] for i in range(len(KEY) - MIN_PIECE + 1)}
WORDS = st.text(st.sampled_from("abcdefghij klmnop,.\n-/+sk"), max_size=60)


def _splits(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(cut, len(text)) for cut in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if a < b]


def _streamed(redactor: Redactor, pieces: list[str]) -> str:
    stream = redactor.stream()
    return "".join(stream.feed(piece) for piece in pieces) + stream.close()


@settings(max_examples=300, deadline=None)
@given(
    before=WORDS,
    after=WORDS,
    cuts=st.lists(st.integers(0, 200), max_size=12),
    quote_it=st.booleans(),
)
def test_a_key_split_anywhere_never_passes(
    before: str, after: str, cuts: list[int], quote_it: bool
) -> None:
    redactor = Redactor([KEY])
    secret = quote(KEY, safe="") if quote_it else KEY
    out = _streamed(redactor, _splits(before + secret + after, cuts))
    assert not any(piece in out for piece in PIECES)
    assert MASK in out
    assert out.startswith(redactor.redact(before)[: max(0, len(before) - MIN_PIECE)])


@settings(max_examples=300, deadline=None)
@given(text=WORDS, cuts=st.lists(st.integers(0, 80), max_size=12))
def test_words_without_a_secret_pass_whole_whatever_the_split(text: str, cuts: list[int]) -> None:
    redactor = Redactor([KEY])
    assert redactor.redact(text) == text
    assert _streamed(redactor, _splits(text, cuts)) == text


def test_held_back_only_while_it_may_still_be_a_secret() -> None:
    stream = Redactor([KEY]).stream()
    assert stream.feed("use sk-pr") == "use "  # may be the key
    assert stream.feed("oud words") == "sk-proud word"  # was not; "s" may begin "sA…"
    assert stream.feed(" and sk-proj-Zq8v") == "s and "
    assert stream.feed("T2mW9xL4 ok!") == f"{MASK} ok!"
    assert stream.close() == ""
    assert stream.feed("tail sk-proj") + stream.close() == "tail sk-proj"  # ended: all goes out


def test_a_text_of_mostly_key_characters_is_scanned_once() -> None:
    """Random base62 text (the key's alphabet) with the key at random places: every copy found."""
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    parts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300))) for _ in range(200)]
    text = KEY.join(parts)
    out = Redactor([KEY]).redact(text)
    assert not any(piece in out for piece in PIECES)
    assert out.count(MASK) == 1 + sum(1 for part in parts[1:-1] if part)  # touching copies: one


CHUNKS_PER_DELTA = [1, 2, 3, 5, 7, 8, 13]


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return (
        b"data: "
        + json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]}).encode()
        + b"\n\n"
    )


async def _echo(request: Request) -> Response:
    """Echoes the key into reasoning, text and a tool call's arguments, ``size`` characters a
    delta (the model name says the size), as a gateway that logs or a prompt-injected model might."""
    model = (await request.json())["model"]
    if model == "cut":

        async def cut() -> AsyncIterator[bytes]:
            yield _chunk({"content": "see sk-pr"})
            yield b'data: {"error": {"message": "the model crashed", "code": 500}}\n\n'

        return StreamingResponse(cut(), media_type="text/event-stream")
    size = int(model.removeprefix("echo-"))
    reasoning = f"the key is {KEY} and again {KEY[:10]}"
    text = f"Your key: {KEY}. Done."
    args = json.dumps({"key": KEY, "note": "fine"})

    async def body() -> AsyncIterator[bytes]:
        for field, value in (("reasoning_content", reasoning), ("content", text)):
            for at in range(0, len(value), size):
                yield _chunk({field: value[at : at + size]})
        for at in range(0, len(args), size):
            call = {"index": 0, "function": {"arguments": args[at : at + size]}}
            if at == 0:
                call |= {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "save", "arguments": args[:size]},
                }
            yield _chunk({"tool_calls": [call]})
        yield _chunk({}, "tool_calls")
        yield b"data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def bridge() -> Iterator[str]:
    upstream = Starlette(routes=[Route("/v1/chat/completions", _echo, methods=["POST"])])
    with serve(upstream) as upstream_url:
        models = (*(f"echo-{size}" for size in CHUNKS_PER_DELTA), "cut")
        config = BridgeConfig(
            upstream_url=f"{upstream_url}/v1", model=models[0], models=models, api_key=KEY
        )
        with serve(create_app(config)) as url:
            yield url


@pytest.mark.parametrize("size", CHUNKS_PER_DELTA)
def test_the_model_echoing_the_key_never_shows_it(bridge: str, size: int) -> None:
    tools = [{"name": "save", "description": "Save.", "parameters": {"type": "object"}}]
    response = httpx.post(
        f"{bridge}/",
        json=run_input(forwardedProps={"model": f"echo-{size}"}, tools=tools),
        timeout=30,
    )
    frames = check_frames(parse_body(response.text))
    for piece in PIECES:
        assert piece not in response.text
    joined = {
        kind: "".join(f["delta"] for f in frames if f["type"] == kind)
        for kind in ("REASONING_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS")
    }
    assert joined["REASONING_MESSAGE_CONTENT"] == f"the key is {MASK} and again {MASK}"
    assert joined["TEXT_MESSAGE_CONTENT"] == f"Your key: {MASK}. Done."
    assert joined["TOOL_CALL_ARGS"] == json.dumps({"key": MASK, "note": "fine"})
    assert all(f["delta"] for f in frames if "delta" in f)  # no empty delta went out
    assert frames[-1]["type"] == "RUN_FINISHED"


def test_an_error_mid_text_releases_what_was_held(bridge: str) -> None:
    """A run that ends in RUN_ERROR with a text open still sends the text's held end first."""
    response = httpx.post(f"{bridge}/", json=run_input(forwardedProps={"model": "cut"}), timeout=30)
    frames = check_frames(parse_body(response.text))
    text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "see sk-pr"
    assert frames[-1]["type"] == "RUN_ERROR"


# --- bytes (a recorded upstream body): any split, UTF-8 or not ----------------------------------

BYTES = st.binary(max_size=40) | WORDS.map(str.encode)


def _streamed_bytes(redactor: Redactor, pieces: list[bytes]) -> bytes:
    stream = redactor.stream_bytes()
    return b"".join(stream.feed(piece) for piece in pieces) + stream.close()


@settings(max_examples=300, deadline=None)
@given(before=BYTES, after=BYTES, cuts=st.lists(st.integers(0, 200), max_size=12))
def test_a_key_in_bytes_split_anywhere_never_passes(
    before: bytes, after: bytes, cuts: list[int]
) -> None:
    redactor = Redactor([KEY])
    data = before + KEY.encode() + after
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    out = _streamed_bytes(redactor, [data[a:b] for a, b in itertools.pairwise(points) if a < b])
    assert not any(piece.encode() in out for piece in PIECES)
    assert MASK.encode() in out
    assert out == redactor.redact_bytes(data)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=80), cuts=st.lists(st.integers(0, 80), max_size=12))
def test_bytes_without_a_secret_pass_whole_whatever_the_split(data: bytes, cuts: list[int]) -> None:
    redactor = Redactor([KEY])
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(points) if a < b]
    assert redactor.redact_bytes(data) == data
    assert _streamed_bytes(redactor, pieces) == data


def test_a_secret_beyond_ascii_cut_inside_a_character_is_found() -> None:
    secret = "pässwörd-über-geheim"
    data = f"x {secret} y".encode()
    redactor = Redactor([secret])
    for cut in range(1, len(data)):  # every cut, inside ä, ö and ü too
        assert _streamed_bytes(redactor, [data[:cut], data[cut:]]) == f"x {MASK} y".encode()


def test_a_secret_that_repeats_itself_is_held_only_so_far() -> None:
    """A key like ``abab…`` makes one span of any run of it: the stream still lets the run go out
    as it comes (holding at most one secret's length), and scans it once."""
    secret = "ab" * 10
    redactor = Redactor([secret])
    assert redactor.redact("x" + "ab" * 2_000 + "y") == f"x{MASK}y"
    stream = redactor.stream()
    text = "ab" * 500
    released = "".join(stream.feed(text[at : at + 40]) for at in range(0, len(text), 40))
    assert released.startswith(MASK) and set(released.split(MASK)) == {""}
    assert set((released + stream.close()).split(MASK)) == {""}
