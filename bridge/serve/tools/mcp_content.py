"""An MCP tool's result (``CallToolResult``) as the model and the client read it, in the two
forms the client lines take (README "Server-side tools"):

- ``result_text``: text, which every client takes (a 0.0.x client's ``TOOL_CALL_RESULT`` is a
  string): the text blocks as the server wrote them, every other block as its JSON;
- ``result_parts``: AG-UI 1.0 content parts, for a result that holds more than text blocks: an
  image or audio clip becomes a part of its kind, an embedded text resource a text part, a blob
  resource the part its MIME type says (an image, audio, video, else a document), with its
  ``uri`` and file name in the part's ``metadata`` (``filename``, where ``@ag-ui/client`` puts
  a legacy ``binary`` part's); a resource link, or a block this SDK does not know, its JSON as
  a text part.

No block's bytes are decoded or copied here: a part's source holds the server's base64 string
itself (made ready, redacted and encoded, by ``bridge.serve.tools.results``, off the event loop
when big).
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from ag_ui.core import (
    AudioPart,
    ContentPart,
    DataSource,
    DocumentPart,
    ImagePart,
    TextPart,
    VideoPart,
)

#: A blob resource whose server names no MIME type: bytes, as HTTP says of an unknown body.
UNKNOWN_MIME_TYPE = "application/octet-stream"


def result_text(result: Any) -> str:
    """What a client that takes text only reads, and its model: the text blocks; other blocks
    (images, resources) as JSON."""
    texts = [
        block.text if getattr(block, "type", None) == "text" else _block_json(block)
        for block in result.content
    ]
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(texts)


def result_parts(result: Any) -> tuple[ContentPart, ...]:
    """The result as content parts; none for a result of text blocks only (its text is the
    result, as before parts)."""
    if all(getattr(block, "type", None) == "text" for block in result.content):
        return ()
    return tuple(_part(block) for block in result.content)


def _part(block: Any) -> ContentPart:
    kind = getattr(block, "type", None)
    if kind == "text":
        return TextPart(text=block.text)
    if kind in ("image", "audio"):  # the block says its kind, whatever its MIME type says
        return _media(block.data, block.mime_type, kind=kind)
    if kind == "resource":
        resource = block.resource
        about: dict[str, str] = {"uri": resource.uri}
        if resource.mime_type:
            about["mimeType"] = resource.mime_type
        if getattr(resource, "text", None) is not None:
            return TextPart(text=resource.text, metadata=about)
        name = PurePosixPath(unquote(urlsplit(resource.uri).path)).name
        if name:
            about["filename"] = name
        return _media(resource.blob, resource.mime_type or UNKNOWN_MIME_TYPE, about)
    return TextPart(text=_block_json(block))  # a resource link: the model reads where it is


def _media(
    data: str, mime_type: str, metadata: dict[str, str] | None = None, *, kind: str = ""
) -> ImagePart | AudioPart | VideoPart | DocumentPart:
    """Inline bytes (base64) as a part of ``kind``, or of the kind their MIME type says: an
    image, audio, video, else a document."""
    source = DataSource(value=data, mime_type=mime_type)
    part = _KINDS.get(kind or mime_type.split("/", 1)[0].lower(), DocumentPart)
    return part(source=source, metadata=metadata)


_MediaPart = type[ImagePart] | type[AudioPart] | type[VideoPart] | type[DocumentPart]
#: The part a MIME type's top-level type makes; a document for any other.
_KINDS: dict[str, _MediaPart] = {"image": ImagePart, "audio": AudioPart, "video": VideoPart}


def _block_json(block: Any) -> str:
    return json.dumps(block.model_dump(mode="json", exclude_none=True))
