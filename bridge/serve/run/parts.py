"""AG-UI content parts → what each upstream API takes. Pure, no I/O.

One function per API, from one AG-UI 1.0 part (text, image, audio, video or document, its bytes
carried inline as ``data``, named by ``url`` or held by the provider as ``file``) to the
upstream's content part: ``chat_part`` (Chat Completions) and ``responses_part`` (the Responses
API). The history (``bridge.serve.run.history``) calls them for every user message, whoever made
it: the client, or the bridge from a tool's result. README "Attachments" has the table.

Text documents (``text/*``, JSON, CSV, Markdown, …) go as text, under their file name, on every
API: OpenAI's Chat Completions takes only PDFs as files, and most local servers take no files at
all, while every model reads text. A part an API has no place for raises
``UnmappablePartError``, which names the part and what would take it.

The file name is read where CopilotKit 1.74 and ``@ag-ui/client`` (converting a 0.0.x ``binary``
part) put it: ``metadata.filename``.
"""

from __future__ import annotations

import binascii
import html
import mimetypes
from collections.abc import Iterator
from typing import Any

from ag_ui.core import (
    AudioPart,
    ContentPart,
    DataSource,
    DocumentPart,
    FileSource,
    ImagePart,
    TextPart,
    UrlSource,
    VideoPart,
)

#: Base64 characters decoded in one call (a multiple of 4): each call holds the GIL, so a big
#: attachment decoded in a worker thread lets the event loop in between slices.
BASE64_SLICE = 1 << 20

#: MIME types read as text besides ``text/*`` and the ``+json``/``+xml`` families.
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/jsonl",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/csv",
        "application/javascript",
        "application/x-javascript",
        "application/typescript",
        "application/sql",
        "application/x-sh",
        "application/x-python",
    }
)

#: File names read as text when the client knew no type (a browser sends ``""`` for a file its
#: system has no type for: ``.yaml`` and ``.toml`` on most).
_TEXT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt", ".csv", ".tsv", ".json")
_TEXT_SUFFIXES += (".jsonl", ".ndjson", ".yaml", ".yml", ".toml", ".xml", ".log", ".ini", ".rst")

#: ``input_audio.format`` by MIME type; any other ``audio/x`` is sent as ``x``, for the upstream
#: to take or refuse in its own words (OpenAI takes wav and mp3; vLLM reads more).
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/x-mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/x-m4a": "m4a",
}

#: Python's own table only: the system's (``/etc/mime.types``) would make the bridge read the
#: same file differently on another machine.
_GUESS = mimetypes.MimeTypes()

MediaPart = ImagePart | AudioPart | VideoPart | DocumentPart


class UnmappablePartError(ValueError):
    """A part the upstream API has no place for; the message names the part and what would
    take it (the history adds where the part is)."""


def chat_part(part: ContentPart) -> dict[str, Any]:
    """One AG-UI part as a Chat Completions content part."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if not isinstance(part, MediaPart):
        raise UnmappablePartError(f"a part of type {_kind(part)!r} has no place upstream")
    source = part.source
    if isinstance(source, FileSource):
        # The only way Chat Completions refers to bytes a provider already holds.
        return {"type": "file", "file": {"file_id": source.value}}
    if isinstance(part, DocumentPart) and isinstance(source, DataSource) and is_text(part):
        return {"type": "text", "text": document_text(part)}
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": _url(source)}}
    if isinstance(part, VideoPart):  # vLLM's shape; a server without video refuses it itself
        return {"type": "video_url", "video_url": {"url": _url(source)}}
    if not isinstance(source, DataSource):
        if isinstance(part, AudioPart):
            takes, instead = "its input_audio takes the bytes inline", ""
        else:
            takes = "its file part takes the bytes inline or a file id"
            instead = ", or use --upstream-api responses (its input_file takes a URL)"
        raise UnmappablePartError(
            f"{describe(part)} given by URL cannot go to Chat Completions: {takes}; send the "
            f"bytes as data (base64){instead}"
        )
    if isinstance(part, AudioPart):
        return {"type": "input_audio", "input_audio": _audio(source)}
    return {
        "type": "file",
        "file": {"filename": file_name(part) or _default_name(part), "file_data": _url(source)},
    }


def responses_part(part: ContentPart) -> dict[str, Any]:
    """One AG-UI part as a Responses API input content part."""
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if not isinstance(part, MediaPart):
        raise UnmappablePartError(f"a part of type {_kind(part)!r} has no place upstream")
    source = part.source
    if isinstance(part, VideoPart):
        raise UnmappablePartError(
            f"{describe(part)} cannot go to the Responses API, which takes no video: use "
            "--upstream-api chat with a server that takes video_url (vLLM)"
        )
    if isinstance(part, AudioPart):
        if not isinstance(source, DataSource):
            raise UnmappablePartError(
                f"{describe(part)} given by {_by(source)} cannot go to the Responses API, whose "
                "input_audio takes the bytes inline: send them as data (base64)"
            )
        return {"type": "input_audio", "input_audio": _audio(source)}
    if isinstance(part, ImagePart):
        if isinstance(source, FileSource):
            return {"type": "input_image", "file_id": source.value}
        return {"type": "input_image", "image_url": _url(source)}
    if isinstance(source, FileSource):
        return {"type": "input_file", "file_id": source.value}
    if isinstance(source, UrlSource):
        return {"type": "input_file", "file_url": source.value}
    if is_text(part):
        return {"type": "input_text", "text": document_text(part)}
    name = file_name(part) or _default_name(part)
    return {"type": "input_file", "filename": name, "file_data": _url(source)}


def file_name(part: ContentPart) -> str | None:
    """The part's file name, from ``metadata.filename``."""
    metadata = getattr(part, "metadata", None)
    name = metadata.get("filename") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else None


def mime_type(part: MediaPart) -> str:
    """What the part's bytes are, as far as anyone said: its source's MIME type (without
    parameters, lower case), else what its file name says, else ``""``."""
    declared = (part.source.mime_type or "").split(";", 1)[0].strip().lower()
    if declared and declared != "application/octet-stream":
        return declared
    name = file_name(part)
    guessed = _GUESS.guess_type(name, strict=False)[0] if name else None
    return guessed or declared


def is_text(part: DocumentPart) -> bool:
    """Whether a document is text a model reads as it is (``text/*``, JSON, CSV, YAML, …)."""
    mime = mime_type(part)
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return True
    name = (file_name(part) or "").lower()
    return not mime and name.endswith(_TEXT_SUFFIXES)


def document_text(part: DocumentPart, text: str | None = None) -> str:
    """A text document as the model reads it: its text (``text``, else its bytes read as
    UTF-8) inside a ``<document>`` element that names it."""
    if text is None:
        if not isinstance(part.source, DataSource):
            raise UnmappablePartError(f"{describe(part)} is not inline: its text is not here")
        text = utf8_text(part, decode_base64(part.source.value, describe(part)))
    attributes = ""
    name = file_name(part)
    if name:
        attributes += f' name="{html.escape(name)}"'
    mime = mime_type(part)
    if mime:
        attributes += f' type="{html.escape(mime)}"'
    end = "" if text.endswith("\n") else "\n"  # a file's own last line break is kept, once
    return f"<document{attributes}>\n{text}{end}</document>"


def utf8_text(part: DocumentPart, data: bytes) -> str:
    """A text document's bytes as text (``UnmappablePartError`` when they are not UTF-8)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnmappablePartError(
            f"{describe(part)}: its bytes are not UTF-8 text (byte {exc.start}); send the "
            "text as UTF-8"
        ) from None


def decode_base64(value: str, what: str) -> bytes:
    """``value``'s bytes, read as strict base64 (RFC 4648: no line breaks, padding only at the
    end) ``BASE64_SLICE`` characters at a time; ``UnmappablePartError`` naming ``what``."""
    return b"".join(_base64_slices(value, what))


def check_base64(value: str, what: str) -> None:
    """``decode_base64`` without keeping the bytes: whether ``value`` is base64 at all."""
    for _ in _base64_slices(value, what):
        pass


def _base64_slices(value: str, what: str) -> Iterator[bytes]:
    for start in range(0, len(value), BASE64_SLICE):
        piece = value[start : start + BASE64_SLICE]
        try:
            yield binascii.a2b_base64(piece, strict_mode=True)
        except (binascii.Error, ValueError) as exc:  # ValueError: a character past ASCII
            raise UnmappablePartError(
                f"{what}: its data is not base64 ({exc}, in characters {start} to "
                f"{start + len(piece)})"
            ) from None


def describe(part: ContentPart) -> str:
    """The part as a person knows it: ``a document part (report.pdf, application/pdf)``."""
    kind = _kind(part)
    known = [file_name(part) or ""]
    if isinstance(part, MediaPart):
        known.append(mime_type(part))
    named = ", ".join(filter(None, known))
    article = "an" if kind[:1] in "aeiou" else "a"
    return f"{article} {kind} part" + (f" ({named})" if named else "")


def _url(source: DataSource | UrlSource | FileSource) -> str:
    if isinstance(source, DataSource):
        return f"data:{source.mime_type};base64,{source.value}"
    return source.value


def _audio(source: DataSource) -> dict[str, str]:
    mime = source.mime_type.split(";", 1)[0].strip().lower()
    subtype = mime.partition("/")[2].removeprefix("x-")
    return {"data": source.value, "format": _AUDIO_FORMATS.get(mime, subtype or "wav")}


def _default_name(part: MediaPart) -> str:
    """A file name for a document that came without one (OpenAI asks for one with the bytes)."""
    extension = _GUESS.guess_extension(mime_type(part), strict=False) or ""
    return f"attachment{extension}"


def _by(source: DataSource | UrlSource | FileSource) -> str:
    return "URL" if isinstance(source, UrlSource) else "file id"


def _kind(part: object) -> str:
    return str(getattr(part, "type", type(part).__name__))
