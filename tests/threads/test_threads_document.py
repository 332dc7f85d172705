"""A thread's document (issue 56, point 4; README "Threads"): its messages kept a JSON object a
line under a head with their count and digest, so that a hydrate sends them as they are kept,
with no parse of a thread of megabytes; a damaged document reads as no thread; a document of
the first form (the thread's JSON whole) is read still, over real sockets too."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_load_balancer import started
from threads_tools import sse

from bridge.serve.threads.owner import bearer_owner
from bridge.serve.threads.store import ThreadSummary
from bridge.serve.threads.stores import thread_store
from bridge.serve.threads.thread import VERSION, Thread, read_document, snapshot_frames
from servers import run_input

#: JSON values as a message's fields hold them (text with newlines, quotes, any character).
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_MESSAGES = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.text(min_size=1, max_size=12),
            "role": st.sampled_from(["user", "tool", "assistant"]),
        },
        optional={"content": _VALUES, "toolCallId": st.text(max_size=8)},
    ),
    max_size=6,
)

TOOL_MESSAGE = {
    "id": "t1",
    "role": "tool",
    "toolCallId": "c1",
    "content": [{"type": "text", "text": "It is\nnoon"}, {"type": "binary", "mimeType": "x/y"}],
}


def _snapshot(messages: list[Any]) -> bytes:
    """The frame the thread's messages make, encoded whole as an event is."""
    return b"data: " + orjson.dumps({"type": "MESSAGES_SNAPSHOT", "messages": messages}) + b"\n\n"


@settings(max_examples=300, deadline=None)
@given(messages=_MESSAGES, state=_VALUES)
def test_a_document_gives_back_the_very_messages_and_state_kept(
    messages: list[dict[str, Any]], state: Any
) -> None:
    document = Thread(messages, state, [{"id": "i"}], "r1").document()
    read = read_document(document)
    assert read is not None and read.lines is not None and read.messages == []
    assert (read.state, read.interrupts, read.running) == (state, [{"id": "i"}], "r1")
    frames = snapshot_frames(read)
    assert frames[0] == _snapshot(messages)
    assert orjson.loads(frames[0][len(b"data: ") :])["messages"] == messages
    if state is not None:
        assert orjson.loads(frames[1][len(b"data: ") :]) == {
            "type": "STATE_SNAPSHOT",
            "snapshot": state,
        }
    # A 0.0.x client: the same as made from the messages themselves.
    assert snapshot_frames(read, tool_text=True) == snapshot_frames(
        Thread(messages, state), tool_text=True
    )


def test_a_document_is_a_head_line_then_a_message_a_line() -> None:
    messages = [{"id": "u", "role": "user", "content": "two\nlines"}, TOOL_MESSAGE]
    document = Thread(messages, {"n": 1}).document()
    head, *lines = document.split(b"\n")
    assert [orjson.loads(line) for line in lines] == messages
    assert orjson.loads(head) == {
        "v": VERSION,
        "state": {"n": 1},
        "interrupts": [],
        "running": None,
        "messages": 2,
        "sha256": hashlib.sha256(b"\n".join(lines)).hexdigest(),
    }


def test_a_redacted_document_reads_whole() -> None:
    messages = [{"id": "u", "role": "user", "content": "my key is sk-SECRET-1234"}]
    document = Thread(messages, {"key": "sk-SECRET-1234"}).document(
        lambda data: data.replace(b"sk-SECRET-1234", b"[redacted]")
    )
    assert b"sk-SECRET" not in document
    read = read_document(document)
    assert read is not None and read.state == {"key": "[redacted]"}
    assert snapshot_frames(read)[0] == _snapshot(
        [{**messages[0], "content": "my key is [redacted]"}]
    )


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d: d[:-3], id="cut-short"),
        pytest.param(lambda d: d.replace(b"noon", b"nOon"), id="a-byte-changed"),
        pytest.param(lambda d: d + b"\n{}", id="a-line-more"),
        pytest.param(lambda d: d.replace(b'"v":2', b'"v":3'), id="a-later-version"),
        pytest.param(lambda d: b"[]" + d, id="no-head"),
        pytest.param(lambda d: b"{not json", id="not-json"),
    ],
)
def test_a_damaged_document_reads_as_no_thread(damage: Any) -> None:
    document = Thread([{"id": "u", "role": "user", "content": "Hi"}, TOOL_MESSAGE]).document()
    assert read_document(document) is not None
    assert read_document(damage(document)) is None


def test_a_document_known_whole_is_not_hashed_again() -> None:
    """``intact``: this process saved that very document (its digest kept): no second hash."""
    document = Thread([{"id": "u", "role": "user", "content": "Hi"}]).document()
    tampered = document.replace(b'"sha256":"', b'"sha256":"0')
    assert read_document(tampered) is None
    assert read_document(tampered, intact=True) is not None


def test_a_first_form_document_is_read_still() -> None:
    messages = [{"id": "u", "role": "user", "content": "Hi"}, TOOL_MESSAGE]
    old = orjson.dumps(
        {"v": 1, "messages": messages, "state": {"n": 1}, "interrupts": [], "running": None}
    )
    read = read_document(old)
    assert read is not None and read.lines is None and read.state == {"n": 1}
    assert snapshot_frames(read)[0] == _snapshot(messages)
    as_text = snapshot_frames(read, tool_text=True)[0]
    assert orjson.loads(as_text[len(b"data: ") :])["messages"][1]["content"] == "It is\nnoon"


# --- over real sockets: what a bridge before this form kept, and a damaged one -----------------

TOKEN = "document-owner-Kq4Zt7Rw"


def _kept(folder: Path, documents: dict[str, bytes]) -> None:
    """Keep ``documents`` in the folder store as TOKEN's threads, as an earlier bridge did."""

    async def keep() -> None:
        store = thread_store(folder.as_uri(), ttl=3600)
        try:
            for thread_id, document in documents.items():
                summary = ThreadSummary(thread_id, "kept before", 1.0)
                await store.save(bearer_owner(TOKEN), thread_id, document, summary)
        finally:
            await store.aclose()

    asyncio.run(keep())


def _hydrate(url: str, thread_id: str, protocol: str | None) -> list[dict[str, Any]]:
    made = run_input(threadId=thread_id, runId=f"hydrate-{thread_id}", protocolVersion=protocol)
    body = {**made, "messages": []}  # no messages: a hydrate
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.post(f"{url}/", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return [event for _, event in sse(answer.text)]


def test_a_bridge_hydrates_a_first_form_thread_and_not_a_damaged_one(tmp_path: Path) -> None:
    messages = [{"id": "u", "role": "user", "content": "What time is it?"}, TOOL_MESSAGE]
    old = orjson.dumps(
        {"v": 1, "messages": messages, "state": {"n": 1}, "interrupts": [], "running": None}
    )
    damaged = Thread(messages, {"n": 2}).document().replace(b"noon", b"NOON")
    folder = tmp_path / "threads"
    folder.mkdir()
    _kept(folder, {"old": old, "damaged": damaged})
    command = [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", "http://127.0.0.1:9/v1", "--model", "m",
        "--port", "0", "--log-format", "json", "--threads", folder.as_uri(),
    ]  # fmt: skip
    with started([command], {}) as made:
        url = f"http://{made[0].address}/agent"
        one = _hydrate(url, "old", "1.0")
        assert [e["type"] for e in one] == [
            "RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED",
        ]  # fmt: skip
        assert one[1]["messages"] == messages and one[2]["snapshot"] == {"n": 1}
        zero = _hydrate(url, "old", None)
        assert zero[1]["messages"][1]["content"] == "It is\nnoon"
        assert zero[1]["messages"][0] == messages[0]
        # A damaged document: the thread reads as unknown (an empty one), and the log says so.
        bad = _hydrate(url, "damaged", "1.0")
        assert [e["type"] for e in bad] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        assert bad[1]["messages"] == []
        logged = "".join(made[0].stderr)
        assert "is damaged or of another version" in logged
        assert "NOON" not in logged
