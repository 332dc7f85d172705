"""What the scripted model received beside the text of a user message: images, audio, video and
files, read from the content parts real servers take, and said back (name, type, size).

Chat Completions (OpenAI, OpenRouter, vLLM, llama.cpp): ``image_url``, ``input_audio``, ``file``
(``file_data`` with ``filename``, or ``file_id``), ``video_url`` and vLLM's ``audio_url``. The
Responses API: ``input_image``, ``input_file``, ``input_audio``. A part of another type is
refused as those servers refuse it (``unknown_part``). A text document the bridge sent as text
(``<document name="notes.txt" type="text/plain">…</document>``, README "Attachments") is read
from the text as a model reads it. Pure: sizes come from the length of the base64 text, which is
never decoded, so a big attachment costs nothing to describe.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

#: The content part types of a Chat Completions message the scripted server takes: OpenAI's,
#: and vLLM's ``video_url`` and ``audio_url``.
CHAT_PART_TYPES = ("text", "image_url", "input_audio", "file", "video_url", "audio_url", "refusal")
#: The content part types of a Responses API message.
RESPONSES_PART_TYPES = (
    "input_text",
    "input_image",
    "input_file",
    "input_audio",
    "output_text",
    "refusal",
)
#: Where in a data URL the comma may be: a header longer than this is not one.
_HEADER_LIMIT = 256
#: ``input_audio.format`` → MIME type (OpenAI: wav, mp3; others name theirs as written).
_AUDIO_TYPES = {"mp3": "audio/mpeg", "wav": "audio/wav"}
#: What an echoed name or URL may hold: one line, tag-free (see ``script._clean``), this long.
_NAME_LIMIT = 80
_LINE_BREAKS = re.compile(r"\s+")
#: A text document as the bridge writes it into a text part (``bridge.serve.run.parts``): its
#: opening tag (at most ``_TAG_LIMIT`` characters), its text, its closing tag.
_OPENING = re.compile(r'<document((?: [a-z]+="[^"]*")*)>\n')
_CLOSING = "</document>"
_TAG_LIMIT = 1024
_ATTRIBUTE = re.compile(r'([a-z]+)="([^"]*)"')
_TEXT_PARTS = ("text", "input_text")


@dataclass(frozen=True)
class Received:
    """One attachment as the model got it."""

    #: "an image", "an audio clip", "a video", "a file": said when it has no name.
    kind: str
    name: str | None = None
    mime: str | None = None
    #: Bytes, when the part carries them (a URL or a file id does not).
    size: int | None = None
    #: Where it is when not inline: "at <url>", "held by the server as <id>".
    where: str | None = None

    def describe(self) -> str:
        """``report.pdf (application/pdf, 120 KB)``, ``an image (image/png, 3 KB)``."""
        details = [d for d in (self.mime, human_size(self.size)) if d]
        shown = self.name or self.kind
        if details:
            shown += f" ({', '.join(details)})"
        return f"{shown} {self.where}" if self.where else shown


def received(content: Any) -> list[Received]:
    """The attachments in one message's ``content`` (a string, or either API's parts), in
    order: the text documents written into its text among them."""
    if isinstance(content, str):
        return documents(content)
    found: list[Received] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in _TEXT_PARTS:
            text = part.get("text")
            found += documents(text) if isinstance(text, str) else []
        elif (item := _read(part)) is not None:
            found.append(item)
    return found


def documents(text: str) -> list[Received]:
    """The text documents written into ``text``, each with its name, type and size."""
    found = []
    for header, _, start, end in _document_spans(text):
        attributes = {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(header)}
        size = len(text[start:end].encode())
        name, mime = _name(attributes.get("name")), attributes.get("type") or None
        found.append(Received("a text document", name, mime, size))
    return found


def without_documents(text: str) -> str:
    """``text`` with its text documents taken out: what the user wrote around them."""
    kept, at = [], 0
    for _, opening, _, end in _document_spans(text):
        kept.append(text[at:opening])
        at = end + len(_CLOSING)
    return " ".join([*kept, text[at:]]) if kept else text


def _document_spans(text: str) -> list[tuple[str, int, int, int]]:
    """Each document's (attributes, where its tag opens, where its text starts and ends): one
    pass, each character looked at a bounded number of times, whatever the text holds."""
    spans: list[tuple[str, int, int, int]] = []
    at = text.find("<document")
    while at >= 0:
        opening = _OPENING.match(text, at, at + _TAG_LIMIT)
        if opening is None:
            at = text.find("<document", at + 1)
            continue
        start = opening.end()
        end = text.find(_CLOSING, start)
        if end < 0:
            break  # no closing tag after here: no more documents
        spans.append((opening.group(1), at, start, end))
        at = text.find("<document", end + len(_CLOSING))
    return spans


def unknown_part(messages: Sequence[Any], types: Sequence[str]) -> tuple[str, str] | None:
    """The first content part whose ``type`` is not one of ``types``, as (where, what) for the
    error a real server answers with (``messages[0].content[1].type``, ``'document'``)."""
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for number, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in types:
                return f"[{index}].content[{number}].type", repr(kind)
    return None


def say_received(items: Sequence[Received]) -> str:
    """``I received a.pdf (application/pdf, 120 KB) and an image (image/png, 3 KB).``"""
    described = [item.describe() for item in items]
    listed = described[0] if len(described) == 1 else ", ".join(described[:-1])
    if len(described) > 1:
        listed += f" and {described[-1]}"
    return f"I received {listed}."


def human_size(size: int | None) -> str | None:
    """Bytes as people read them: ``512 B``, ``3 KB``, ``2.5 MB``."""
    if size is None:
        return None
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _read(part: Mapping[str, Any]) -> Received | None:
    kind = part.get("type")
    if kind in ("image_url", "video_url", "audio_url"):
        holder = part.get(kind)
        url = holder.get("url") if isinstance(holder, Mapping) else holder
        label = {"image_url": "an image", "video_url": "a video", "audio_url": "an audio clip"}
        return _from_url(label[kind], url)
    if kind == "input_audio":
        audio = part.get("input_audio")
        return _audio(audio) if isinstance(audio, Mapping) else None
    if kind == "file":
        file = part.get("file")
        return _file(file) if isinstance(file, Mapping) else None
    if kind == "input_image":
        if isinstance(part.get("file_id"), str):
            return Received("an image", where=_held(part["file_id"]))
        return _from_url("an image", part.get("image_url"))
    if kind == "input_file":
        if isinstance(part.get("file_url"), str):
            found = _from_url("a file", part["file_url"])
            return Received(found.kind, _name(part.get("filename")), where=found.where)
        return _file(part)
    return None


def _from_url(kind: str, url: Any) -> Received:
    if not isinstance(url, str):
        return Received(kind)
    inline = _data_url(url)
    if inline is not None:
        mime, size = inline
        return Received(kind, mime=mime, size=size)
    return Received(kind, where=f"at {_name(url)}")


def _audio(audio: Mapping[str, Any]) -> Received:
    data, form = audio.get("data"), audio.get("format")
    mime = _AUDIO_TYPES.get(form, f"audio/{form}") if isinstance(form, str) and form else None
    size = _base64_size(data) if isinstance(data, str) else None
    return Received("an audio clip", mime=mime, size=size)


def _file(file: Mapping[str, Any]) -> Received:
    """A ``file`` part's ``file`` object, or an ``input_file`` part (the same fields)."""
    name = _name(file.get("filename"))
    if isinstance(file.get("file_id"), str):
        return Received("a file", name, where=_held(file["file_id"]))
    data = file.get("file_data")
    if not isinstance(data, str):
        return Received("a file", name)
    inline = _data_url(data)
    if inline is not None:
        mime, size = inline
        return Received("a file", name, mime, size)
    # Raw base64 (some servers take it without the data: prefix).
    return Received("a file", name, size=_base64_size(data))


def _data_url(url: str) -> tuple[str | None, int] | None:
    """(MIME type, size in bytes) of a ``data:`` URL, or ``None`` when it is not one."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 0, _HEADER_LIMIT)
    if comma < 0:
        return None
    header, data_at = url[5:comma], comma + 1
    mime = header.split(";", 1)[0] or None
    if header.endswith(";base64"):
        return mime, _base64_size(url, data_at)
    return mime, len(unquote(url[data_at:]).encode())


def _base64_size(text: str, start: int = 0) -> int:
    """The bytes that base64 text from ``start`` stands for, without decoding it."""
    length = len(text) - start
    padding = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    return max(0, length * 3 // 4 - padding)


def _held(file_id: str) -> str:
    return f"held by the server as {_name(file_id)}"


def _name(value: Any) -> str | None:
    """A name or URL to echo: one line, at most ``_NAME_LIMIT`` characters."""
    if not isinstance(value, str):
        return None
    # Cut before flattening: a URL may be megabytes long.
    flat = _LINE_BREAKS.sub(" ", value[: _NAME_LIMIT + 1]).strip()
    if not flat:
        return None
    return flat if len(flat) <= _NAME_LIMIT else flat[: _NAME_LIMIT - 1] + "…"
