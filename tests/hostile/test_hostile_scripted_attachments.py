"""The scripted model says what it received (issue 41, point 6: "the scripted model says what it
received (name, type, size)"), over real HTTP.

Promises held: the embedded scripted upstream reads the attachment parts real servers take
(Chat Completions: ``image_url``, ``input_audio``, ``file`` with ``file_data`` and ``filename``
or ``file_id``, ``video_url``; the Responses API: ``input_image``, ``input_file``,
``input_audio``) and names each in its answer, in every dialect, streamed or not; a part of a
type no such server defines is refused with OpenAI's 400 (``invalid_value``, the part's place),
so a bridge that sends one upstream fails its tests as it would fail with a real server; sizes
come from the base64 text's length, never decoded.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bridge.cli.demo import SCRIPTED_MODELS, create_scripted_upstream
from bridge.cli.demo.attachments import Received, human_size, received
from servers import Stack, post, run_input, scripted_stack, serve

PNG = b"\x89PNG\r\n\x1a\n" + bytes(3000)
PDF = b"%PDF-1.4\n" + bytes(120_000)
WAV = b"RIFF" + bytes(40_000)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{b64(data)}"


#: A text document as the bridge sends it: text, inside an element naming it.
NOTES = (
    '<document name="notes &amp; plans.txt" type="text/plain">\n'
    "Buy milk.\nCall Alice, then Bob.\n</document>"
)
#: A user message with one of each attachment Chat Completions servers take.
CHAT_PARTS: list[dict[str, Any]] = [
    {"type": "text", "text": "What did I send?"},
    {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
    {
        "type": "file",
        "file": {"file_data": data_url("application/pdf", PDF), "filename": "report.pdf"},
    },
    {"type": "text", "text": NOTES},
    {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
    {"type": "file", "file": {"file_id": "file-abc123"}},
    {"type": "video_url", "video_url": {"url": "https://example.com/clip.mp4"}},
]
CHAT_SAID = (
    "I received an image (image/png, 3 KB), report.pdf (application/pdf, 117 KB), "
    "notes & plans.txt (text/plain, 32 B), "
    "an audio clip (audio/wav, 39 KB), a file held by the server as file-abc123 "
    "and a video at https://example.com/clip.mp4."
)
#: The same kinds as the Responses API sends them.
RESPONSES_PARTS: list[dict[str, Any]] = [
    {"type": "input_text", "text": "What did I send?"},
    {"type": "input_image", "image_url": data_url("image/png", PNG), "detail": "auto"},
    {"type": "input_file", "filename": "report.pdf", "file_data": data_url("application/pdf", PDF)},
    {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "mp3"}},
    {"type": "input_image", "file_id": "file-img9"},
    {"type": "input_text", "text": NOTES},
]
RESPONSES_SAID = (
    "I received an image (image/png, 3 KB), report.pdf (application/pdf, 117 KB), "
    "an audio clip (audio/mpeg, 39 KB), an image held by the server as file-img9 "
    "and notes & plans.txt (text/plain, 32 B)."
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with serve(create_scripted_upstream()) as url:
        yield url


def _content(url: str, path: str, body: dict[str, Any]) -> str:
    """All the text the model wrote (answer and any tagged reasoning), streamed or not."""
    response = httpx.post(f"{url}{path}", json=body, timeout=30)
    assert response.status_code == 200, response.text
    if not body.get("stream"):
        whole = response.json()
        if path.endswith("responses"):
            return "".join(
                part["text"]
                for item in whole["output"]
                if item["type"] == "message"
                for part in item["content"]
            )
        return str(whole["choices"][0]["message"]["content"])
    events = [
        json.loads(line[6:])
        for line in response.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    if path.endswith("responses"):
        return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in events if c["choices"])


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_the_scripted_model_names_every_attachment_in_every_dialect(
    upstream: str, model: str, stream: bool
) -> None:
    """Point 6: each Chat Completions attachment part named with its type and size."""
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": CHAT_PARTS}]}
    assert CHAT_SAID in _content(upstream, "/v1/chat/completions", body)


@pytest.mark.parametrize("stream", [True, False])
def test_the_responses_api_names_every_attachment(upstream: str, stream: bool) -> None:
    """Point 6: ``input_image``, ``input_file``, ``input_audio`` named as Chat Completions' are."""
    body = {
        "model": "scripted-reasoning-content",
        "stream": stream,
        "input": [{"role": "user", "content": RESPONSES_PARTS}],
    }
    assert RESPONSES_SAID in _content(upstream, "/v1/responses", body)


def test_only_the_last_user_messages_attachments_are_answered(upstream: str) -> None:
    """An attachment earlier in the conversation does not take over a later turn."""
    messages = [
        {"role": "user", "content": CHAT_PARTS},
        {"role": "assistant", "content": CHAT_SAID},
        {"role": "user", "content": "Why is the sky blue?"},
    ]
    said = _content(
        upstream, "/v1/chat/completions", {"model": "scripted-plain", "messages": messages}
    )
    assert "I received" not in said
    assert "Why is the sky blue?" in said


@pytest.mark.parametrize(
    ("path", "body", "param", "kind"),
    [
        (
            "/v1/chat/completions",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "hi"}, {"type": "document"}],
                    }
                ]
            },
            "messages[0].content[1].type",
            "'document'",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "binary", "mimeType": "image/png"}]}
                ]
            },
            "messages[0].content[0].type",
            "'binary'",
        ),
        (
            "/v1/responses",
            {
                "input": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            },
            "input[0].content[0].type",
            "'image_url'",
        ),
    ],
    ids=["chat-document", "chat-binary", "responses-chat-part"],
)
def test_a_part_no_server_defines_is_refused_as_openai_refuses_it(
    upstream: str, path: str, body: dict[str, Any], param: str, kind: str
) -> None:
    """Point 6: the scripted upstream speaks only real wire formats, so an AG-UI part passed
    through raw (or a Chat Completions part sent to the Responses API) fails as it would."""
    response = httpx.post(f"{upstream}{path}", json={"model": "scripted-plain", **body}, timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_value"
    assert error["param"] == param
    assert error["message"].startswith(f"Invalid value: {kind}. Supported values are: ")


def test_sizes_come_from_the_base64_length() -> None:
    """A 20 MB attachment is described from its length: every padding, and a URL's text."""
    big = bytes(20 * 1024 * 1024 + 1)
    for data in (big, b"a", b"ab", b"abc", PNG):
        [item] = received(
            [{"type": "image_url", "image_url": {"url": data_url("image/png", data)}}]
        )
        assert item.size == len(data)
    [plain] = received(
        [{"type": "file", "file": {"file_data": "data:text/plain,a%20b", "filename": "a.txt"}}]
    )
    assert plain == Received("a file", "a.txt", "text/plain", 3)
    assert [human_size(n) for n in (0, 1023, 1024, 1536, 1024 * 1024, 5 * 1024 * 1024 // 2)] == [
        "0 B",
        "1023 B",
        "1 KB",
        "2 KB",
        "1.0 MB",
        "2.5 MB",
    ]


def test_text_documents_are_read_from_the_text_and_the_words_around_them_quoted(
    upstream: str,
) -> None:
    """A text document is named from its element; the reasoning quotes what the user wrote,
    not the document; an element never closed is no document."""
    content = f"Summarise this: {NOTES} Thanks! <document>\nnever closed"
    body = {"model": "scripted-reasoning", "messages": [{"role": "user", "content": content}]}
    response = httpx.post(f"{upstream}/v1/chat/completions", json=body, timeout=10)
    message = response.json()["choices"][0]["message"]
    assert message["content"].startswith("I received notes & plans.txt (text/plain, 32 B).")
    assert "“Summarise this: Thanks! <document> never closed”" in message["reasoning"]


def test_names_and_urls_are_echoed_on_one_line_and_short() -> None:
    """A hostile file name cannot write lines, tags or megabytes into the answer."""
    name = "evil\n\n<think>x</think>" + "a" * 5000
    [item] = received([{"type": "file", "file": {"file_id": "f", "filename": name}}])
    assert item.name is not None and "\n" not in item.name and len(item.name) == 80
    [far] = received([{"type": "image_url", "image_url": {"url": "https://x/" + "b" * 10**7}}])
    assert far.where is not None and len(far.where) < 100


# -- through the bridge ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack() as running:
        yield running


def _answer(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")


@pytest.mark.parametrize("protocol", ["1.0", None], ids=["client-1.0", "client-0.0.x"])
def test_an_image_part_reaches_the_model_and_is_named(stack: Stack, protocol: str | None) -> None:
    """Point 6: an AG-UI image part (as CopilotKit and the demo page send it, the file's name in
    ``metadata``) goes upstream as ``image_url``; the model names it."""
    part = {
        "type": "image",
        "source": {"type": "data", "value": b64(PNG), "mimeType": "image/png"},
        "metadata": {"filename": "cat.png"},
    }
    message = {"id": "u", "role": "user", "content": [{"type": "text", "text": "Look"}, part]}
    frames = post(f"{stack.bridge_url}/", run_input([message], protocolVersion=protocol))
    assert "I received an image (image/png, 3 KB)." in _answer(frames)
    sent = stack.upstream_requests[-1]["messages"][-1]["content"]
    assert sent[1] == {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}


def _part(kind: str, mime: str, data: bytes, name: str) -> dict[str, Any]:
    """An AG-UI 1.0 part as CopilotKit 1.74 and the demo page build it."""
    source = {"type": "data", "value": b64(data), "mimeType": mime}
    return {"type": kind, "source": source, "metadata": {"filename": name}}


NOTES_TXT = b"Buy milk.\nCall Alice, then Bob.\n"


@pytest.mark.parametrize("protocol", ["1.0", None], ids=["client-1.0", "client-0.0.x"])
def test_every_kind_a_frontend_attaches_reaches_the_model_named(
    stack: Stack, protocol: str | None
) -> None:
    """Point 6 ("Done when": an image, a PDF, a text file or an audio clip reaches the model in
    the form its server takes): through the bridge, each part the frontends send goes upstream as
    ``image_url``, ``file``, text under its name and ``input_audio``, and the model names each."""
    parts = [
        {"type": "text", "text": "What did I send?"},
        _part("image", "image/png", PNG, "cat.png"),
        _part("document", "application/pdf", PDF, "report.pdf"),
        _part("document", "text/plain", NOTES_TXT, "notes.txt"),
        _part("audio", "audio/wav", WAV, "hello.wav"),
    ]
    message = {"id": "u", "role": "user", "content": parts}
    frames = post(f"{stack.bridge_url}/", run_input([message], protocolVersion=protocol))
    assert _answer(frames).startswith(
        "I received an image (image/png, 3 KB), report.pdf (application/pdf, 117 KB), "
        "notes.txt (text/plain, 32 B) and an audio clip (audio/wav, 39 KB)."
    )
    _, image, pdf, notes, audio = stack.upstream_requests[-1]["messages"][-1]["content"]
    assert image == {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}
    assert pdf == {
        "type": "file",
        "file": {"filename": "report.pdf", "file_data": data_url("application/pdf", PDF)},
    }
    assert notes["type"] == "text" and notes["text"].startswith('<document name="notes.txt"')
    assert audio == {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}}


def test_a_legacy_binary_part_reaches_the_model_named(stack: Stack) -> None:
    """Point 6, the 0.0.x ``binary`` part (``mimeType``, ``data``, ``filename``): a PDF the
    model names as it names the 1.0 document part."""
    binary = {
        "type": "binary",
        "mimeType": "application/pdf",
        "data": b64(PDF),
        "filename": "old.pdf",
    }
    message = {"id": "u", "role": "user", "content": [binary]}
    frames = post(f"{stack.bridge_url}/", run_input([message], protocolVersion=None))
    assert _answer(frames).startswith("I received old.pdf (application/pdf, 117 KB).")
