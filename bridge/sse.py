"""SSE events from an OpenAI-compatible server → chunks for the translator.

The SSE framing itself is httpx-sse's job; this only reads the ``data`` of each event.
"""

from __future__ import annotations

import json
from typing import Any

from httpx_sse import ServerSentEvent

from bridge.errors import UpstreamProtocolError
from bridge.translate import DONE


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
    if event.event == "error" and "error" not in chunk:
        chunk = {"error": chunk}  # `event: error` frames (some proxies) carry the error bare
    return chunk
