"""Attachments to the live llama-server, whose small model takes text only (started without
``--mmproj``): its ``/props`` says so (``modalities`` all false), the bridge reads it, and an
image ends the run with the clear error before llama-server is asked, or, with
``--unsupported-parts note``, goes as a note and the run finishes; through the Responses API
(no ``/props`` read) the image goes as sent and llama-server's own refusal reaches the official
client in its words, with its code. What went upstream is read from the runs' recordings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

import llama_server
from live_tools import DETERMINISTIC, bridge, llama, one_run
from node_tools import official

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)
PICTURE = [
    {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {
                "type": "image",
                "source": {"type": "data", "value": PNG, "mimeType": "image/png"},
                "metadata": {"filename": "dot.png"},
            },
        ],
    }
]


def _requests(folder: Path) -> list[dict[str, Any]]:
    """The upstream requests the recordings hold: URL and body."""
    requests = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["type"] == "request":
                requests.append(entry)
    return requests


def test_an_image_to_the_text_only_model_gets_the_clear_error_from_its_props(
    bed: llama_server.Bed, tmp_path: Path
) -> None:
    with llama(bed) as server, bridge(server, record_dir=str(tmp_path)) as agent:
        props = httpx.get(f"{server.origin}/props", timeout=10).json()
        assert props["modalities"] == {"vision": False, "video": False, "audio": False}
        (report,) = official([{"url": agent, "messages": PICTURE}])
    events = report["events"]
    assert [event["type"] for event in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "unsupported_part"
    assert events[-1]["message"].startswith(
        "this model cannot take the image dot.png (image/png, 70 bytes): llama-server's /props "
        "says it takes no images (vision: false): start llama-server with a vision model's "
        "--mmproj"
    )
    assert _requests(tmp_path) == []  # llama-server was never asked to refuse it


def test_with_note_the_model_reads_a_note_and_the_run_finishes(
    bed: llama_server.Bed, tmp_path: Path
) -> None:
    with (
        llama(bed) as server,
        bridge(server, record_dir=str(tmp_path), unsupported_parts="note") as agent,
    ):
        one_run(agent, PICTURE, forwardedProps={**DETERMINISTIC, "max_tokens": 8})
    (request,) = _requests(tmp_path)
    (asked,) = [m for m in request["body"]["messages"] if m["role"] == "user"]
    assert asked["content"] == [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "text", "text": "[dot.png, image/png, 70 bytes: this model cannot read it]"},
    ]


def test_where_no_props_is_read_llama_servers_own_refusal_reaches_the_client(
    bed: llama_server.Bed,
) -> None:
    """The Responses API reads no ``/props``: the image goes as sent, and llama-server's
    refusal (HTTP 500, its words) is the run's error, as the official client shows it."""
    with llama(bed) as server, bridge(server, upstream_api="responses") as agent:
        (report,) = official([{"url": agent, "messages": PICTURE}])
    events = report["events"]
    refused_turn = ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_ERROR"]
    assert [event["type"] for event in events] == refused_turn
    assert (events[-1]["code"], events[-1]["message"]) == (
        "upstream_http_500",
        "image input is not supported - hint: if this is unexpected, you may need to provide "
        "the mmproj",
    )
