"""Python functions as server tools (README "Server-side tools"): ``python_tool`` describes one
to the model from its type hints and docstring (through pydantic) and runs it, a sync one on a
thread; ``requires_approval`` marks one whose calls wait for a person, ``asks_user`` one that
asks the person a question first and runs with the answer (``tools.asking``)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, TypeVar, get_type_hints

import pydantic
import pydantic_core

from bridge.serve.tools.asking import Asking, Question, QuestionError, checked_schema
from bridge.serve.tools.server_tools import TOOL_NAME, ServerTool, ToolError

#: Threads for sync tools used outside an app (an app has its own, ``--tool-threads``): hung
#: tools must not take the event loop's default executor, which asyncio also resolves host
#: names with (the upstream's among them).
_SHARED_THREADS: ThreadPoolExecutor | None = None

#: The attribute ``requires_approval`` sets on a function.
_APPROVAL_MARK = "__agui_requires_approval__"

_F = TypeVar("_F", bound=Callable[..., Any])


def requires_approval(function: _F) -> _F:
    """Mark a Python tool as one that waits for a person's approval before each call runs
    (``@requires_approval`` over the function given to ``create_app(tools=[...])``)."""
    setattr(function, _APPROVAL_MARK, True)
    return function


#: The attribute ``asks_user`` sets on a function: its question and the answer's schema.
_ASKING_MARK = "__agui_asks_user__"
#: The parameter an asking tool gets the answer in (kept out of the model's schema).
ANSWER = "answer"


def asks_user(
    question: str | Callable[..., str], schema: dict[str, Any] | None = None
) -> Callable[[_F], _F]:
    """Mark a Python tool as one that asks the person before each call runs: the run ends
    with an ``input_required`` interrupt asking ``question`` (a string, or a function of the
    call's arguments that makes one), and the call runs once answered, with the answer, held
    to ``schema`` (a JSON Schema; none: a line of text), as its ``answer`` parameter. The
    model does not see ``answer``; it calls the tool with its other parameters."""
    checked = checked_schema(schema) if schema is not None else None

    def mark(function: _F) -> _F:
        if ANSWER not in inspect.signature(function).parameters:
            raise ValueError(f"tool {function.__name__}: @asks_user needs an 'answer' parameter")
        setattr(function, _ASKING_MARK, (question, checked))
        return function

    return mark


def python_tool(
    function: Callable[..., Any],
    *,
    threads: Executor | None = None,
    approve: bool | None = None,
) -> ServerTool:
    """A Python function (sync or async) as a server tool: its name, its docstring's first
    paragraph as the description, its parameters' type hints and defaults (and their
    ``Args:`` lines) as the JSON schema. The return value goes to the model as ``result_text``
    writes it. ``threads``: where a sync function runs (an app's pool of ``tool_threads``;
    by default a small pool of this module's). ``approve``: each call waits for a person
    (by default, whether the function is marked with ``requires_approval``)."""
    if approve is None:
        approve = bool(getattr(function, _APPROVAL_MARK, False))
    name = function.__name__
    if not TOOL_NAME.match(name):
        raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
    summary, documented = _docstring(inspect.getdoc(function) or "")
    hints = get_type_hints(function, include_extras=True)  # Annotated[int, Field(ge=1)]
    fields: dict[str, Any] = {}
    asking = getattr(function, _ASKING_MARK, None)
    for parameter in inspect.signature(function).parameters.values():
        if asking is not None and parameter.name == ANSWER:
            continue  # the person's, not the model's
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ValueError(f"tool {name}: *args and **kwargs cannot be described to a model")
        default = ... if parameter.default is parameter.empty else parameter.default
        info = pydantic.Field(default, description=documented.get(parameter.name))
        fields[parameter.name] = (hints.get(parameter.name, Any), info)
    model = pydantic.create_model(f"{name}_arguments", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    is_async = inspect.iscoroutinefunction(function)

    def validated(arguments: str) -> dict[str, Any]:
        try:
            values = model.model_validate_json(arguments or "{}")
        except pydantic.ValidationError as exc:
            raise ToolError(f"invalid arguments: {_problems(exc)}") from exc
        return {key: getattr(values, key) for key in fields}

    async def invoke(arguments: str) -> str:
        return await called(validated(arguments))

    async def called(kwargs: dict[str, Any]) -> str:
        if is_async:
            result = await function(**kwargs)
        else:
            # A thread: a slow sync tool must not stop the other runs. A call still queued for
            # a thread when its run ends is dropped; a running one cannot be cancelled: one
            # that outlives its timeout finishes unobserved.
            call = functools.partial(function, **kwargs)
            pool = threads or _shared_threads()
            result = await asyncio.get_running_loop().run_in_executor(pool, call)
        return result_text(result)

    ask = None
    if asking is not None:
        text, answer_schema = asking

        def question(arguments: str) -> Question:
            try:
                kwargs = validated(arguments)
            except ToolError as exc:
                raise QuestionError(str(exc)) from exc
            message = text(**kwargs) if callable(text) else text
            return Question(message, answer_schema or {"type": "string"})

        async def answered(arguments: str, answer: Any) -> str:
            return await called({**validated(arguments), ANSWER: answer})

        ask = Asking(question, answered)
    return ServerTool(name, summary, schema, invoke, approve=approve, ask=ask)


def _shared_threads() -> ThreadPoolExecutor:
    global _SHARED_THREADS
    if _SHARED_THREADS is None:
        _SHARED_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="server-tool")
    return _SHARED_THREADS


def result_text(value: Any) -> str:
    """A Python tool's return value as the text the model reads: a string as it is, and so is
    what pydantic writes as one (a date, a UUID, a string enum); anything else (a model, a dict,
    a list, a number, ``None``) as JSON text. A string sent JSON-encoded would show in quotes in
    the client, and come back decoded by some clients, no longer the bytes the model read."""
    plain = pydantic_core.to_jsonable_python(value, fallback=str)
    return plain if isinstance(plain, str) else pydantic_core.to_json(plain).decode()


def _docstring(text: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and the parameter lines of a Google-style ``Args:`` section."""
    summary = " ".join(text.split("\n\n", 1)[0].split())
    documented: dict[str, str] = {}
    section = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?)+)", text, re.M)
    if section:
        current = None
        for line in section.group(1).splitlines():
            match = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
            if match:
                current = match.group(1)
                documented[current] = match.group(2).strip()
            elif current and line.strip():
                documented[current] += " " + line.strip()
    return summary, documented


def _problems(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
        for error in exc.errors()[:5]
    )
