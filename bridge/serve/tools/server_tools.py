"""Server tools: functions the bridge runs itself, beside the tools the frontend runs.

A ``ServerTool`` is a name, a description, a JSON schema and ``invoke(arguments) -> text``.
Python callables become one with ``python_tool`` (the schema comes from the type hints and the
docstring, through pydantic); MCP servers' tools with ``bridge.serve.tools.mcp_tools``.
``ServerTools`` holds them by name and runs a turn's calls: in parallel (at most
``max_parallel`` of a run at once), each with a timeout, each answered with a
``TOOL_CALL_RESULT`` the model can read (a failure too: never a traceback or a secret). A
result is redacted once, here; a big one is made ready off the event loop
(``ServerToolResult``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import itertools
import json
import logging
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, TypeVar, get_type_hints

import anyio.to_thread
import pydantic
import pydantic_core
from ag_ui.core import BaseEvent, Tool, ToolCall, ToolCallResultEvent

from bridge.core.emitter import IdFactory, random_id
from bridge.core.encode import encode_event
from bridge.serve.observe.facts import ToolOutcome
from bridge.serve.observe.observation import RunObservation
from bridge.serve.redact import MIN_PIECE
from bridge.serve.run.history import tool_result_text
from bridge.serve.tools.approvals import needs_approval
from bridge.serve.upstream.sse import without_lone_surrogates

logger = logging.getLogger("agui_bridge")

#: Threads for sync tools used outside an app (an app has its own, ``--tool-threads``): hung
#: tools must not take the event loop's default executor, which asyncio also resolves host
#: names with (the upstream's among them).
_SHARED_THREADS: ThreadPoolExecutor | None = None

#: A result longer than this is made ready in a worker thread, a slice at a time: one C-speed
#: pass over a 10 MB text (a scan for secrets, a JSON encoding) holds the GIL, and with it every
#: stream of the process, for 20-50 ms; between slices the event loop gets its turn.
BIG_RESULT = 64 * 1024
_SLICE = 256 * 1024
#: Around a place where a big text is cut: a secret (or a piece of one) within this distance
#: could span the cut, so the cut moves on.
_NEAR = 2 * MIN_PIECE

#: OpenAI's rule for function names.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolError(Exception):
    """A failure whose message is for the model (bad arguments, a server that is gone)."""


@dataclass(frozen=True)
class ToolOutput:
    """A tool's answer that brings more than its text: events sent after its result (an MCP
    App's ``mcp-apps`` activity)."""

    text: str
    after: tuple[BaseEvent, ...] = ()


@dataclass(frozen=True)
class ServerTool:
    """One tool the bridge runs: ``invoke`` takes the call's JSON arguments as the model wrote
    them and returns the text the model reads (or a ``ToolOutput``); it raises ``ToolError``
    for a readable failure. ``approve``: a call waits for a person's approval (as if
    ``--approve`` named the tool)."""

    name: str
    description: str
    parameters: dict[str, Any]
    invoke: Callable[[str], Awaitable[str | ToolOutput]]
    approve: bool = False

    def definition(self) -> Tool:
        """The tool as it is offered to the model, beside the frontend's."""
        return Tool(name=self.name, description=self.description, parameters=self.parameters)


#: The attribute ``requires_approval`` sets on a function.
_APPROVAL_MARK = "__agui_requires_approval__"

_F = TypeVar("_F", bound=Callable[..., Any])


def requires_approval(function: _F) -> _F:
    """Mark a Python tool as one that waits for a person's approval before each call runs
    (``@requires_approval`` over the function given to ``create_app(tools=[...])``)."""
    setattr(function, _APPROVAL_MARK, True)
    return function


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
    for parameter in inspect.signature(function).parameters.values():
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

    async def invoke(arguments: str) -> str:
        try:
            values = model.model_validate_json(arguments or "{}")
        except pydantic.ValidationError as exc:
            raise ToolError(f"invalid arguments: {_problems(exc)}") from exc
        kwargs = {key: getattr(values, key) for key in fields}
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

    return ServerTool(name, summary, schema, invoke, approve=approve)


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


class ServerTools:
    """The server tools of one app, by name; names are checked for collisions as they come."""

    def __init__(
        self,
        tools: Iterable[ServerTool] = (),
        *,
        timeout: float = 30.0,
        max_parallel: int = 16,
        redact: Callable[[str], str] = str,
        new_id: IdFactory = random_id,
        approve: Iterable[str] = (),
    ) -> None:
        self.timeout = timeout
        self.max_parallel = max_parallel
        #: Patterns of the tools whose calls wait for a person (``BridgeConfig.approve``).
        self.approve = tuple(approve)
        self._tools: dict[str, ServerTool] = {}
        self._redact = redact
        self._new_id = new_id
        self.add(tools)

    def add(self, tools: Iterable[ServerTool]) -> None:
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two server tools are named {tool.name!r}")
            self._tools[tool.name] = tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __bool__(self) -> bool:
        return bool(self._tools)

    def definitions(self) -> list[Tool]:
        return [tool.definition() for tool in self._tools.values()]

    def waits(self, name: str) -> bool:
        """Whether a call to this tool waits for a person's approval (not a tool of ours:
        never: the frontend's tools are the frontend's business)."""
        tool = self._tools.get(name)
        return tool is not None and (tool.approve or needs_approval(name, self.approve))

    @property
    def any_waits(self) -> bool:
        return any(self.waits(name) for name in self._tools)

    def invalid_arguments(self, name: str, arguments: str) -> str | None:
        """What is wrong with ``arguments`` for this tool by its JSON schema (a person's
        edit of a call), or ``None``. Python tools check their own arguments again (pydantic,
        constraints and all); the schema is checked here when ``jsonschema`` is installed
        (it comes with the MCP SDK, the other kind of tool)."""
        try:
            value = json_arguments(arguments)
        except ToolError as exc:
            return str(exc)
        try:
            jsonschema = importlib.import_module("jsonschema")
        except ImportError:
            return None
        schema = self._tools[name].parameters
        try:
            # The first few: an edit may hold a million wrong items.
            errors = list(
                itertools.islice(jsonschema.Draft202012Validator(schema).iter_errors(value), 5)
            )
        except Exception:  # a schema the validator cannot read: the tool checks for itself
            logger.warning("the schema of %s cannot check an edit", name, exc_info=True)
            return None
        if not errors:
            return None
        return "; ".join(
            f"{'.'.join(map(str, error.absolute_path)) or 'arguments'}: {error.message[:200]}"
            for error in errors
        )

    async def answer(self, call_id: str, content: str) -> ToolCallResultEvent:
        """A result for a call that did not run (a person declined it, an invalid edit):
        made ready as a tool's own result is."""
        event = ServerToolResult(
            message_id=self._new_id("msg"), tool_call_id=call_id, role="tool", content=""
        )
        if len(content) < BIG_RESULT:
            return event.ready(content, self._redact)
        return await anyio.to_thread.run_sync(event.ready, content, self._redact)

    async def run(
        self, calls: Sequence[ToolCall], observe: RunObservation | None = None
    ) -> AsyncGenerator[ToolCallResultEvent, None]:
        """Run the calls in parallel, at most ``max_parallel`` at once (the others wait their
        turn, in order); yield each one's result as it comes. Leaving early (the client went
        away) cancels the calls still running, and the waiting ones never start. ``observe``:
        the run's telemetry, told of each call."""
        waiting = iter(calls)
        tasks: set[asyncio.Task[ToolCallResultEvent]] = set()
        try:
            tasks.update(self._start(waiting, self.max_parallel, observe))
            while tasks:
                done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                tasks.update(self._start(waiting, len(done), observe))
                for task in done:
                    yield task.result()
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)

    def _start(
        self, waiting: Iterator[ToolCall], count: int, observe: RunObservation | None
    ) -> Iterator[asyncio.Task[ToolCallResultEvent]]:
        for _, call in zip(range(count), waiting, strict=False):
            yield asyncio.create_task(self._result(call, observe))

    async def _result(self, call: ToolCall, observe: RunObservation | None) -> ToolCallResultEvent:
        name = call.function.name
        watch = observe.tool(call) if observe is not None else None
        outcome: ToolOutcome = "error"
        after: tuple[BaseEvent, ...] = ()
        try:
            async with asyncio.timeout(self.timeout):
                output = await self._tools[name].invoke(call.function.arguments)
            content, outcome = output if isinstance(output, str) else output.text, "ok"
            if isinstance(output, ToolOutput):
                after = output.after
        except TimeoutError:
            content = f"Error: the tool {name} did not answer within {self.timeout:g} s."
            outcome = "timeout"
        except ToolError as exc:
            content = f"Error: {name}: {exc}"
        except Exception as exc:  # the tool's own failure: the model reads it, the log has more
            logger.warning("server tool %s failed", name, exc_info=True)
            content = f"Error: {name} failed: {type(exc).__name__}: {exc}"
        except asyncio.CancelledError:  # the run ended first (its client went away)
            if watch is not None:
                watch.end("cancelled", "")
            raise
        if watch is not None:
            watch.end(outcome, content)
        result = await self.answer(call.id, content)
        if after and isinstance(result, ServerToolResult):
            result.after = after
        return result


def with_after(result: ToolCallResultEvent) -> list[BaseEvent]:
    """A tool's result and the events that follow it (``ToolOutput.after``)."""
    after = result.after if isinstance(result, ServerToolResult) else ()
    return [result, *after]


class ServerToolResult(ToolCallResultEvent):
    """A server tool's ``TOOL_CALL_RESULT``, made ready where it is made (``ready``): its content
    as the model reads it, redacted once, and its SSE frame (``frame``), which the frame
    boundary sends as it is (``bridge.serve.http.frames``) instead of scanning and encoding a big
    text again on the event loop."""

    _frame: str = pydantic.PrivateAttr(default="")
    #: Events sent right after this result (``ToolOutput.after``).
    _after: tuple[BaseEvent, ...] = pydantic.PrivateAttr(default=())

    @property
    def after(self) -> tuple[BaseEvent, ...]:
        return self._after

    @after.setter
    def after(self, events: tuple[BaseEvent, ...]) -> None:
        self._after = events

    @property
    def frame(self) -> str:
        """The event's frame, as ``encode_event`` writes it."""
        return self._frame or encode_event(self)

    def ready(self, text: str, redact: Callable[[str], str]) -> ServerToolResult:
        """This result with ``text`` as its content: as the history builder reads it back (a
        JSON string decoded), redacted here, not only at the frame boundary (the same text goes
        back upstream in this run and, as the client stored it, in the next: both must be the
        same bytes), and encoded. A big text a slice at a time: run it in a worker thread and
        the event loop gets the GIL between slices."""
        # Lone surrogates (a tool's "\ud800", an MCP server's JSON escape of one) cannot be
        # written as UTF-8, to the client or upstream: each becomes U+FFFD, as in a chunk.
        slices = [
            redact(without_lone_surrogates(part))
            for part in _clean_slices(tool_result_text(text), redact)
        ]
        event = self.model_copy(update={"content": "".join(slices)})
        if len(event.content) >= BIG_RESULT:
            # JSON escaping is per character: the slices escaped one by one and joined are the
            # whole text escaped, byte for byte as the encoder writes it (its string escaping
            # is encode_basestring's: bridge.core.encode relies on that for the deltas).
            head, tail = encode_event(self).split('"content":""', 1)
            escaped = [encode_basestring(part)[1:-1] for part in slices]
            event._frame = "".join([head, '"content":"', *escaped, '"', tail])
        return event


def _clean_slices(text: str, redact: Callable[[str], str]) -> Iterator[str]:
    """``text`` in slices of about ``_SLICE`` characters, each cut where no secret is near (so
    none spans it): the slices redacted one by one and joined are the whole text redacted.
    Where secrets run on, the cut waits for their end."""
    start = 0
    while len(text) - start > _SLICE:
        cut = start + _SLICE
        while cut < len(text):
            near = text[cut - _NEAR : cut + _NEAR]
            if redact(near) == near:
                break
            cut += 2 * _NEAR
        yield text[start:cut]
        start = cut
    if start < len(text) or not text:
        yield text[start:]


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


def json_arguments(arguments: str) -> dict[str, Any]:
    """A call's arguments as a JSON object (an empty string is no arguments)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError as exc:
        raise ToolError(f"the arguments are not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ToolError("the arguments must be a JSON object")
    return value
