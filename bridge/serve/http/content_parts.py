"""The content parts of a body, read for the rest of the bridge, which sees AG-UI 1.0 parts only.

Before validation, on the parsed JSON (``read_parts``):

- a 0.0.x ``binary`` part (``mimeType`` with ``data``, ``url`` or ``id``, and ``filename``), which
  the 1.0 models refuse, becomes the 1.0 part its MIME type says (``image/…``, ``audio/…``,
  ``video/…``, else a document), its payload the part's source (``data``; ``url``; an ``id`` is a
  ``file`` handle), its file name in ``metadata.filename``: as ``@ag-ui/client``'s own conversion
  (``convertBinaryToNewFormat``) and CopilotKit put it;
- a ``url`` source that is a base64 ``data:`` URL becomes the ``data`` source it is;
- a part of a type AG-UI does not define is refused, naming it (422), not left to pydantic's
  union error;
- every inline attachment's size is read from its base64's length and held to
  ``max_attachment_bytes``, all of a body's together to ``max_request_attachment_bytes`` (413),
  before anything is decoded or validated.

After validation (``decoded_parts``): every inline attachment's base64 is decoded, a slice at a
time (``bridge.serve.run.parts.BASE64_SLICE``), so one that is not base64 is refused (400) before
anything goes upstream; a text document (``text/*``, JSON, CSV, Markdown, …) is read once, here,
and goes on as the text part the model will read (its file name in the text and in
``metadata``). Both run where the body is read: in a worker thread for a big body, whose decoding
gives the event loop its turn between slices.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ag_ui.core import DataSource, DocumentPart, Message, RunAgentInput, TextPart

from bridge.config import BridgeConfig
from bridge.core.errors import InvalidRunInputError
from bridge.serve.run.parts import (
    UnmappablePartError,
    check_base64,
    decode_base64,
    describe,
    document_text,
    is_text,
    utf8_text,
)

#: The part types a body may hold: AG-UI 1.0's, and 0.0.x's ``binary``.
PART_TYPES = ("text", "image", "audio", "video", "document")
_KINDS = ", ".join(PART_TYPES)


def read_parts(data: Any, config: BridgeConfig) -> None:
    """Every message's content parts in ``data`` (a parsed body) read as 1.0 parts, in place,
    and its inline attachments held to their limits; ``InvalidRunInputError`` names what is
    wrong."""
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        return
    total = 0
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for number, part in enumerate(content):
            if not isinstance(part, dict):
                continue  # pydantic says what it should be
            where = f"messages.{index}.content.{number}"
            part = _as_1_0(part, where)
            content[number] = part
            size = _inline_size(part)
            if size > config.max_attachment_bytes:
                raise InvalidRunInputError(
                    f"{where}: {_named(part)} of {size} bytes is larger than "
                    f"{config.max_attachment_bytes} (--max-attachment-bytes)",
                    status=413,
                    code="attachment_too_large",
                )
            total += size
            if total > config.max_request_attachment_bytes:
                raise InvalidRunInputError(
                    f"{where}: the attachments up to this one come to {total} bytes, more than "
                    f"{config.max_request_attachment_bytes} (--max-request-attachment-bytes); "
                    "a client sends every earlier message's attachments again with each run",
                    status=413,
                    code="attachments_too_large",
                )


def decoded_parts(run_input: RunAgentInput) -> RunAgentInput:
    """``run_input`` with every inline attachment's base64 checked and each text document as
    the text part the model reads; ``InvalidRunInputError`` (400) for one that is not base64,
    or a text document that is not UTF-8."""
    changed = False
    messages: list[Message] = []
    for index, message in enumerate(run_input.messages):
        content = getattr(message, "content", None)
        if isinstance(content, list):
            parts = list(_decoded(content, index))
            if any(new is not old for new, old in zip(parts, content, strict=True)):
                message = message.model_copy(update={"content": parts})
                changed = True
        messages.append(message)
    return run_input.model_copy(update={"messages": messages}) if changed else run_input


def _decoded(content: list[Any], index: int) -> Iterator[Any]:
    for number, part in enumerate(content):
        source = getattr(part, "source", None)
        if not isinstance(source, DataSource):
            yield part
            continue
        try:
            if isinstance(part, DocumentPart) and is_text(part):
                data = decode_base64(source.value, describe(part))
                text = document_text(part, utf8_text(part, data))
                yield TextPart(id=part.id, text=text, metadata=part.metadata)
            else:
                check_base64(source.value, describe(part))
                yield part
        except UnmappablePartError as exc:
            raise InvalidRunInputError(f"messages.{index}.content.{number}: {exc}") from None


def _as_1_0(part: dict[str, Any], where: str) -> dict[str, Any]:
    """One part as AG-UI 1.0 has it (``InvalidRunInputError`` for a type it does not define)."""
    kind = part.get("type")
    if kind == "binary":
        return _binary(part, where)
    if kind not in PART_TYPES:
        raise InvalidRunInputError(
            f"{where}: a content part of type {str(kind)[:64]!r}, which AG-UI does not define "
            f"({_KINDS}; before 1.0, binary)",
            status=422,
        )
    source = part.get("source")
    if isinstance(source, dict) and source.get("type") == "url":
        inline = _data_url(source.get("value"))
        if inline is not None:
            return {**part, "source": inline}
    return part


def _binary(part: dict[str, Any], where: str) -> dict[str, Any]:
    """A 0.0.x ``binary`` part as the 1.0 part its MIME type says."""
    mime = part.get("mimeType", part.get("mime_type"))
    if not isinstance(mime, str):
        raise InvalidRunInputError(f"{where}: a binary part needs its mimeType", status=422)
    kind = next((k for k in ("image", "audio", "video") if mime.startswith(f"{k}/")), "document")
    source: dict[str, Any] | None = None
    for key, source_type in (("data", "data"), ("url", "url"), ("id", "file")):
        value = part.get(key)
        if isinstance(value, str) and value:
            source = {"type": source_type, "value": value, "mimeType": mime}
            break
    if source is None:
        raise InvalidRunInputError(f"{where}: a binary part needs its data, url or id", status=422)
    converted: dict[str, Any] = {"type": kind, "source": source}
    filename = part.get("filename")
    if isinstance(filename, str) and filename:
        converted["metadata"] = {"filename": filename}
    return _as_1_0(converted, where)


def _data_url(value: Any) -> dict[str, Any] | None:
    """``data:<type>[;…];base64,<data>`` as a data source; ``None`` for any other URL."""
    if not isinstance(value, str) or not value.startswith("data:"):
        return None
    comma = value.find(",", 0, 1024)
    head = value[5:comma].split(";") if comma > 0 else []
    if not head or head[-1] != "base64":
        return None
    return {"type": "data", "value": value[comma + 1 :], "mimeType": ";".join(head[:-1])}


def _inline_size(part: dict[str, Any]) -> int:
    """About how many bytes a part carries inline: its base64's length, three quarters."""
    source = part.get("source")
    if not isinstance(source, dict) or source.get("type") != "data":
        return 0
    value = source.get("value")
    return len(value) * 3 // 4 if isinstance(value, str) else 0


def _named(part: dict[str, Any]) -> str:
    """``an attachment (report.pdf, application/pdf)``, as far as the part says."""
    metadata = part.get("metadata")
    name = metadata.get("filename") if isinstance(metadata, dict) else None
    source = part.get("source")
    mime = source.get("mimeType", source.get("mime_type")) if isinstance(source, dict) else None
    known = ", ".join(str(x)[:120] for x in (name, mime) if isinstance(x, str) and x)
    return "an attachment" + (f" ({known})" if known else "")
