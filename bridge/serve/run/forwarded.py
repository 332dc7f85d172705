"""What a client may set through ``forwardedProps`` (README "What a client may set"): the
allow-listed request parameters (``FORWARDED_PARAMS``) and ``model``, read under their
camelCase and alias names too, each value checked against what its parameter takes before
anything goes upstream. Pure, no I/O.

A wrong value is refused (400 ``invalid_input`` naming the field as sent and what it takes),
not sent on: the upstream would refuse the run or, worse, answer it with a setting nobody
asked for (llama.cpp reads a ``temperature`` of ``"hot"`` as its default). ``null`` leaves a
parameter unset, as the OpenAI API reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ag_ui.core import RunAgentInput

from bridge.core.errors import InvalidRunInputError

Check = Callable[[Any], bool]


def _number(low: float | None = None, high: float | None = None, *, above: bool = False) -> Check:
    """A JSON number (``true`` is no number, though Python's bool is an int) in a range:
    ``low`` to ``high``, both included; with ``above``, strictly above ``low``."""

    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if low is not None and (value <= low if above else value < low):
            return False
        return high is None or value <= high

    return check


def _integer(low: int, high: int | None = None, *, also: int | None = None) -> Check:
    """A JSON integer (not ``true``, not ``5.0``) from ``low`` to ``high``, or ``also``."""

    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        return value == also or (value >= low and (high is None or value <= high))

    return check


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _stop(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    )


def _tool_choice(value: Any) -> bool:
    if isinstance(value, str):
        return value in ("none", "auto", "required")
    function = value.get("function") if isinstance(value, dict) else None
    return (
        isinstance(function, dict)
        and value.get("type") == "function"
        and _text(function.get("name"))
    )


#: Each parameter a client may set, how its value is checked, and what it takes, in words.
#: Ranges are the widest an OpenAI-compatible server takes (llama.cpp reads -1 tokens as no
#: limit and a ``top_k`` of 0 or less as none; vLLM a ``top_k`` of -1).
PARAMETERS: Mapping[str, tuple[Check, str]] = {
    "temperature": (_number(0), "a number, 0 or more"),
    "top_p": (_number(0, 1), "a number from 0 to 1"),
    "top_k": (_integer(-1), "an integer, -1 or more"),
    "min_p": (_number(0, 1), "a number from 0 to 1"),
    "max_tokens": (_integer(1, also=-1), "an integer, 1 or more (or -1: no limit)"),
    "max_completion_tokens": (_integer(1, also=-1), "an integer, 1 or more (or -1: no limit)"),
    "presence_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "repetition_penalty": (_number(0, above=True), "a number above 0"),
    "reasoning_effort": (_text, "a string such as low, medium or high"),
    "seed": (_integer(-(2**63), 2**64 - 1), "a 64-bit integer"),
    "stop": (_stop, "a string or a list of strings"),
    "n_predict": (_integer(-2), "an integer, -2 or more"),
    "parallel_tool_calls": (_boolean, "true or false"),
    "tool_choice": (
        _tool_choice,
        '"none", "auto", "required" or {"type": "function", "function": {"name": …}}',
    ),
}

#: Request parameters a client may set through ``forwardedProps`` (``model`` is checked apart,
#: against the configured models). Everything else a client sends there is ignored.
FORWARDED_PARAMS = frozenset(PARAMETERS)

#: Names a client may use for a parameter besides its own: assistant-ui's AG-UI runtime sends its
#: model config and call settings (``modelName``, ``maxTokens``, ``topP``, ``stopSequences``).
_ALIASES = {"model_name": "model", "stop_sequences": "stop"}

_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def forwarded_params(run_input: RunAgentInput) -> dict[str, Any]:
    """The parameters ``forwardedProps`` sets, by their own names (``maxTokens`` →
    ``max_tokens``, ``modelName`` → ``model``; a name sent as it is wins), each value checked;
    only the allow-listed ones and ``model``, none set to ``null``. ``InvalidRunInputError``
    names a wrong value as the client sent it."""
    props = run_input.forwarded_props
    if not isinstance(props, dict):
        return {}
    sent: dict[str, str] = {}
    for key in props:
        if not isinstance(key, str):
            continue
        snake = _CAMEL_HUMP.sub(r"_\1", key).lower()
        name = _ALIASES.get(snake, snake)
        if name == key or name not in props:
            sent.setdefault(name, key)
    read: dict[str, Any] = {}
    for name, key in sent.items():
        value = props[key]
        if value is None or (name != "model" and name not in PARAMETERS):
            continue
        if name in PARAMETERS:
            check, takes = PARAMETERS[name]
            if not check(value):
                raise InvalidRunInputError(f"forwardedProps.{key}: {_shown(value)} is not {takes}")
        read[name] = value
    return read


def _shown(value: Any) -> str:
    """A wrong value as an error message shows it: short, whatever its size."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40] + "…")
    return "an object" if isinstance(value, dict) else "an array"
