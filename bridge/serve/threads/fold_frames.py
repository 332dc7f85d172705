"""SSE frames as the thread fold reads them (``ThreadFold.apply_frames``): each frame's event
parsed by orjson (its depth limit), a frame that is not JSON counted as skipped, a frame
without data left out; and the deltas in a row for one message or call applied as one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import orjson

#: The events that add a ``delta`` to what one of their fields names. Deltas in a row for one
#: thing are applied as one: the same result, as each would find what the first found
#: (applying one changes neither what is open nor what is held), so each is applied or
#: skipped as the first is.
_DELTAS = {
    "TEXT_MESSAGE_CONTENT": "messageId",
    "REASONING_MESSAGE_CONTENT": "messageId",
    "TOOL_CALL_ARGS": "toolCallId",
}
_NOT_JSON = object()


class Fold(Protocol):
    skipped: int

    def apply(self, event: dict[str, Any]) -> None: ...


def apply_frames(fold: Fold, frames: Iterable[str]) -> None:
    """Apply the frames' events to ``fold`` in order; deltas in a row (nothing but ``type``,
    the id and ``delta``) for one message or call as one."""
    first: dict[str, Any] | None = None  # the first of the deltas in a row
    deltas: list[str] = []
    for frame in frames:
        event = _event(frame)
        if event is None:
            continue
        if event is _NOT_JSON:
            fold.skipped += 1
            continue
        if type(event) is dict and len(event) == 3:
            kind, delta = event.get("type"), event.get("delta")
            field = _DELTAS.get(kind) if type(kind) is str else None
            if field is not None and type(delta) is str and type(event.get(field)) is str:
                if first is not None and first["type"] == kind and first[field] == event[field]:
                    deltas.append(delta)
                    continue
                _apply_joined(fold, first, deltas)
                first, deltas = event, [delta]
                continue
        _apply_joined(fold, first, deltas)
        first = None
        fold.apply(event)
    _apply_joined(fold, first, deltas)


def _apply_joined(fold: Fold, first: dict[str, Any] | None, deltas: list[str]) -> None:
    if first is None:
        return
    skipped = fold.skipped
    fold.apply(first if len(deltas) == 1 else {**first, "delta": "".join(deltas)})
    if fold.skipped > skipped:
        fold.skipped += len(deltas) - 1  # each was, as the first was


def _event(frame: str) -> Any:
    """The frame's event (its JSON); ``None`` for a frame without data, ``_NOT_JSON``."""
    if frame.startswith("data: ") and frame.endswith("\n\n") and "\n" not in frame[6:-2]:
        data = frame[6:-2]
    else:
        lines = [line for line in frame.split("\n") if line.startswith("data:")]
        if not lines:
            return None
        # SSE: the one space after the colon is not data; data lines join with LF.
        data = "\n".join(line[6:] if line[5:6] == " " else line[5:] for line in lines)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return _NOT_JSON
