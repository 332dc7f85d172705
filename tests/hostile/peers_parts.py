"""Peers of the attachments' tests (issue 41): small real files of each kind, each as the three
client lines send it, and what each upstream API must receive for it.

The client lines: a 1.0 body (``@ag-ui/client`` 1.0.0: ``protocolVersion`` "1.0", media parts
with a ``data``, ``url`` or ``file`` source, the file name in ``metadata.filename``, where
CopilotKit 1.74 puts it); a 0.0.59 body (no ``protocolVersion``; the same media parts, which
0.0.59 defines, without the ``file`` source it does not); a 0.0.x ``binary`` part (``mimeType``
with ``data``, ``url`` or ``id``, and ``filename``).
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL

LINES = ("1.0", "0.0.59", "binary")
SOURCES = ("data", "url", "file")
QUESTION = "What is in this file?"


def _png() -> bytes:
    """A 1x1 red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav() -> bytes:
    """A tenth of a second of 8 kHz mono silence."""
    samples = b"\x00\x00" * 800
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(samples)) + samples
    return b"RIFF" + struct.pack("<I", len(body)) + body


_PDF = b"%PDF-1.4\n1 0 obj <</Type /Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"
_MP4 = struct.pack(">I", 24) + b"ftypisom\x00\x00\x02\x00isomiso2"
CSV = "city,temp\nOslo,4\nLima,19\n"


@dataclass(frozen=True)
class File:
    """One attachment: its part type, name, MIME type and bytes."""

    key: str
    part: str
    name: str
    mime: str
    data: bytes

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode()

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.base64}"

    @property
    def url(self) -> str:
        return f"https://files.example/{self.name}"

    @property
    def file_id(self) -> str:
        return f"file-{self.key}"


FILES = {
    file.key: file
    for file in (
        File("image", "image", "cat.png", "image/png", _png()),
        File("audio", "audio", "memo.wav", "audio/wav", _wav()),
        File("video", "video", "clip.mp4", "video/mp4", _MP4),
        File("pdf", "document", "report.pdf", "application/pdf", _PDF),
        File("text", "document", "notes.csv", "text/csv", CSV.encode()),
    )
}


def part(file: File, source: str, line: str) -> dict[str, Any]:
    """``file`` as a content part from ``source``, as client ``line`` sends it."""
    if line == "binary":
        payload = {"data": file.base64, "url": file.url, "file": file.file_id}[source]
        key = "id" if source == "file" else source
        return {"type": "binary", "mimeType": file.mime, key: payload, "filename": file.name}
    value = {"data": file.base64, "url": file.url, "file": file.file_id}[source]
    return {
        "type": file.part,
        "source": {"type": source, "value": value, "mimeType": file.mime},
        "metadata": {"filename": file.name},
    }


def body(parts: list[dict[str, Any]], line: str, **extra: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` whose one user message asks about ``parts``, as ``line`` sends it."""
    out: dict[str, Any] = {
        "threadId": "thread-parts",
        "runId": f"run-{line}",
        "messages": [
            {"id": "u1", "role": "user", "content": [{"type": "text", "text": QUESTION}, *parts]}
        ],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **extra,
    }
    if line == "1.0":
        out["protocolVersion"] = "1.0"
    return out


def cases() -> list[tuple[str, str, str]]:
    """Every (file, source, line) a client line can send: 0.0.59 has no ``file`` source."""
    return [
        (key, source, line)
        for key in FILES
        for source in SOURCES
        for line in LINES
        if not (line == "0.0.59" and source == "file")
    ]


def document_text(file: File) -> str:
    return f'<document name="{file.name}" type="{file.mime}">\n{file.data.decode()}</document>'


#: What the upstream takes for each (file, source): a content part, or the words of the error
#: that names the part and what would take it.
CHAT: dict[tuple[str, str], dict[str, Any] | str] = {}
RESPONSES: dict[tuple[str, str], dict[str, Any] | str] = {}
for _file in FILES.values():
    _k = _file.key
    _file_id = {"type": "file", "file": {"file_id": _file.file_id}}
    CHAT[_k, "file"] = _file_id
    _by_url = "given by URL cannot go to Chat Completions"
    if _k == "image":
        CHAT[_k, "data"] = {"type": "image_url", "image_url": {"url": _file.data_url}}
        CHAT[_k, "url"] = {"type": "image_url", "image_url": {"url": _file.url}}
        RESPONSES[_k, "data"] = {"type": "input_image", "image_url": _file.data_url}
        RESPONSES[_k, "url"] = {"type": "input_image", "image_url": _file.url}
        RESPONSES[_k, "file"] = {"type": "input_image", "file_id": _file.file_id}
    elif _k == "audio":
        CHAT[_k, "data"] = {
            "type": "input_audio",
            "input_audio": {"data": _file.base64, "format": "wav"},
        }
        CHAT[_k, "url"] = f"{_by_url}: its input_audio takes the bytes inline"
        RESPONSES[_k, "data"] = CHAT[_k, "data"]
        RESPONSES[_k, "url"] = (
            "given by URL cannot go to the Responses API, whose input_audio takes the bytes inline"
        )
        RESPONSES[_k, "file"] = (
            "given by file id cannot go to the Responses API, whose input_audio takes the bytes inline"
        )
    elif _k == "video":
        CHAT[_k, "data"] = {"type": "video_url", "video_url": {"url": _file.data_url}}
        CHAT[_k, "url"] = {"type": "video_url", "video_url": {"url": _file.url}}
        for _source in SOURCES:
            RESPONSES[_k, _source] = (
                "cannot go to the Responses API, which takes no video: use --upstream-api chat"
            )
    else:
        if _k == "pdf":
            _inline = {"filename": _file.name, "file_data": _file.data_url}
            CHAT[_k, "data"] = {"type": "file", "file": _inline}
            RESPONSES[_k, "data"] = {"type": "input_file", **_inline}
        else:
            CHAT[_k, "data"] = {"type": "text", "text": document_text(_file)}
            RESPONSES[_k, "data"] = {"type": "input_text", "text": document_text(_file)}
        CHAT[_k, "url"] = f"{_by_url}: its file part takes the bytes inline or a file id"
        RESPONSES[_k, "url"] = {"type": "input_file", "file_url": _file.url}
        RESPONSES[_k, "file"] = {"type": "input_file", "file_id": _file.file_id}


def upstream_body(api: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole request body the bridge sends for one user message of ``content`` parts."""
    if api == "chat":
        return {
            "model": DEFAULT_SCRIPTED_MODEL,
            "messages": [{"role": "user", "content": content}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    return {
        "model": DEFAULT_SCRIPTED_MODEL,
        "input": [{"role": "user", "content": content}],
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"summary": "auto"},
    }


def question(api: str) -> dict[str, Any]:
    """The text part before the attachment, as ``api`` takes it."""
    return {"type": "text" if api == "chat" else "input_text", "text": QUESTION}
