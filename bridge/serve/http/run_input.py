"""A request body → a ``RunAgentInput``, or a 4xx that names what is wrong.

Nothing a client sends reaches a 5xx: the body is read up to its size limit, and refused before
validation when it nests too deep (a stack-deep ``[[[[…`` would raise ``RecursionError`` in the
parser or the validator), when it holds a number JSON does not have (``NaN``, ``Infinity``:
Python's parser takes them, no upstream does), a string that is not Unicode text (a lone
surrogate such as ``"\\ud800"``, which no encoder can write back out), too many messages or an
id longer than ``MAX_ID_CHARS``.

A big body is parsed, checked and validated in a worker thread, a piece at a time: one call
that holds the GIL holds the event loop too, worker thread or not (pydantic validated 13 MB of
small content parts in one 2.7 s call), so the validator gets the body's lists a slice at a
time (``validate_run_input``) and the event loop its turn between slices.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any, get_args, get_origin

import anyio
from ag_ui.core import Message, RunAgentInput
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request

from bridge.config import BridgeConfig
from bridge.core.errors import InvalidRunInputError
from bridge.serve.http.content_parts import decoded_parts, read_parts

#: The deepest nesting of arrays and objects a body may have. A real RunAgentInput nests about
#: eight deep (a message's content parts, a tool's JSON Schema); state and forwardedProps are the
#: client's own, and 64 leaves them room.
MAX_DEPTH = 64

#: The longest id a body may hold (thread, run, message, tool call, interrupt): a UUID is 36
#: characters, and ids go into every event, log line and span of the run.
MAX_ID_CHARS = 256

#: Bodies larger than this are parsed, checked and validated in a worker thread, off the event
#: loop (as big tool results are: ``bridge.serve.tools.results``).
OFF_LOOP_BYTES = 64 * 1024

#: About how many objects (messages, content parts, tool calls, tools, context entries) the
#: validator is given in one call: a few milliseconds' work, after which the GIL may change hands.
_SLICE = 500


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
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_large
    raw = bytearray()
    async for piece in request.stream():
        raw += piece
        if len(raw) > limit:
            raise too_large
    if len(raw) > OFF_LOOP_BYTES:
        return await anyio.to_thread.run_sync(run_input_of, raw, config)
    return run_input_of(raw, config)


def run_input_of(raw: bytes | bytearray, config: BridgeConfig) -> RunAgentInput:
    """A body's ``RunAgentInput``: parsed and checked (``parse_body``), its messages counted,
    its ids measured, its content parts read as 1.0 parts and its attachments' sizes held to
    their limits before anything is validated (``content_parts.read_parts``), then validated a
    piece at a time (``validate_run_input``), then its attachments decoded
    (``content_parts.decoded_parts``). ``InvalidRunInputError`` for what is wrong, naming it."""
    data = parse_body(raw)
    messages = data.get("messages") if isinstance(data, dict) else None
    if isinstance(messages, list) and len(messages) > config.max_messages:
        raise InvalidRunInputError(
            f"too many messages: {len(messages)} (at most {config.max_messages})",
            status=413,
            code="too_many_messages",
        )
    check_ids(data)
    read_parts(data, config)
    return decoded_parts(validate_run_input(data))


def parse_body(raw: bytes | bytearray) -> Any:
    """The body's JSON, checked for depth, numbers and text (``InvalidRunInputError`` else)."""
    try:
        # A hook per object lets a worker thread's parse give the event loop the GIL between
        # objects: one C call over 13 MB of small objects held it for 140 ms.
        data = json.loads(raw, parse_constant=_NotJson, object_hook=_as_it_is)
    except RecursionError as exc:
        raise _too_deep("body") from exc
    except ValueError as exc:  # UnicodeDecodeError included
        raise InvalidRunInputError(
            f"the body is not valid JSON: {exc}", code="invalid_json"
        ) from exc
    _check(data)
    return data


def _as_it_is(value: dict[str, Any]) -> dict[str, Any]:
    return value


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


#: Ids, by where they are in the body: (the key, its snake_case spelling, which pydantic takes
#: too). The body's own, then each message's, each tool call's, each resume entry's.
_RUN_IDS = (("threadId", "thread_id"), ("runId", "run_id"), ("parentRunId", "parent_run_id"))
_MESSAGE_IDS = (("id", "id"), ("toolCallId", "tool_call_id"))
_CALLS = ("toolCalls", "tool_calls")
_RESUME_IDS = (("interruptId", "interrupt_id"),)


def check_ids(data: Any) -> None:
    """``InvalidRunInputError`` (400 ``id_too_long``) for an id over ``MAX_ID_CHARS``, named
    by its place; before validation, so that no model of a 10 MB id is ever made."""
    if not isinstance(data, dict):
        return
    _check_ids(data, _RUN_IDS, ())
    for key, message in _items(data, "messages"):
        _check_ids(message, _MESSAGE_IDS, ("messages", key))
        for name in _CALLS:
            for index, call in _items(message, name):
                _check_ids(call, (("id", "id"),), ("messages", key, name, index))
    for key, entry in _items(data, "resume"):
        _check_ids(entry, _RESUME_IDS, ("resume", key))


def _items(data: dict[str, Any], name: str) -> list[tuple[int, dict[str, Any]]]:
    value = data.get(name)
    if not isinstance(value, list):
        return []
    return [(index, item) for index, item in enumerate(value) if isinstance(item, dict)]


def _check_ids(
    data: dict[str, Any], names: Sequence[tuple[str, str]], path: tuple[str | int, ...]
) -> None:
    for spellings in names:
        for name in dict.fromkeys(spellings):
            value = data.get(name)
            if isinstance(value, str) and len(value) > MAX_ID_CHARS:
                raise InvalidRunInputError(
                    f"{_field((*path, name))}: an id of {len(value)} characters "
                    f"(at most {MAX_ID_CHARS})",
                    code="id_too_long",
                )


def validate_run_input(data: Any) -> RunAgentInput:
    """``RunAgentInput.model_validate(data)``, the same models, a slice at a time: the body
    without its lists, then each list (messages, tools, context, resume) in slices of about
    ``_SLICE`` objects, a message with a long list of its own (content parts, tool calls) alone,
    that list in slices too. ``InvalidRunInputError`` (422) names what is wrong."""
    lists: dict[str, tuple[str, list[Any]]] = {}
    head = data
    if isinstance(data, dict):
        head = dict(data)
        for name in _LISTS:
            key = _key_of(data, RunAgentInput, name)
            if key is not None and isinstance(data[key], list) and data[key]:
                lists[name] = (key, data[key])
                head[key] = []
    try:
        run_input = RunAgentInput.model_validate(head)
    except ValidationError as exc:
        raise _invalid(exc, ()) from exc
    update = {
        name: _validated(_adapter(RunAgentInput, name), items, (key,), messages=name == "messages")
        for name, (key, items) in lists.items()
    }
    return run_input.model_copy(update=update) if update else run_input


#: The lists of a ``RunAgentInput`` validated a slice at a time.
_LISTS = ("messages", "tools", "context", "resume")


def _validated(
    adapter: TypeAdapter[Any], items: list[Any], path: tuple[str | int, ...], *, messages: bool
) -> list[Any]:
    """``items`` validated in slices of about ``_SLICE`` objects; with ``messages``, a message
    whose own lists make it bigger than a slice validated alone (``_big_message``)."""
    out: list[Any] = []
    start, size = 0, 0
    for index, item in enumerate(items):
        weight = 1 + (_inner_length(item) if messages else 0)
        if size + weight > _SLICE and index > start:
            out += _slice(adapter, items, start, index, path)
            start, size = index, 0
        if weight > _SLICE:
            out.append(_big_message(item, (*path, index)))
            start = index + 1
            continue
        size += weight
    return out + _slice(adapter, items, start, len(items), path)


def _slice(
    adapter: TypeAdapter[Any], items: list[Any], start: int, end: int, path: tuple[str | int, ...]
) -> list[Any]:
    if start == end:
        return []
    try:
        validated: list[Any] = adapter.validate_python(items[start:end])
    except ValidationError as exc:
        raise _invalid(exc, path, start) from exc
    return validated


def _inner_length(item: Any) -> int:
    if not isinstance(item, dict):
        return 0
    lists = (item.get(key) for key in ("content", *_CALLS))
    return sum(len(value) for value in lists if isinstance(value, list))


def _big_message(item: dict[str, Any], path: tuple[str | int, ...]) -> Message:
    """A message with long lists of its own: validated without them, then each list in slices
    with its field's own type."""
    role = item.get("role")
    kind, names = _SLICED.get(role, (BaseModel, ())) if isinstance(role, str) else (BaseModel, ())
    lists = {}
    emptied = dict(item)
    for name in names:
        key = _key_of(item, kind, name)
        if key is not None and isinstance(item[key], list):
            lists[name] = (key, item[key])
            emptied[key] = []
    try:
        message: Message = _adapter(RunAgentInput, "messages").validate_python([emptied])[0]
    except ValidationError as exc:
        raise _invalid(exc, path[:-1], int(path[-1])) from exc
    update = {
        name: _validated(
            _adapter(type(message), name), items, (*path, message.role, key), messages=False
        )
        for name, (key, items) in lists.items()
    }
    return message.model_copy(update=update)


def _key_of(data: dict[str, Any], model: type[BaseModel], name: str) -> str | None:
    """The key ``data`` gives field ``name`` of ``model`` under: its alias (camelCase) or its
    name, which pydantic takes too."""
    alias = model.model_fields[name].alias or name
    return alias if alias in data else name if name in data else None


def _list_type(model: type[BaseModel], name: str) -> Any:
    """The list type of field ``name``, out of the ``Optional`` or the ``str | list`` it may
    be; ``None`` if it is no list."""
    annotation = model.model_fields[name].annotation
    return next((a for a in (annotation, *get_args(annotation)) if get_origin(a) is list), None)


#: Each kind of message, by its role, and its fields that may be a long list (content parts,
#: tool calls).
_SLICED: dict[str, tuple[type[BaseModel], tuple[str, ...]]] = {
    get_args(kind.model_fields["role"].annotation)[0]: (
        kind,
        tuple(
            name
            for name in ("content", "tool_calls")
            if name in kind.model_fields and _list_type(kind, name) is not None
        ),
    )
    for kind in get_args(get_args(Message)[0])
}


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    """A validator of a slice of list field ``name`` of ``model``."""
    return TypeAdapter(_list_type(model, name))


def _invalid(
    exc: ValidationError, path: tuple[str | int, ...], offset: int = 0
) -> InvalidRunInputError:
    """pydantic's errors of a slice, placed in the body: ``path``, and the slice's first index."""

    def place(loc: tuple[str | int, ...]) -> str:
        if path and loc and isinstance(loc[0], int):
            loc = (loc[0] + offset, *loc[1:])
        return ".".join(str(part) for part in (*path, *loc)) or "body"

    problems = "; ".join(f"{place(error['loc'])}: {error['msg']}" for error in exc.errors()[:5])
    return InvalidRunInputError(f"not a valid RunAgentInput: {problems}", status=422)
