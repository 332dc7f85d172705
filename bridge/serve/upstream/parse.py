"""The JSON an upstream sends, parsed so that no answer can exhaust recursion.

orjson reads it first (fast, and it refuses nesting deeper than 1024 levels); what orjson
refuses but JSON allows (integers past 64 bits, NaN, lone surrogates such as ``"\\ud800"``,
bytes that are not UTF-8) json reads, from the text as httpx would decode it, and lone
surrogates are replaced. json recurses once per level of nesting, and so does the replacement
over what it made: a body of 100,000 nested arrays (200 KB) raised ``RecursionError``, which no
caller expected. Here it is the ``ValueError`` any other bad JSON raises.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from bridge.core.encode import without_lone_surrogates


def parse_json(data: bytes) -> Any:
    """``data``'s JSON value; raises ``ValueError`` when it is none, or nested too deep."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse_refused(data)


def parse_refused(data: bytes) -> Any:
    """What orjson refused, read by json (see the module docstring); raises ``ValueError``."""
    try:
        return without_lone_surrogates(json.loads(data.decode("utf-8", "replace")))
    except RecursionError:
        raise ValueError("the JSON is nested too deep to read") from None
