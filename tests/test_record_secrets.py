"""Issue 22 (2, 6): a recording keeps no secret.

A real upstream echoes the key into its answer: gzip- or deflate-compressed, written a few bytes
at a time, cut inside the UTF-8 characters around it, as is, URL-encoded and JSON-escaped. The
scan reads every record back as anyone could (every read joined, every base64 decoded, any
content coding the record left undone undone) and finds no form of the key; the recording still
replays to the same events. The recorder's body redaction is also tested without TCP (which may
join small writes into one read): every split of a body, down to one byte a read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import itertools
import json
import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
from ag_ui.core import RunAgentInput
from hypothesis import given, settings
from hypothesis import strategies as st
from test_record_replay import normalized, read_records

from bridge.cli.replay import create_replay_app, load_recording, replay_summary
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.redact import MASK, MIN_PIECE, Redactor
from bridge.serve.upstream.record import Recorder
from servers import post, run_input, serve

KEY = "sk-proj-Zq8vT2mW9xL4/nB7cR1+pK6hY3jD5fG0sA"
#: Every way the key may be written: as is, URL-encoded, JSON-escaped.
FORMS = {
    KEY,
    quote(KEY, safe=""),
    quote(KEY, safe="").lower(),
    quote_plus(KEY, safe=""),
    json.dumps(KEY)[1:-1],
    KEY.replace("/", "\\/"),
}
PIECES = {KEY[i : i + MIN_PIECE] for i in range(len(KEY) - MIN_PIECE + 1)}
#: The model's text: the key as is, URL-encoded, and (frame 5, written with ``\/``) JSON-escaped,
#: with characters of two and three UTF-8 bytes around it.
TEXT = ["Your key is é", KEY, "€. URL-encoded: ", quote(KEY, safe=""), " and again ", KEY, " né."]


def _frame(
    delta: dict[str, Any], finish: str | None = None, *, escape_slash: bool = False
) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    data = json.dumps(chunk, ensure_ascii=False)  # the characters as UTF-8, not \u escapes
    if escape_slash:
        data = data.replace("/", "\\/")
    return f"data: {data}\n\n".encode()


def _frames() -> list[bytes]:
    frames = [_frame({"content": text}, escape_slash=i == 5) for i, text in enumerate(TEXT)]
    return [*frames, _frame({}, "stop"), b"data: [DONE]\n\n"]


BODY = b"".join(_frames())


def _compressed(coding: str) -> list[bytes]:
    """The frames compressed as one stream, flushed at every frame (a server streaming gzip)."""
    compressor = zlib.compressobj(wbits=31 if coding == "gzip" else 15)
    pieces = [
        compressor.compress(frame) + compressor.flush(zlib.Z_SYNC_FLUSH) for frame in _frames()
    ]
    pieces[-1] += compressor.flush()
    return pieces


def _utf8_splits() -> list[bytes]:
    """The body written in pieces that end inside a character (the é before the key, the € after
    it) and inside the key."""
    first = BODY.index("é".encode()) + 1
    middle = BODY.index(KEY.encode()) + 11
    last = BODY.index("€".encode()) + 2
    return [BODY[:first], BODY[first:middle], BODY[middle:last], BODY[last:]]


def _tiny() -> list[bytes]:
    """The body written 1, 2, … 7 bytes at a time."""
    pieces, at = [], 0
    for size in itertools.cycle(range(1, 8)):
        if at >= len(BODY):
            return pieces
        pieces.append(BODY[at : at + size])
        at += size


def _writes(model: str) -> tuple[list[bytes], dict[str, str]]:
    if model in ("gzip", "deflate"):
        return _compressed(model), {"Content-Encoding": model}
    if model == "utf8":
        return _utf8_splits(), {}
    assert model == "tiny", model
    return _tiny(), {}


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request: the answer for its model, each piece one write, flushed, a moment apart; a
    close-delimited body, so nothing but the pieces is on the wire."""
    try:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = next(
            int(line.split(":", 1)[1])
            for line in head.split("\r\n")
            if line.lower().startswith("content-length:")
        )
        model = json.loads(await reader.readexactly(length))["model"]
        pieces, headers = _writes(model)
        lines = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.002)  # a pause, so the bridge most likely reads each alone
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@contextlib.contextmanager
def echoing_upstream() -> Iterator[str]:
    """The raw upstream above on a free port of 127.0.0.1, in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="echoing-upstream", daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        asyncio.start_server(_answer, "127.0.0.1", 0), loop
    ).result(timeout=10)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()
        asyncio.run_coroutine_threadsafe(server.wait_closed(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


# --- reading a record back as anyone could ----------------------------------------------------


def _bodies(record: list[dict[str, Any]]) -> list[bytes]:
    """Each recorded body: its reads joined, base64 decoded, and undone of every content coding
    its headers name that the record did not decode already."""
    reads: dict[int, bytearray] = {}
    codings: dict[int, list[str]] = {}
    for line in record:
        exchange = line.get("exchange", 0)
        if line["type"] == "response":
            named = ",".join(v for k, v in line["headers"] if k.lower() == "content-encoding")
            decoded = line.get("decoded", [])
            codings[exchange] = [c.strip() for c in named.split(",") if c.strip() not in decoded]
        elif line["type"] == "read":
            piece = base64.b64decode(line["base64"]) if "base64" in line else line["text"].encode()
            reads.setdefault(exchange, bytearray()).extend(piece)
    bodies = []
    for exchange, body in reads.items():
        data = bytes(body)
        for coding in reversed(codings.get(exchange, [])):
            if coding in ("gzip", "deflate"):
                data = zlib.decompressobj(zlib.MAX_WBITS | 32).decompress(data)  # either header
        bodies.append(data)
    return bodies


def assert_no_key(folder: Path) -> None:
    for path in folder.glob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        record = [json.loads(line) for line in text.splitlines()]
        texts = [text, *(body.decode("utf-8", "surrogateescape") for body in _bodies(record))]
        for text in texts:
            for form in FORMS:
                assert form not in text, (path.name, form)
            for piece in PIECES:
                assert piece not in text, (path.name, piece)


def _replayed(folder: Path, config: BridgeConfig, body: dict[str, Any]) -> list[dict[str, Any]]:
    recording = load_recording(folder)
    with serve(create_replay_app(recording, speed=4.0)) as replay_url:
        again = replace(config, upstream_url=f"{replay_url}{recording.base_path}", record_dir=None)
        with serve(create_app(again)) as bridge_url:
            return post(f"{bridge_url}/", body)


# --- over HTTP ---------------------------------------------------------------------------------

MODELS = ("gzip", "deflate", "tiny", "utf8")


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
@pytest.mark.parametrize("model", MODELS)
def test_an_upstream_echoing_the_key_leaves_none_in_the_record(
    tmp_path: Path, model: str, transport: str
) -> None:
    with echoing_upstream() as upstream_url:
        config = BridgeConfig(
            upstream_url=upstream_url,
            model=model,
            api_key=KEY,
            record_dir=str(tmp_path),
            upstream_transport=transport,
            retries=0,
        )
        body = run_input(runId=f"run-{model}")
        with serve(create_app(config)) as bridge_url:
            before = post(f"{bridge_url}/", body)
    text = "".join(f["delta"] for f in before if f["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "".join(TEXT).replace(KEY, MASK).replace(quote(KEY, safe=""), MASK)
    assert before[-1]["type"] == "RUN_FINISHED"

    assert_no_key(tmp_path)
    (record,) = read_records(tmp_path)
    response = next(line for line in record if line["type"] == "response")
    compressed = model in ("gzip", "deflate")
    assert response.get("decoded") == ([model] if compressed else None)
    # The body as recorded is the body as the bridge read it, the key masked.
    (recorded,) = _bodies(record)
    assert recorded == BODY.replace(KEY.encode(), MASK.encode()).replace(
        quote(KEY, safe="").encode(), MASK.encode()
    ).replace(KEY.replace("/", "\\/").encode(), MASK.encode())

    after = _replayed(tmp_path, config, record[0]["input"])
    assert normalized(after) == normalized(before)


# --- the recorder's body redaction, read by read (no TCP to join them) ---------------------------


def _record_pieces(
    folder: Path, pieces: list[bytes], headers: dict[str, str] | None = None
) -> tuple[bytes, list[dict[str, Any]]]:
    """``pieces`` as one upstream answer's network reads, through the recording transport: what
    the client read (decoded), and the record."""

    async def answer(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        return httpx.Response(200, headers=headers, content=body())

    async def run() -> bytes:
        config = BridgeConfig(upstream_url="http://upstream.test/v1", model="m", api_key=KEY)
        recorder = Recorder(folder, config, Redactor([KEY]))
        run_input_model = RunAgentInput.model_validate(run_input())
        with recorder.run(run_input_model):
            transport = recorder.wrap(httpx.MockTransport(answer))
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.post("http://upstream.test/v1/chat/completions", json={})
                return response.content

    read = asyncio.run(run())
    (record,) = read_records(folder)
    return read, record


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if a < b]


MASKED = (
    BODY.replace(KEY.encode(), MASK.encode())
    .replace(quote(KEY, safe="").encode(), MASK.encode())
    .replace(KEY.replace("/", "\\/").encode(), MASK.encode())
)


@pytest.mark.parametrize("size", range(1, 8))
def test_reads_of_a_few_bytes_never_write_the_key(tmp_path: Path, size: int) -> None:
    pieces = [BODY[at : at + size] for at in range(0, len(BODY), size)]
    read, record = _record_pieces(tmp_path, pieces)
    assert read == BODY  # the bridge reads what came
    reads = [line for line in record if line["type"] == "read"]
    (recorded,) = _bodies(record)
    assert recorded == MASKED
    for line in reads:
        for piece in PIECES:
            assert piece not in line.get("text", "")
    # A read goes out as it came unless its end may begin the key: then with the next.
    assert len(reads) > len(pieces) // 2


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(0, len(BODY)), max_size=40))
def test_the_key_split_anywhere_is_never_written(tmp_path_factory: Any, cuts: list[int]) -> None:
    folder = tmp_path_factory.mktemp("record")
    read, record = _record_pieces(folder, _splits(BODY, cuts))
    assert read == BODY
    (recorded,) = _bodies(record)
    assert recorded == MASKED


def test_a_read_that_splits_a_character_keeps_its_bytes(tmp_path: Path) -> None:
    pieces = _utf8_splits()
    read, record = _record_pieces(tmp_path, pieces)
    assert read == BODY
    reads = [line for line in record if line["type"] == "read"]
    # The first ends inside "é": not UTF-8, so base64, its bytes as they came.
    assert base64.b64decode(reads[0]["base64"]) == pieces[0]
    assert _bodies(record) == [MASKED]


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_body_is_recorded_decoded_and_redacted(tmp_path: Path, coding: str) -> None:
    pieces = _compressed(coding)
    # Cut the compressed stream into 3-byte reads too: the decoder's output is fed on.
    small = [piece[at : at + 3] for piece in pieces for at in range(0, len(piece), 3)]
    read, record = _record_pieces(tmp_path, small, {"Content-Encoding": coding})
    assert read == BODY  # httpx still decodes what the transport hands it
    response = next(line for line in record if line["type"] == "response")
    assert response["decoded"] == [coding]
    assert ["content-encoding", coding] in [[k.lower(), v] for k, v in response["headers"]]
    assert _bodies(record) == [MASKED]


def test_a_whole_gzip_body_is_recorded_decoded(tmp_path: Path) -> None:
    read, record = _record_pieces(tmp_path, [gzip.compress(BODY)], {"Content-Encoding": "gzip"})
    assert read == BODY
    assert _bodies(record) == [MASKED]


# --- the record's config ------------------------------------------------------------------------


def test_the_record_config_holds_no_credentials(tmp_path: Path) -> None:
    config = BridgeConfig(
        upstream_url="https://someone:pw-in-url@upstream.test/v1?api-key=query-secret",
        model="m",
        api_key=KEY,
        auth_token="auth-token-value",
        mcp_servers={
            "docs": "https://mcp-user:mcp-password@mcp.test/mcp?token=mcp-query-token",
            "local": "python server.py --token flag-secret --api-key=other-flag-secret",
        },
    )
    recorder = Recorder(tmp_path, config, Redactor([KEY, "auth-token-value"]))
    with recorder.run(RunAgentInput.model_validate(run_input())):
        pass
    (record,) = read_records(tmp_path)
    text = next(tmp_path.glob("*.jsonl")).read_text()
    for secret in (
        "pw-in-url",
        "query-secret",
        "auth-token-value",
        "mcp-password",
        "mcp-query-token",
        "flag-secret",
        "other-flag-secret",
        KEY,
    ):
        assert secret not in text
    header = record[0]["config"]
    assert header["upstream_url"] == "https://upstream.test/v1"
    assert header["mcp_servers"] == {
        "docs": f"https://mcp.test/mcp?token={MASK}",
        "local": f"python server.py --token {MASK} --api-key={MASK}",
    }
    # The replay's serve line says where the credentials go.
    lines = list(replay_summary(load_recording(tmp_path), "http://127.0.0.1:9"))
    assert lines[-1] == f"  (the record keeps no credentials: put yours where it says {MASK})"
