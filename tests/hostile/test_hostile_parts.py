"""Every attachment a frontend sends (issue 41: points 1, 2, 4 and 6), over real sockets: a real
bridge in front of the scripted upstream, which keeps every request body it received.

Promises held: every part of every client line (a 1.0 body, a 0.0.59 body, a 0.0.x ``binary``
part; text, image, audio, video and document parts from a ``data``, ``url`` or ``file`` source)
reaches the upstream in the shape its API takes, or is refused with a 4xx that names the part,
its file name and what would take it, never a pydantic dump or a 5xx; an attachment is held to
its size limits before it is decoded, and decoded off the event loop, a slice at a time. Order
and structure are asserted, never time (``benchmarks/attachment_stall.py`` measures the stalls).
"""

from __future__ import annotations

import base64
import binascii
import json
import subprocess
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agui_rules import check_frames, parse_body
from bridge.serve.http import content_parts
from bridge.serve.run import parts
from node_tools import NODE_DIR, npm_install, require_node
from peers_inputs import Gate, posted_while_gated
from peers_parts import (
    CHAT,
    FILES,
    QUESTION,
    RESPONSES,
    body,
    cases,
    document_text,
    part,
    question,
    upstream_body,
)
from servers import Stack, scripted_stack

APIS = ("chat", "responses")


@pytest.fixture(scope="module")
def stacks() -> Iterator[dict[str, Stack]]:
    with scripted_stack() as chat, scripted_stack(upstream_api="responses") as responses:
        yield {"chat": chat, "responses": responses}


def _post(stack: Stack, sent: dict[str, Any]) -> httpx.Response:
    stack.upstream_requests.clear()
    return httpx.post(f"{stack.bridge_url}/", json=sent, timeout=30)


def _finished(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text[:500]
    assert check_frames(parse_body(response.text))[-1]["type"] == "RUN_FINISHED"


def _refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text[:500]
    error = response.json()["error"]
    assert error["code"] == code
    assert "Input tag" not in error["message"] and "pydantic" not in error["message"]
    return str(error["message"])


# -- Points 1, 2 and 6: every part, every source, every client line, both APIs -----------------
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("key", "source", "line"), cases())
def test_every_part_of_every_client_line_reaches_the_upstream_as_its_api_takes_it(
    stacks: dict[str, Stack], api: str, key: str, source: str, line: str
) -> None:
    """Issue 41, points 1, 2 and 6: a document or a recording got 400 "Chat Completions accepts
    text and image parts only", a 0.0.x ``binary`` part a 422 pydantic dump. Now the upstream
    receives exactly the part its API takes (Chat Completions: ``image_url``, ``input_audio``,
    ``file`` with ``file_data`` or ``file_id``, ``video_url``; the Responses API:
    ``input_image``, ``input_audio``, ``input_file``; a text document as text, named), from
    every client line; what it cannot take is a 400 ``invalid_input`` naming the part, its
    file name and what would take it, and nothing goes upstream."""
    file = FILES[key]
    stack = stacks[api]
    response = _post(stack, body([part(file, source, line)], line))
    expected = (CHAT if api == "chat" else RESPONSES)[key, source]
    if isinstance(expected, str):
        message = _refused(response, 400, "invalid_input")
        assert message.startswith(f"messages.0.content.1: a{'n' if key == 'audio' else ''} ")
        assert f"({file.name}, {file.mime})" in message
        assert expected in message
        assert stack.upstream_requests == []
        return
    _finished(response)
    assert stack.upstream_requests == [upstream_body(api, [question(api), expected])]


def test_a_message_of_every_part_keeps_them_in_order(stacks: dict[str, Stack]) -> None:
    """Issue 41, point 1: nothing a client sends in a user message is dropped: a message with
    every kind of part, text between them, goes upstream whole and in order."""
    sent: list[dict[str, Any]] = []
    taken: list[Any] = []
    for key in ("image", "audio", "video", "pdf", "text"):
        sent += [part(FILES[key], "data", "binary"), {"type": "text", "text": f"and {key}"}]
        taken += [CHAT[key, "data"], {"type": "text", "text": f"and {key}"}]
    response = _post(stacks["chat"], body(sent, "binary"))
    _finished(response)
    assert stacks["chat"].upstream_requests == [upstream_body("chat", [question("chat"), *taken])]


@pytest.mark.parametrize("api", APIS)
def test_a_data_url_is_read_as_the_bytes_it_carries(stacks: dict[str, Stack], api: str) -> None:
    """Issue 41, point 1: a ``url`` source that is a base64 ``data:`` URL carries the bytes
    inline: a recording sent that way goes as ``input_audio``, not refused as a URL."""
    audio = FILES["audio"]
    sent = {"type": "audio", "source": {"type": "url", "value": audio.data_url}}
    response = _post(stacks[api], body([sent], "1.0"))
    _finished(response)
    taken = {"type": "input_audio", "input_audio": {"data": audio.base64, "format": "wav"}}
    assert stacks[api].upstream_requests == [upstream_body(api, [question(api), taken])]


def test_a_text_document_without_a_type_is_known_by_its_name(stacks: dict[str, Stack]) -> None:
    """Issue 41, point 2: a browser sends ``""`` as the type of a file its system knows no type
    for (``.yaml`` on most): the file name says it is text, and it goes as text."""
    text = "name: bridge\nport: 8000\n"
    sent = {
        "type": "document",
        "source": {
            "type": "data",
            "value": base64.b64encode(text.encode()).decode(),
            "mimeType": "",
        },
        "metadata": {"filename": "config.yaml"},
    }
    response = _post(stacks["chat"], body([sent], "1.0"))
    _finished(response)
    taken = {"type": "text", "text": f'<document name="config.yaml">\n{text}</document>'}
    assert stacks["chat"].upstream_requests == [upstream_body("chat", [question("chat"), taken])]


# -- Point 1: what no client line may send is named, not dumped --------------------------------
@pytest.mark.parametrize(
    ("sent", "words"),
    [
        pytest.param(
            {"type": "nope", "text": "x"},
            "messages.0.content.1: a content part of type 'nope', which AG-UI does not define "
            "(text, image, audio, video, document; before 1.0, binary)",
            id="unknown-type",
        ),
        pytest.param(
            {"type": "binary", "mimeType": "image/png", "filename": "cat.png"},
            "messages.0.content.1: a binary part needs its data, url or id",
            id="binary-without-payload",
        ),
        pytest.param(
            {"type": "binary", "data": "AAAA"},
            "messages.0.content.1: a binary part needs its mimeType",
            id="binary-without-type",
        ),
    ],
)
def test_a_part_no_client_line_defines_is_named_not_dumped(
    stacks: dict[str, Stack], sent: dict[str, Any], words: str
) -> None:
    """Issue 41, point 1: the old bridge answered a part it could not read with pydantic's
    union dump ("Input tag 'binary' found using 'type' does not match any of the expected
    tags…"). Now a 422 says which part and what a part may be."""
    for line in ("1.0", "0.0.59"):
        message = _refused(_post(stacks["chat"], body([sent], line)), 422, "invalid_input")
        assert message == words
    assert stacks["chat"].upstream_requests == []


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        pytest.param(
            "pdf",
            "JVBERi0xLjQK!!!!",
            "a document part (report.pdf, application/pdf): its data is not base64",
            id="not-base64",
        ),
        pytest.param(
            "text",
            base64.b64encode(b"caf\xe9,4\n").decode(),
            "a document part (notes.csv, text/csv): its bytes are not UTF-8 text (byte 3)",
            id="text-not-utf8",
        ),
    ],
)
def test_an_attachment_whose_bytes_are_not_what_they_say_is_refused_naming_it(
    stacks: dict[str, Stack], key: str, value: str, words: str
) -> None:
    """Issue 41, point 2: bytes that are not base64, or a text document that is not UTF-8 text,
    are refused before anything goes upstream, naming the part and its file name."""
    sent = part(FILES[key], "data", "1.0")
    sent["source"]["value"] = value
    message = _refused(_post(stacks["chat"], body([sent], "1.0")), 400, "invalid_input")
    assert message.startswith(f"messages.0.content.1: {words}")
    assert stacks["chat"].upstream_requests == []


# -- Point 4: limits before the work, decoding off the event loop -------------------------------
def test_an_attachment_over_its_limit_is_refused_before_it_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 41, point 4: an attachment's size is read from its base64's length before anything
    is decoded or validated: one over ``--max-attachment-bytes`` is a 413 naming it (its bytes
    here are not even base64: no decoder ever saw them), one within it goes upstream."""
    decoded: list[int] = []
    check = content_parts.check_base64

    def spy(value: str, what: str) -> None:
        decoded.append(len(value))
        check(value, what)

    monkeypatch.setattr(content_parts, "check_base64", spy)
    pdf = FILES["pdf"]
    with scripted_stack(max_attachment_bytes=3000) as stack:
        big = part(pdf, "data", "1.0")
        big["source"]["value"] = "!" * 4004
        message = _refused(_post(stack, body([big], "1.0")), 413, "attachment_too_large")
        assert message == (
            "messages.0.content.1: an attachment (report.pdf, application/pdf) of 3003 bytes is "
            "larger than 3000 (--max-attachment-bytes)"
        )
        assert decoded == [] and stack.upstream_requests == []
        small = part(pdf, "data", "1.0")
        _finished(_post(stack, body([small], "1.0")))
        assert decoded == [len(pdf.base64)]


def test_the_attachments_of_a_request_are_held_to_their_limit_together() -> None:
    """Issue 41, point 4: a client sends every earlier message's attachments again with each
    run; all of a request's together are held to ``--max-request-attachment-bytes`` (413,
    naming where the total went past it), each within its own limit."""
    image = FILES["image"]
    size = len(image.base64) * 3 // 4
    with scripted_stack(max_request_attachment_bytes=2 * size) as stack:
        first = body([part(image, "data", "1.0")], "1.0")
        _finished(_post(stack, first))
        history = [
            *first["messages"],
            {"id": "a1", "role": "assistant", "content": "A red dot."},
            {"id": "u2", "role": "user", "content": [part(image, "data", "binary")]},
        ]
        _finished(_post(stack, {**first, "messages": history}))
        history += [
            {"id": "a2", "role": "assistant", "content": "The same dot."},
            {"id": "u3", "role": "user", "content": [part(image, "data", "1.0")]},
        ]
        message = _refused(
            _post(stack, {**first, "messages": history}), 413, "attachments_too_large"
        )
        assert message.startswith(
            f"messages.4.content.0: the attachments up to this one come to {3 * size} bytes, "
            f"more than {2 * size} (--max-request-attachment-bytes)"
        )
        assert stack.upstream_requests == []


def test_a_big_attachment_is_decoded_off_the_event_loop_a_slice_at_a_time(
    stacks: dict[str, Stack], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41, point 4: a big attachment's base64 is decoded where the big body is read, in
    a worker thread, and a slice at a time (each call holds the GIL, and with it the event
    loop): the loop answers ``/health`` while the decoding is under way."""
    gate = Gate()
    check = content_parts.check_base64
    slices: list[int] = []
    decode = binascii.a2b_base64

    def held(value: str, what: str) -> None:
        gate.hold()
        check(value, what)

    def sliced(data: str, *, strict_mode: bool = False) -> bytes:
        slices.append(len(data))
        return decode(data, strict_mode=strict_mode)

    monkeypatch.setattr(content_parts, "check_base64", held)
    monkeypatch.setattr(parts, "binascii", SimpleNamespace(a2b_base64=sliced, Error=binascii.Error))
    image = FILES["image"]
    big = part(image, "data", "1.0")
    big["source"]["value"] = base64.b64encode(image.data + bytes(3_500_000)).decode()
    response = posted_while_gated(stacks["chat"].bridge_url, gate, body([big], "1.0"))
    assert gate.on_loop == [False]
    assert gate.order == ["work started", "health answered", "work went on"]
    _finished(response)
    assert len(slices) >= 4 and max(slices) <= parts.BASE64_SLICE
    assert sum(slices) == len(big["source"]["value"])


def test_a_text_document_goes_upstream_once_read(stacks: dict[str, Stack]) -> None:
    """Issue 41, point 2: a text document is read where the body is read (in a worker thread
    when it is big), once: a tool loop's later turns send the same text without reading the
    bytes again."""
    text = FILES["text"]
    response = _post(stacks["chat"], body([part(text, "data", "binary")], "binary"))
    _finished(response)
    [sent] = stacks["chat"].upstream_requests
    assert sent["messages"][0]["content"][1] == {"type": "text", "text": document_text(text)}
    assert json.dumps(sent).count(text.base64) == 0


# -- Point 6: the official clients send them --------------------------------------------------
#: (the client line, how its parts are shaped): 0.0.59 (CopilotKit 1.74's) also sends ``binary``.
OFFICIAL = [("1.0.0", "1.0"), ("0.0.59", "0.0.59"), ("0.0.59", "binary")]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("client", "line"), OFFICIAL)
def test_the_official_clients_send_every_attachment(
    stacks: dict[str, Stack], client: str, line: str, api: str
) -> None:
    """Issue 41, point 6: ``@ag-ui/client`` 1.0.0 and 0.0.59 send attachments as a frontend
    does (``agent.addMessage`` with content parts, then ``runAgent``): the run finishes, the
    client complains of nothing, and the upstream receives every part as its API takes it."""
    node = require_node("the official AG-UI clients send the attachments")
    npm_install(
        NODE_DIR,
        NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json",
        "the official AG-UI client",
    )
    sent = [("image", "data"), ("image", "url"), ("audio", "data"), ("pdf", "data")]
    sent += [("text", "data"), ("video", "data" if api == "chat" else "url")]
    if line != "0.0.59":
        sent.append(("pdf", "file"))
    table = CHAT if api == "chat" else RESPONSES
    mappable = [(key, source) for key, source in sent if not isinstance(table[key, source], str)]
    content = [{"type": "text", "text": QUESTION}]
    content += [part(FILES[key], source, line) for key, source in mappable]
    stack = stacks[api]
    stack.upstream_requests.clear()
    spec = {"client": client, "url": f"{stack.bridge_url}/", "content": content}
    done = subprocess.run(
        [node, "attachments.mjs"],
        cwd=NODE_DIR,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["logged"] == [] and not report["failed"] and report["rejected"] is None
    assert report["events"][0] == "RUN_STARTED" and report["events"][-1] == "RUN_FINISHED"
    assert report["user"]["content"] == content
    taken = [table[key, source] for key, source in mappable]
    assert len(taken) >= 5
    assert stack.upstream_requests == [upstream_body(api, [question(api), *taken])]
