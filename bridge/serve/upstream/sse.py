"""SSE events from an OpenAI-compatible server → chunks for the translator.

The SSE framing itself is httpx-sse's job; this only reads the ``data`` of each event.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from httpx_sse import ServerSentEvent

from bridge.core.encode import without_lone_surrogates
from bridge.core.errors import UpstreamProtocolError
from bridge.core.translate import DONE


def chunk_from_sse(
    event: ServerSentEvent, *, wrap_error_events: bool = True
) -> dict[str, Any] | str | None:
    """The chunk an SSE event carries: a JSON object, ``DONE``, or ``None`` for an empty event.

    ``wrap_error_events``: an ``event: error`` frame of a Chat Completions stream (some proxies
    send one) carries its error bare; it becomes a ``{"error": …}`` chunk. The Responses API's
    ``event: error`` frames are typed events of their own (``{"type": "error", …}``): pass
    ``False`` for them."""
    data = event.data
    if not data.strip():
        return None
    if data.strip() == DONE:
        return DONE
    lone_surrogates = "\\ud" in data or "\\uD" in data
    try:
        # orjson: about 2.5 times json's speed on a chunk (benchmarks/translate.py). It refuses
        # what json takes (lone surrogates, NaN, integers past 64 bits): json reads those.
        chunk = json.loads(data) if lone_surrogates else orjson.loads(data)
    except orjson.JSONDecodeError:
        chunk = _json(data)
    except ValueError as exc:
        raise _not_json(data) from exc
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError("the upstream sent a chunk that is not a JSON object")
    if lone_surrogates:
        chunk = dict(without_lone_surrogates(chunk))
    if wrap_error_events and event.event == "error" and "error" not in chunk:
        chunk = {"error": chunk}  # `event: error` frames (some proxies) carry the error bare
    return chunk


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise _not_json(data) from exc


def _not_json(data: str) -> UpstreamProtocolError:
    return UpstreamProtocolError(f"the upstream sent a chunk that is not JSON: {data[:80]!r}")
