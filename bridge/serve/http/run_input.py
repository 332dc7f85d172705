"""A request body → a ``RunAgentInput``, or a 4xx that names what is wrong.

Nothing a client sends reaches a 5xx: the body is read up to its size limit, parsed off the
event loop when it is big, and refused before validation when it nests too deep (a stack-deep
``[[[[…`` would raise ``RecursionError`` in the parser or the validator), when it holds a number
JSON does not have (``NaN``, ``Infinity``: Python's parser takes them, no upstream does) or a
string that is not Unicode text (a lone surrogate such as ``"\\ud800"``, which no encoder can
write back out).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from ag_ui.core import RunAgentInput
from pydantic import ValidationError
from starlette.requests import Request

from bridge.config import BridgeConfig
from bridge.core.errors import InvalidRunInputError

#: The deepest nesting of arrays and objects a body may have. A real RunAgentInput nests about
#: eight deep (a message's content parts, a tool's JSON Schema); state and forwardedProps are the
#: client's own, and 64 leaves them room.
MAX_DEPTH = 64

#: Bodies larger than this are parsed and checked on a worker thread, off the event loop.
_OFF_LOOP_BYTES = 256 * 1024


class _NotJson:
    """What the parser makes of ``NaN``, ``Infinity`` and ``-Infinity``, so the check can say
    where they were."""

    def __init__(self, name: str) -> None:
        self.name = name


async def read_run_input(request: Request, config: BridgeConfig) -> RunAgentInput:
    content_type = request.headers.get("content-type", "")
    if content_type and "json" not in content_type:
        raise InvalidRunInputError(
            f"send the RunAgentInput as application/json, not {content_type!r}",
            status=415,
            code="unsupported_media_type",
        )
    limit = config.max_body_bytes
    too_large = InvalidRunInputError(
        f"the request body is larger than {limit} bytes", status=413, code="body_too_large"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    raw = bytearray()
    async for piece in request.stream():
        raw += piece
        if len(raw) > limit:
            raise too_large
    if len(raw) > _OFF_LOOP_BYTES:
        data = await anyio.to_thread.run_sync(parse_body, bytes(raw))
    else:
        data = parse_body(bytes(raw))
    messages = data.get("messages") if isinstance(data, dict) else None
    if isinstance(messages, list) and len(messages) > config.max_messages:
        raise InvalidRunInputError(
            f"too many messages: {len(messages)} (at most {config.max_messages})",
            status=413,
            code="too_many_messages",
        )
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise InvalidRunInputError(f"not a valid RunAgentInput: {problems}", status=422) from exc


def parse_body(raw: bytes) -> Any:
    """The body's JSON, checked for depth, numbers and text (``InvalidRunInputError`` else)."""
    try:
        data = json.loads(raw, parse_constant=_NotJson)
    except RecursionError as exc:
        raise _too_deep("body") from exc
    except ValueError as exc:  # UnicodeDecodeError included
        raise InvalidRunInputError(
            f"the body is not valid JSON: {exc}", code="invalid_json"
        ) from exc
    _check(data)
    return data


def _check(data: Any) -> None:
    """One pass over the parsed body (an explicit stack: no recursion to exhaust)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, dict | list):
            if len(path) >= MAX_DEPTH:
                raise _too_deep(_field(path))
            if isinstance(value, dict):
                for key, item in value.items():
                    _check_text(key, path)
                    stack.append((item, (*path, key)))
            else:
                stack.extend((item, (*path, index)) for index, item in enumerate(value))
        elif isinstance(value, _NotJson):
            raise InvalidRunInputError(
                f"{_field(path)}: {value.name} is not a JSON number; send a finite number, "
                "null or a string",
                code="invalid_json",
            )


def _check_text(text: str, path: tuple[str | int, ...]) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRunInputError(
            f"{_field(path)}: a lone surrogate ({text[exc.start]!r}) is not Unicode text; "
            "escape characters outside the BMP as a surrogate pair",
            code="invalid_json",
        ) from None


def _field(path: tuple[str | int, ...]) -> str:
    return ".".join(str(part)[:64] for part in path[:12]) or "body"


def _too_deep(where: str) -> InvalidRunInputError:
    return InvalidRunInputError(
        f"{where}: the body nests arrays and objects deeper than {MAX_DEPTH} levels",
        code="too_deep",
    )
