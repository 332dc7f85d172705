"""Tool results with parts (issue 41, point 5), over real sockets: an MCP server of ours whose
tools answer with an image, an embedded text resource, a blob resource, a key in their bytes,
data that is not base64 and a big image; a real bridge; the scripted upstream; the official
clients.

Promises held: an AG-UI 1.0 client receives such a result as content parts of
``TOOL_CALL_RESULT``, a 0.0.x client as the text it always had; the model gets what its API
takes (Chat Completions: the text, and the media in a user message after the turn's results;
the Responses API: the images in ``function_call_output`` itself); the next run, sent back by
the client, sends the same bytes upstream; a secret leaves in no part, its bytes included; a
big image is made ready off the event loop. Order and structure are asserted, never time
(``benchmarks/tool_image_stall.py`` measures the stall).
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import DataSource, ImagePart, TextPart, ToolCallResultEvent, UrlSource
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from agui_rules import check_frames, parse_body
from bridge.core.encode import encode_event
from bridge.serve.redact import MASK, Redactor
from bridge.serve.run import request as request_module
from bridge.serve.tools import mcp_content, mcp_tools
from bridge.serve.tools import results as results_module
from bridge.serve.tools.results import ServerToolResult
from node_tools import official
from peers_inputs import Gate, on_event_loop, posted_while_gated
from peers_tool_parts import LOGO, NOTES, PNG, encoded, picture_blocks
from servers import messages_from, post, run_input, scripted_stack

PEER = Path(__file__).resolve().parent / "peers_tool_parts.py"
KEY = "sk-tool-parts-Zq8Xv3Lm5Np2Rt7Wy4Kb"


def media(**overrides: Any) -> Any:
    """A stack whose bridge runs the peer as the MCP server ``media``."""
    server = f"{sys.executable} {PEER} --key {KEY} --size {overrides.pop('size', 1024)}"
    return scripted_stack(mcp_servers={"media": server}, **overrides)


def ask(tool: str, **extra: Any) -> dict[str, Any]:
    return run_input(
        [{"id": "u1", "role": "user", "content": f"Please media__{tool} now"}], **extra
    )


def result_of(frames: list[dict[str, Any]]) -> dict[str, Any]:
    (result,) = [f for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert frames[-1]["type"] == "RUN_FINISHED"
    return result


def data_url(data: bytes) -> str:
    return f"data:image/png;base64,{encoded(data)}"


#: ``picture``'s result as a 1.0 client receives it.
PICTURE_PARTS = [
    {"type": "text", "text": "Here is the chart."},
    {"type": "image", "source": {"type": "data", "value": encoded(PNG), "mimeType": "image/png"}},
    {
        "type": "text",
        "text": NOTES,
        "metadata": {"uri": "file:///notes/readme.md", "mimeType": "text/markdown"},
    },
    {
        "type": "image",
        "source": {"type": "data", "value": encoded(LOGO), "mimeType": "image/png"},
        "metadata": {
            "uri": "file:///pics/logo.png",
            "mimeType": "image/png",
            "filename": "logo.png",
        },
    },
]
#: ... as a 0.0.x client receives it: the text it always got (every block that is not text as
#: its JSON, as the bridge wrote it before parts).
PICTURE_TEXT = "\n".join(
    block.text
    if block.type == "text"
    else json.dumps(block.model_dump(mode="json", exclude_none=True))
    for block in picture_blocks()
)


def picture_turn(call_id: str) -> list[dict[str, Any]]:
    """What a Chat Completions upstream is sent for ``picture``'s result: the tool message's
    text naming each image in its place, then the images in a user message."""
    return [
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": "Here is the chart.\n"
            "[attachment 1: image/png, sent after the tool results]\n"
            f"{NOTES}\n"
            "[attachment 2: logo.png, image/png, sent after the tool results]",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"[attachment 1, from the call {call_id}: image/png]"},
                {"type": "image_url", "image_url": {"url": data_url(PNG)}},
                {
                    "type": "text",
                    "text": f"[attachment 2, from the call {call_id}: logo.png, image/png]",
                },
                {"type": "image_url", "image_url": {"url": data_url(LOGO)}},
            ],
        },
    ]


def test_a_1_0_client_gets_parts_and_the_model_the_images_after_the_results() -> None:
    """Point 5: an MCP tool's image and resources reached a 1.0 client as JSON text (base64 and
    all), and the model read that text. Now the client receives them as content parts, and the
    Chat Completions upstream gets the text with each image named in its place, then the
    images in a user message after the turn's results."""
    with media() as stack:
        frames = post(stack.bridge_url, ask("picture"))
        requests = stack.upstream_requests
    result = result_of(frames)
    assert result["content"] == PICTURE_PARTS
    assert len(requests) == 2
    assert requests[1]["messages"][-2:] == picture_turn(result["toolCallId"])


def test_a_0_0_client_gets_the_text_it_always_had_and_so_does_the_model() -> None:
    """Point 5: a 0.0.x client's schema takes a string only (a list is a ZodError): it gets the
    result's text, as before parts, and the model reads that same text (what the client will
    send back), with no message after it."""
    with media() as stack:
        frames = post(stack.bridge_url, ask("picture", protocolVersion=None))
        requests = stack.upstream_requests
    result = result_of(frames)
    assert result["content"] == PICTURE_TEXT
    assert requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": result["toolCallId"],
        "content": PICTURE_TEXT,
    }


@pytest.mark.parametrize("protocol", ["1.0", None])
def test_the_next_run_sends_the_result_upstream_byte_for_byte(protocol: str | None) -> None:
    """Point 5 and README "Server-side tools": the client stores the result as it came (parts
    or text) and sends it back; the next run sends the turns upstream as the run did, byte for
    byte (the images after the results included), so the server's prefix cache holds."""
    with media(reasoning_scope="all") as stack:
        frames = post(stack.bridge_url, ask("picture", protocolVersion=protocol))
        in_run = stack.upstream_requests[1]["messages"]
        history = [*ask("picture")["messages"], *messages_from(frames)]
        history.append({"id": "u2", "role": "user", "content": "Thanks"})
        post(stack.bridge_url, run_input(history, protocolVersion=protocol))
        next_run = stack.upstream_requests[2]["messages"]
    assert json.dumps(next_run[: len(in_run)]) == json.dumps(in_run)
    if protocol == "1.0":  # the images reached the model in both
        assert in_run[-2:] == picture_turn(result_of(frames)["toolCallId"])


@pytest.mark.parametrize("client", ["1.0.0", "0.0.59", "0.0.52"])
def test_the_official_clients_take_the_result_and_send_it_back(client: str) -> None:
    """Point 5: ``@ag-ui/client`` 1.0.0 keeps the parts in its tool message, 0.0.x the text;
    neither complains, and the next run through the same client sends the turns upstream byte
    for byte as the run did."""
    with media(reasoning_scope="all") as stack:
        first = {
            "url": stack.bridge_url,
            "threadId": "t-parts",
            "messages": ask("picture")["messages"],
        }
        (report,) = official([first], client=client)
        in_run = stack.upstream_requests[1]["messages"]
        thanks = {"id": "u2", "role": "user", "content": "Thanks"}
        again = {**first, "messages": [*report["messages"], thanks]}
        (second,) = official([again], client=client)
        next_run = stack.upstream_requests[2]["messages"]
    assert not report["failed"] and report["rejected"] is None
    assert not second["failed"] and second["rejected"] is None
    (tool,) = [m for m in report["messages"] if m["role"] == "tool"]
    assert tool["content"] == (PICTURE_PARTS if client == "1.0.0" else PICTURE_TEXT)
    assert json.dumps(next_run[: len(in_run)]) == json.dumps(in_run)


def test_the_responses_api_gets_the_images_in_the_function_call_output() -> None:
    """Point 5: the Responses API's ``function_call_output`` takes ``input_text``,
    ``input_image`` and ``input_file`` itself: the result goes there whole, in its order, and
    no message follows it."""
    with media(upstream_api="responses") as stack:
        frames = post(stack.bridge_url, ask("picture"))
        requests = stack.upstream_requests
    result = result_of(frames)
    assert result["content"] == PICTURE_PARTS
    assert requests[1]["input"][-1] == {
        "type": "function_call_output",
        "call_id": result["toolCallId"],
        "output": [
            {"type": "input_text", "text": "Here is the chart."},
            {"type": "input_image", "image_url": data_url(PNG)},
            {"type": "input_text", "text": NOTES},
            {"type": "input_image", "image_url": data_url(LOGO)},
        ],
    }


def test_a_key_in_a_parts_text_bytes_or_uri_leaves_in_no_frame_or_request() -> None:
    """Point 5 and README "Promises" (a secret leaves in no frame or body, in any encoding): the
    key in a text block, in the bytes of an image and of a blob resource (base64, where no
    scan of the text finds it) and in the resource's URI is masked in every part; the bytes
    are decoded, masked and encoded again."""
    with media(api_key=KEY) as stack:
        frames = post(stack.bridge_url, ask("leaky"))
        sent = json.dumps(stack.upstream_requests[1])
        images = [
            part["image_url"]["url"]
            for part in stack.upstream_requests[1]["messages"][-1]["content"]
            if part["type"] == "image_url"
        ]
    content = result_of(frames)["content"]
    assert content[0] == {"type": "text", "text": f"the key is {MASK}"}
    values = [base64.b64decode(part["source"]["value"]) for part in content[1:]]
    assert values == [PNG + f" the key: {MASK} ".encode()] * 2
    assert content[2]["metadata"] == {
        "uri": f"file:///keys/{MASK}.png",
        "mimeType": "image/png",
        "filename": f"{MASK}.png",
    }
    upstream = [base64.b64decode(url.split(",", 1)[1]) for url in images]
    assert upstream == values
    assert KEY[:8] not in json.dumps(frames) and KEY[:8] not in sent


def test_data_that_is_not_base64_is_left_out_and_the_model_reads_why() -> None:
    """Point 5: a hostile server's image whose data is not base64 would reach the client and
    the upstream as a broken data URL; it is left out, and a text part says so in its place."""
    with media() as stack:
        frames = post(stack.bridge_url, ask("garbled"))
        requests = stack.upstream_requests
    why = "[the tool's image (image/png) is left out: its data is not base64]"
    assert result_of(frames)["content"] == [{"type": "text", "text": why}]
    assert requests[1]["messages"][-1]["content"] == why


def test_a_result_the_upstreams_api_cannot_carry_ends_the_run_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Point 5 (and point 3: a clear answer, never an internal error): a tool's part that the
    upstream's API cannot take is found when the next request is built; the run ends with
    RUN_ERROR ``invalid_input`` and the builder's reason, where it said only "the bridge
    failed" (``internal_error``)."""
    build = request_module.to_openai_messages

    def refusing(messages: Any, **options: Any) -> Any:
        if any(m.role == "tool" for m in messages):  # the request after the tool's result
            raise ValueError("tool message content part of type 'image' is not supported here")
        return build(messages, **options)

    monkeypatch.setattr(request_module, "to_openai_messages", refusing)
    with media() as stack:
        frames = post(stack.bridge_url, ask("picture"))
    # The first turn's usage too (issue 43: a run that spent tokens says so as it fails).
    spent = frames[-1].pop("usage")
    assert frames[-1] == {
        "type": "RUN_ERROR",
        "message": "tool message content part of type 'image' is not supported here",
        "code": "invalid_input",
    }
    assert len(spent) == 1 and spent[0]["outputTokens"] > 0
    assert [f["type"] for f in frames].count("TOOL_CALL_RESULT") == 1


def test_a_big_image_is_made_ready_off_the_event_loop_while_health_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Point 5 and README "Promises" (big results off the event loop): a 3 MB image is decoded
    and scanned for the key in a worker thread, a slice at a time: /health answers while that
    work is under way, and the image arrives whole. Its text (the JSON a 0.0.x client would
    get) is written in a worker thread too."""
    gate = Gate()
    scan = Redactor.split_held_bytes
    slices: list[int] = []
    texts: list[bool] = []

    def spy(self: Redactor, data: bytes) -> tuple[bytes, bytes]:
        slices.append(len(data))
        gate.hold()
        return scan(self, data)

    def text_of(result: Any) -> str:
        texts.append(on_event_loop())
        return mcp_content.result_text(result)

    monkeypatch.setattr(Redactor, "split_held_bytes", spy)
    monkeypatch.setattr(mcp_tools, "result_text", text_of)
    size = 3_000_000
    with media(api_key=KEY, size=size) as stack:
        response = posted_while_gated(stack.bridge_url, gate, ask("big_picture"))
    frames = check_frames(parse_body(response.text))
    (part,) = result_of(frames)["content"]
    assert base64.b64decode(part["source"]["value"]) == (PNG * (size // len(PNG) + 1))[:size]
    assert gate.order == ["work started", "health answered", "work went on"]
    assert gate.on_loop and not any(gate.on_loop)
    assert len(slices) > 1 and max(slices) < size  # a slice at a time
    assert texts == [False]


def _with_masks_for_spans(data: bytes) -> re.Pattern[bytes]:
    """What ``data`` was made from: itself, each mask standing for some bytes."""
    return re.compile(b".+?".join(map(re.escape, data.split(MASK.encode()))), re.DOTALL)


def test_each_mcp_block_becomes_the_part_of_its_kind() -> None:
    """Point 5: every block of MCP's content, as its part: an image or audio block by its kind
    (whatever its MIME type says), a blob by its MIME type (a document for any other, bytes for
    none), a resource link as its JSON in a text part; a result of text only stays text."""
    link = ResourceLink(type="resource_link", name="report", uri="file:///r.pdf")
    blocks = [
        ImageContent(type="image", data="AAAA", mime_type="application/octet-stream"),
        AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="s3://b/clip%201.mp4", mime_type="video/mp4", blob="AA=="
            ),
        ),
        EmbeddedResource(
            type="resource", resource=BlobResourceContents(uri="mem://x/", blob="AA==")
        ),
        link,
    ]
    parts = mcp_content.result_parts(CallToolResult(content=blocks))
    assert [part.model_dump(by_alias=True, exclude_none=True) for part in parts] == [
        {
            "type": "image",
            "source": {"type": "data", "value": "AAAA", "mimeType": "application/octet-stream"},
        },
        {"type": "audio", "source": {"type": "data", "value": "AAAA", "mimeType": "audio/wav"}},
        {
            "type": "video",
            "source": {"type": "data", "value": "AA==", "mimeType": "video/mp4"},
            "metadata": {
                "uri": "s3://b/clip%201.mp4",
                "mimeType": "video/mp4",
                "filename": "clip 1.mp4",
            },
        },
        {
            "type": "document",
            "source": {"type": "data", "value": "AA==", "mimeType": "application/octet-stream"},
            "metadata": {"uri": "mem://x/"},
        },
        {"type": "text", "text": json.dumps(link.model_dump(mode="json", exclude_none=True))},
    ]
    text_only = CallToolResult(content=[TextContent(type="text", text="hi")])
    assert mcp_content.result_parts(text_only) == ()


_TEXTS = ["a", " ", "\n", '"', "\\", "é", "\x01", "\ud800", KEY[:9], KEY[4:20], KEY]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.lists(st.sampled_from(_TEXTS), max_size=40).map(lambda p: ("text", "".join(p))),
            st.lists(st.sampled_from(_TEXTS[:2] + _TEXTS[-3:]), max_size=40).map(
                lambda p: ("bytes", "".join(p).encode())
            ),
            st.sampled_from(_TEXTS).map(lambda p: ("url", f"https://x.test/{p}")),
        ),
        max_size=6,
    )
)
def test_parts_made_ready_in_slices_are_the_parts_redacted_and_encoded(
    made: list[tuple[str, Any]],
) -> None:
    """Point 5: cut anywhere (slices of a few dozen characters here), keys anywhere: each text
    is the text redacted, each part's bytes the bytes redacted, each URL redacted, and the
    frame spliced from the slices is what the encoder writes for the whole event."""
    redactor = Redactor([KEY])
    parts: list[Any] = []
    for kind, value in made:
        if kind == "text":
            parts.append(TextPart(text=value))
        elif kind == "bytes":
            parts.append(ImagePart(source=DataSource(value=encoded(value), mime_type="image/png")))
        else:
            parts.append(ImagePart(source=UrlSource(value=value)))
    event = ServerToolResult(message_id="m", tool_call_id="c", role="tool", content="")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(results_module, "_SLICE", 40)
        patch.setattr(results_module, "_BASE64_SLICE", 40)
        patch.setattr(results_module, "BIG_RESULT", 10)
        ready = event.ready_parts(parts, redactor)
    assert isinstance(ready.content, list)
    for (kind, value), part in zip(made, ready.content, strict=True):
        if kind == "text":
            assert part.text == redactor.redact(value.replace("\ud800", "\ufffd"))
        elif kind == "bytes":
            out = base64.b64decode(part.source.value)
            # Scanned as a stream (as recordings are), the masks may fall a little otherwise
            # than on the whole: no piece of a key is left, and every byte outside a mask is
            # the tool's, in its place.
            assert redactor.redact_bytes(out) == out
            assert _with_masks_for_spans(out).fullmatch(value)
        else:
            assert part.source.value == redactor.redact(value.replace("\ud800", "\ufffd"))
    plain = ToolCallResultEvent(
        message_id="m", tool_call_id="c", role="tool", content=ready.content
    )
    assert ready.frame == encode_event(plain)
