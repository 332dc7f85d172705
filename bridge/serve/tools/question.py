"""What a person is asked about a call that waits for approval (README "Approving tools"). Pure.

The interrupt (``interrupt_for``) asks in one line, ``Run send_email({"to": …})?``, with the
arguments as the model wrote them, and its token binds those very bytes (``approvals``): what
is shown is what runs. Two things could still make the line say something else than what runs,
and neither is let through:

- **A key given twice** (``{"to": "alice@…", …, "to": "mallory@…"}``): the line shows the
  first (or, cut, neither), and the parsers the tools use keep the last. Such a call is not
  put to a person at all (``repeated_key``): the model reads why, and calls again.
- **Characters that do not show as themselves** (controls, format characters such as a
  right-to-left override that turns the text around or a zero-width space, spaces other than
  the space): written as JSON escapes (``\\u202e``), which stand for the same character in
  the arguments' JSON.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime
from typing import Any

from ag_ui.core import Interrupt, ToolCall

from bridge.serve.tools.approvals import iso_utc

#: How much of the arguments the interrupt's message shows.
MESSAGE_ARGUMENT_CHARS = 200

#: The answer a tool-call interrupt expects in ``resume[].payload``: the AG-UI docs' approve-
#: with-edits pattern (``editedArgs`` replaces the arguments whole), as pydantic-ai sends it.
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object"},
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}

#: JSON's whitespace (any other space is a character of a string, shown escaped).
_WHITESPACE = re.compile(r"[ \t\r\n]+")


def interrupt_for(call: ToolCall, token: str, expires_at: datetime) -> Interrupt:
    """The interrupt for a call that waits for a person: ``reason`` ``tool_call`` (the spec's
    value for an approval bound to a call), its ``toolCallId``, a one-line question, the
    answer's schema and ``expiresAt`` (the expiry the token holds)."""
    return Interrupt(
        id=token,
        reason="tool_call",
        message=f"Run {call.function.name}({_shown_arguments(call.function.arguments)})?",
        tool_call_id=call.id,
        response_schema=copy.deepcopy(RESPONSE_SCHEMA),  # one each: a caller may edit its own
        expires_at=iso_utc(expires_at),
    )


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return value


def repeated_key(arguments: str) -> str | None:
    """A key that an object of these JSON arguments holds twice, at any depth (spelled alike
    or not: ``"to"`` and ``"t\\u006f"`` are one key), or ``None``; ``None`` too for arguments
    that are no JSON, which the tool refuses whoever approves them. Linear in the arguments:
    the caller runs it off the event loop for big ones."""
    try:
        json.loads(arguments, object_pairs_hook=_object)
    except _RepeatedKey as repeated:
        return repeated.key
    except (ValueError, RecursionError):
        return None
    return None


def _shown_arguments(arguments: str) -> str:
    """The arguments in one line for the question: whitespace runs as one space, cut (with an
    ellipsis) past ``MESSAGE_ARGUMENT_CHARS`` characters, those that do not show as
    themselves written as JSON escapes."""
    # A prefix first: the arguments may be megabytes, the question shows a line of them.
    head = arguments[: MESSAGE_ARGUMENT_CHARS * 8]
    shown = _WHITESPACE.sub(" ", head).strip()
    if len(shown) > MESSAGE_ARGUMENT_CHARS or len(head) < len(arguments):
        shown = shown[: MESSAGE_ARGUMENT_CHARS - 1].rstrip() + "…"
    if not shown.isprintable():  # escaped after the cut, which then never halves an escape
        shown = "".join(c if c.isprintable() else _escaped(c) for c in shown)
    return shown


def _escaped(character: str) -> str:
    """A character as JSON writes it escaped (a pair of ``\\u`` escapes past the BMP)."""
    data = character.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{data[i] << 8 | data[i + 1]:04x}" for i in range(0, len(data), 2))
