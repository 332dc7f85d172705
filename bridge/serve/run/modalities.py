"""What the upstream takes of a user's attachments, and what becomes of a part it cannot take:
a policy over AG-UI messages, applied before they are mapped to the upstream's API. Pure, no I/O.

Where the server says what it takes, it is acted on: llama.cpp's ``GET /props`` reports
``modalities`` (``vision``, ``audio``, ``video``: false without an ``--mmproj`` that gives
it), and llama-server reads no file part (a PDF) at all (HTTP 400 "unsupported
content[].type"). A server that says nothing (no ``/props``, or no ``modalities`` in it) is
assumed to take what it is sent: its own refusal, if any, is the run's error, in its words
with its HTTP status (``upstream_http_<status>``). Text documents (``text/*``, JSON, CSV,
Markdown…) are never refused here: every model reads them as text.

A part the upstream cannot take either ends the run (``error``: ``UnsupportedPartError``,
naming the part, its file name, type and size, and what would take it) or is replaced by a
short note the model reads (``note``), so the chat goes on. Parts of earlier user messages are
noted whatever the policy: the user was told when they were sent, and a client sends its whole
history every run, so refusing them again would end every later run of the thread (or of
another model's, once the user switched to one that cannot take them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ag_ui.core import (
    ContentPart,
    DataSource,
    DocumentPart,
    Message,
    TextPart,
    UrlSource,
    UserMessage,
)

from bridge.config import BridgeConfig, UnsupportedPartsPolicy
from bridge.core.errors import InvalidRunInputError
from bridge.serve.run.parts import MediaPart, file_name, is_text

MediaKind = Literal["image", "audio", "video", "document"]

#: llama.cpp's ``/props`` ``modalities`` key for each kind (no key for documents: it reads none).
_LLAMA_CPP_MODALITY: dict[MediaKind, str] = {"image": "vision", "audio": "audio", "video": "video"}

#: What would let llama-server take a part of each kind.
_LLAMA_CPP_FIX: dict[MediaKind, str] = {
    "image": "start llama-server with a vision model's --mmproj",
    "audio": "start llama-server with the --mmproj of a model that hears audio",
    "video": "start llama-server with the --mmproj of a model that takes video",
    "document": "send its text instead, or serve a model whose server takes files (OpenAI, "
    "OpenRouter)",
}

_NOUNS: dict[MediaKind, str] = {
    "image": "images",
    "audio": "audio",
    "video": "video",
    "document": "files",
}

#: How a part without a file name is named.
_ARTICLES: dict[MediaKind, str] = {
    "image": "an image",
    "audio": "an audio clip",
    "video": "a video",
    "document": "a document",
}

#: The longest file name or type a note or an error repeats (a client may send any).
_MAX_NAME_CHARS = 80


class UnsupportedPartError(InvalidRunInputError):
    """A user's attachment the upstream says it cannot take (``--unsupported-parts error``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="unsupported_part")


@dataclass(frozen=True)
class UpstreamTakes:
    """The kinds of parts an upstream takes, as its server says (llama.cpp's ``/props``)."""

    kinds: frozenset[MediaKind]

    def why_not(self, kind: MediaKind) -> str:
        """Why a part of ``kind`` cannot go, and what would take it."""
        if kind == "document":
            return f"llama-server reads no files: {_LLAMA_CPP_FIX[kind]}"
        key = _LLAMA_CPP_MODALITY[kind]
        return (
            f"llama-server's /props says it takes no {_NOUNS[kind]} ({key}: false): "
            f"{_LLAMA_CPP_FIX[kind]}"
        )


def upstream_takes(props: Mapping[str, Any] | None) -> UpstreamTakes | None:
    """What the upstream takes by its ``/props`` answer; ``None`` when it does not say (no
    ``/props``, or no ``modalities`` in it): then every part goes as sent."""
    modalities = props.get("modalities") if props is not None else None
    if not isinstance(modalities, Mapping):
        return None
    # Only an explicit false refuses: a key it lacks or a value it cannot mean (not llama.cpp's
    # booleans) leaves the part to the server, whose own refusal then speaks.
    kinds = {kind for kind, key in _LLAMA_CPP_MODALITY.items() if modalities.get(key) is not False}
    return UpstreamTakes(frozenset(kinds))


def takes_in_words(props: Mapping[str, Any] | None) -> tuple[dict[str, bool] | None, str]:
    """What the upstream takes by its ``/props`` answer (``None``: none), by kind (``None``:
    it does not say), and in words (the doctor's ``attachments``)."""
    takes = upstream_takes(props)
    if takes is None:
        why = "no /props" if props is None else "/props says nothing of it"
        return None, f"as sent ({why}): the server's own refusal is the run's error"
    kinds: dict[str, bool] = {kind: kind in takes.kinds for kind in _NOUNS}
    said = ", ".join(
        f"{_NOUNS[kind]}: {'yes' if kinds[kind] else 'no'}" for kind in _LLAMA_CPP_MODALITY
    )
    mmproj = "llama-server was started without --mmproj" if not takes.kinds else "by its --mmproj"
    return kinds, f"{said} — {mmproj}; PDFs and other files: no, llama-server reads none"


class RunAttachments:
    """One run's attachments: until the server was asked (``told``), every part goes as the
    client sent it, so that the request built first checks the whole input, a part no request
    of this API can carry included (an HTTP 4xx before the run begins); then the parts go, or
    not, as the server said and ``policy`` says. ``pending``: the run has attachments and a
    server that may say what it takes (a Chat Completions one: the Responses API has no
    ``/props``), so it must be asked."""

    def __init__(self, messages: Sequence[Message], config: BridgeConfig) -> None:
        self.pending = config.upstream_api == "chat" and any(_media(m) for m in messages)
        self._policy = config.unsupported_parts
        self._told = False
        self._takes: UpstreamTakes | None = None

    def told(self, props: Mapping[str, Any] | None) -> None:
        """The server's ``/props`` (``None``: none) is read."""
        self._told, self._takes = True, upstream_takes(props)

    def admit(self, messages: Sequence[Message]) -> Sequence[Message]:
        """``messages`` as they go upstream (``admitted``)."""
        if not self.pending:
            return messages
        if not self._told:
            return messages
        return admitted(messages, self._takes, self._policy)


def admitted(
    messages: Sequence[Message],
    takes: UpstreamTakes | None,
    policy: UnsupportedPartsPolicy,
) -> Sequence[Message]:
    """``messages`` with every part the upstream cannot take replaced by its note; the same
    sequence when nothing changed. With ``policy="error"``, a part of the last user message it
    cannot take raises ``UnsupportedPartError`` instead."""
    if takes is None:
        return messages
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    out: list[Message] | None = None
    refused: list[MediaPart] = []
    for index, message in enumerate(messages):
        if not _media(message):
            continue
        assert isinstance(message, UserMessage) and not isinstance(message.content, str)
        content: list[ContentPart] = []
        changed = False
        for part in message.content:
            if isinstance(part, TextPart) or _taken(part, takes):
                content.append(part)
                continue
            changed = True
            if policy == "error" and index == last_user:
                refused.append(part)
            else:
                content.append(TextPart(text=note(part)))
        if not changed:
            continue
        if out is None:
            out = list(messages)
        out[index] = message.model_copy(update={"content": content})
    if refused:
        raise UnsupportedPartError(_refusal(refused, takes))
    return messages if out is None else out


def note(part: MediaPart) -> str:
    """What the model reads in place of a part it cannot take."""
    return f"[{', '.join(_described(part))}: this model cannot read it]"


def _media(message: Message) -> bool:
    if not isinstance(message, UserMessage) or isinstance(message.content, str):
        return False
    return any(not isinstance(part, TextPart) for part in message.content)


def _taken(part: MediaPart, takes: UpstreamTakes) -> bool:
    kind: MediaKind = part.type
    # A text document by URL or file id (inline ones were made text when the body was read).
    return kind in takes.kinds or (isinstance(part, DocumentPart) and is_text(part))


def _refusal(refused: Sequence[MediaPart], takes: UpstreamTakes) -> str:
    first = refused[0]
    name, *rest = _described(first)
    named = f"the {first.type} {name}" if _file_name(first) else name
    others = len(refused) - 1
    more = f" and {others} more part{'s' if others > 1 else ''}" if others else ""
    return (
        f"this model cannot take {named} ({', '.join(rest)}){more}: "
        f"{takes.why_not(first.type)}; or serve the bridge with --unsupported-parts note to "
        "send the model a note in its place"
    )


def _described(part: MediaPart) -> list[str]:
    """The part's file name (or its kind), type and size, as far as it tells them."""
    source = part.source
    described = [_file_name(part) or _ARTICLES[part.type]]
    if source.mime_type and _one_line(source.mime_type):
        described.append(_one_line(source.mime_type))
    if isinstance(source, DataSource):
        described.append(_size(source.value))
    elif isinstance(source, UrlSource):
        described.append("by URL")
    else:
        described.append("a file its provider holds")
    return described


def _file_name(part: MediaPart) -> str | None:
    """``metadata.filename``, where CopilotKit and the 0.0.x ``binary`` part's upgrade put it,
    on one short line."""
    return _one_line(file_name(part) or "") or None


def _one_line(text: str) -> str:
    """``text`` on one line, cut short (only its start is read)."""
    text = " ".join("".join(c if c.isprintable() else " " for c in text[:1000]).split())
    return text if len(text) <= _MAX_NAME_CHARS else text[: _MAX_NAME_CHARS - 1] + "…"


def _size(base64: str) -> str:
    """The size of the bytes ``base64`` encodes, read off its length (nothing decoded)."""
    size = len(base64) * 3 // 4 - len(base64[-2:]) + len(base64[-2:].rstrip("="))
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{-(-size // 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"
