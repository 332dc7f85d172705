"""The built-in ``ask_user`` server tool (``--ask-user``; README "Asking the user"): the model
asks the person a question, optionally with a JSON Schema for the answer, and the answer is the
call's result (``tools.asking``)."""

from __future__ import annotations

from typing import Any

import orjson

from bridge.serve.tools.asking import Asking, ask_user_question
from bridge.serve.tools.server_tools import ServerTool

#: The tool's name.
ASK_USER = "ask_user"

_DESCRIPTION = (
    "Ask the user a question and wait for the answer: for a choice, a date or a detail that is "
    "missing. The answer is this call's result."
)
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "What to ask the user, in one line."},
        "schema": {
            "type": "object",
            "description": "Optional: a JSON Schema the answer must fit (a form is made from "
            "it: an object with properties, an enum to choose from, a date as "
            '{"type": "string", "format": "date"}). Without one the answer is text.',
        },
    },
    "required": ["question"],
}


async def _answered(arguments: str, answer: Any) -> str:
    # Text as it is, anything else as JSON (as a Python tool's value is written).
    return answer if isinstance(answer, str) else orjson.dumps(answer).decode()


async def _unanswered(arguments: str) -> str:
    raise AssertionError("ask_user runs only with an answer")  # the loop never runs it without


def ask_user_tool() -> ServerTool:
    """The tool: its call ends the run with a question; the answer is its result."""
    asking = Asking(ask_user_question, _answered)
    return ServerTool(ASK_USER, _DESCRIPTION, dict(_PARAMETERS), _unanswered, ask=asking)
