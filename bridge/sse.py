"""SSE events from an OpenAI-compatible server → chunks for the translator.

The SSE framing itself is httpx-sse's job; this only reads the ``data`` of each event.
"""

from __future__ import annotations

import json
import re
from typing import Any

from httpx_sse import ServerSentEvent

from bridge.errors import UpstreamProtocolError
from bridge.translate import DONE

# json.loads joins a valid escaped pair into one code point: any surrogate left is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def chunk_from_sse(event: ServerSentEvent) -> dict[str, Any] | str | None:
    """The chunk an SSE event carries: a JSON object, ``DONE``, or ``None`` for an empty event."""
    data = event.data
    if not data.strip():
        return None
    if data.strip() == DONE:
        return DONE
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise UpstreamProtocolError(
            f"the upstream sent a chunk that is not JSON: {data[:80]!r}"
        ) from exc
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError("the upstream sent a chunk that is not a JSON object")
    if "\\ud" in data or "\\uD" in data:
        chunk = dict(without_lone_surrogates(chunk))
    if event.event == "error" and "error" not in chunk:
        chunk = {"error": chunk}  # `event: error` frames (some proxies) carry the error bare
    return chunk


def without_lone_surrogates(value: Any) -> Any:
    """Replace lone UTF-16 surrogates (JSON ``"\\ud800"`` escapes) with U+FFFD: they cannot be
    written as UTF-8, so one would break the event stream for everything after it."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {key: without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value
