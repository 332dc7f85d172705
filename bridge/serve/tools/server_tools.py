"""Server tools: functions the bridge runs itself, beside the tools the frontend runs.

A ``ServerTool`` is a name, a description, a JSON schema and ``invoke(arguments) -> text``.
Python callables become one in ``python_tools``, MCP servers' tools in ``mcp_tools``.
``ServerTools`` holds them by name and runs a turn's calls: in parallel (at most
``max_parallel`` of a run at once), each with a timeout, each answered with a
``TOOL_CALL_RESULT`` the model can read (a failure too: never a traceback or a secret), made
ready as ``results`` says: redacted once, a big one off the event loop. A result with more than
text (an MCP tool's image) is content parts for a client that takes them (AG-UI 1.0), its text
for one that does not.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import logging
import re
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from ag_ui.core import BaseEvent, ContentPart, Tool, ToolCall, ToolCallResultEvent

from bridge.core.emitter import IdFactory, random_id
from bridge.serve.observe.facts import ToolOutcome
from bridge.serve.observe.observation import RunObservation
from bridge.serve.redact import Redactor
from bridge.serve.tools.approvals import needs_approval
from bridge.serve.tools.results import BIG_RESULT, ServerToolResult, parts_size

if TYPE_CHECKING:
    from bridge.serve.tools.asking import Asking, Question

logger = logging.getLogger("agui_bridge")

#: OpenAI's rule for function names.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolError(Exception):
    """A failure whose message is for the model (bad arguments, a server that is gone)."""


@dataclass(frozen=True)
class ToolOutput:
    """A tool's answer that brings more than its text: events sent after its result (an MCP
    App's ``mcp-apps`` activity); the result as content parts (an MCP tool's image), which a
    client that takes parts gets instead of ``text``."""

    text: str
    after: tuple[BaseEvent, ...] = ()
    parts: tuple[ContentPart, ...] = ()


@dataclass(frozen=True)
class ServerTool:
    """One tool the bridge runs: ``invoke`` takes the call's JSON arguments as the model wrote
    them and returns the text the model reads (or a ``ToolOutput``); it raises ``ToolError``
    for a readable failure. ``approve``: a call waits for a person's approval (as if
    ``--approve`` named the tool). ``ask``: a call asks the person a question and runs with
    the answer (``tools.asking``), never without one."""

    name: str
    description: str
    parameters: dict[str, Any]
    invoke: Callable[[str], Awaitable[str | ToolOutput]]
    approve: bool = False
    ask: Asking | None = None

    def definition(self) -> Tool:
        """The tool as it is offered to the model, beside the frontend's."""
        return Tool(name=self.name, description=self.description, parameters=self.parameters)


def load_jsonschema() -> None:
    """Import ``jsonschema`` (questions' schemas and answers, a person's edit of a call) as the
    server tools come, at the app's start, not in the event loop at a run's first question or
    edit: with its format checkers (the ``state`` extra) its import takes about a second. A
    bridge with no server tools never imports it. (Tools that come once the loop runs, an MCP
    server's, have it imported in a worker thread first: ``Bridge.start``.)"""
    importlib.import_module("jsonschema")


class ServerTools:
    """The server tools of one app, by name; names are checked for collisions as they come."""

    def __init__(
        self,
        tools: Iterable[ServerTool] = (),
        *,
        timeout: float = 30.0,
        max_parallel: int = 16,
        redactor: Redactor | None = None,
        new_id: IdFactory = random_id,
        approve: Iterable[str] = (),
    ) -> None:
        self.timeout = timeout
        self.max_parallel = max_parallel
        #: Patterns of the tools whose calls wait for a person (``BridgeConfig.approve``).
        self.approve = tuple(approve)
        self._tools: dict[str, ServerTool] = {}
        self._redactor = redactor if redactor is not None else Redactor(())
        self._new_id = new_id
        self.add(tools)

    def add(self, tools: Iterable[ServerTool]) -> None:
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two server tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        if self._tools:
            load_jsonschema()

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __bool__(self) -> bool:
        return bool(self._tools)

    def definitions(self) -> list[Tool]:
        return [tool.definition() for tool in self._tools.values()]

    def waits(self, name: str) -> bool:
        """Whether a call to this tool waits for a person: their approval, or their answer
        to its question (not a tool of ours: never: the frontend's tools are the frontend's
        business)."""
        tool = self._tools.get(name)
        if tool is None:
            return False
        return tool.approve or tool.ask is not None or needs_approval(name, self.approve)

    def asks(self, name: str) -> bool:
        """Whether a call to this tool asks the person a question (``tools.asking``)."""
        tool = self._tools.get(name)
        return tool is not None and tool.ask is not None

    def question(self, call: ToolCall) -> Question:
        """The question a call of an asking tool makes; ``QuestionError`` when it makes none."""
        ask = self._tools[call.function.name].ask
        assert ask is not None
        return ask.question(call.function.arguments)

    def gated(self, name: str) -> bool:
        """Whether a server tool, by the name it is or would be offered under, waits for a
        person: ``waits``, or ``--approve`` names it though it is not offered (an MCP tool its
        server keeps for its widget)."""
        return self.waits(name) or needs_approval(name, self.approve)

    @property
    def any_waits(self) -> bool:
        return any(self.waits(name) for name in self._tools)

    @property
    def any_approvals(self) -> bool:
        """Whether a call of some tool waits for a person's approval (not for an answer)."""
        return any(self.waits(name) and not self.asks(name) for name in self._tools)

    @property
    def any_asks(self) -> bool:
        return any(self.asks(name) for name in self._tools)

    def invalid_arguments(self, name: str, arguments: str) -> str | None:
        """What is wrong with ``arguments`` for this tool by its JSON schema (a person's
        edit of a call), or ``None``. Python tools check their own arguments again (pydantic,
        constraints and all); the schema is checked here (``jsonschema``, loaded with the
        tools: ``load_jsonschema``)."""
        try:
            value = json_arguments(arguments)
        except ToolError as exc:
            return str(exc)
        import jsonschema

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

    async def answer(
        self, call_id: str, content: str, parts: Sequence[ContentPart] = ()
    ) -> ToolCallResultEvent:
        """A call's result: ``content``, its text, or ``parts`` when given; made ready (a big
        one in a worker thread). A call that did not run (a person declined it, an invalid
        edit) is answered so too."""
        event = ServerToolResult(
            message_id=self._new_id("msg"), tool_call_id=call_id, role="tool", content=""
        )
        redact = self._redactor.redact
        if parts:
            if parts_size(parts) < BIG_RESULT:
                return event.ready_parts(parts, self._redactor)
            return await anyio.to_thread.run_sync(event.ready_parts, parts, self._redactor)
        if len(content) < BIG_RESULT:
            return event.ready(content, redact)
        return await anyio.to_thread.run_sync(event.ready, content, redact)

    async def run(
        self,
        calls: Sequence[ToolCall],
        observe: RunObservation | None = None,
        *,
        parts: bool = True,
        answers: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[ToolCallResultEvent, None]:
        """Run the calls in parallel, at most ``max_parallel`` at once (the others wait their
        turn, in order); yield each one's result as it comes, and results that came together
        in the calls' order (``update_state``'s calls end in the order their patches applied,
        and their deltas must reach the client in that order). Leaving early (the client went
        away) cancels the calls still running, and the waiting ones never start. ``observe``:
        the run's telemetry, told of each call; ``parts``: the client takes results as content
        parts (AG-UI 1.0; a 0.0.x client holds a result as text only); ``answers``: the
        person's answers to the calls that asked, by call id (those run with theirs)."""
        waiting = iter(calls)
        answered = answers or {}
        tasks: set[asyncio.Task[ToolCallResultEvent]] = set()
        order: dict[asyncio.Task[ToolCallResultEvent], int] = {}
        try:
            tasks.update(self._start(waiting, self.max_parallel, observe, parts, order, answered))
            while tasks:
                done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                tasks.update(self._start(waiting, len(done), observe, parts, order, answered))
                for task in sorted(done, key=order.__getitem__):
                    yield task.result()
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)

    def _start(
        self,
        waiting: Iterator[ToolCall],
        count: int,
        observe: RunObservation | None,
        parts: bool,
        order: dict[asyncio.Task[ToolCallResultEvent], int],
        answers: Mapping[str, Any],
    ) -> Iterator[asyncio.Task[ToolCallResultEvent]]:
        """Start the next ``count`` calls, each task numbered in ``order`` as it is made."""
        for _, call in zip(range(count), waiting, strict=False):
            task = asyncio.create_task(self._result(call, observe, parts, answers))
            order[task] = len(order)
            yield task

    async def _result(
        self,
        call: ToolCall,
        observe: RunObservation | None,
        parts: bool,
        answers: Mapping[str, Any],
    ) -> ToolCallResultEvent:
        name = call.function.name
        tool = self._tools[name]
        watch = observe.tool(call) if observe is not None else None
        outcome: ToolOutcome = "error"
        after: tuple[BaseEvent, ...] = ()
        content_parts: tuple[ContentPart, ...] = ()
        try:
            async with asyncio.timeout(self.timeout):
                output: str | ToolOutput
                if tool.ask is not None and call.id in answers:
                    output = await tool.ask.answered(call.function.arguments, answers[call.id])
                else:
                    output = await tool.invoke(call.function.arguments)
            content, outcome = output if isinstance(output, str) else output.text, "ok"
            if isinstance(output, ToolOutput):
                after = output.after
                content_parts = output.parts if parts else ()
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
        result = await self.answer(call.id, content, content_parts)
        if after and isinstance(result, ServerToolResult):
            result.after = after
        return result


def json_arguments(arguments: str) -> dict[str, Any]:
    """A call's arguments as a JSON object (an empty string is no arguments)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError as exc:
        raise ToolError(f"the arguments are not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ToolError("the arguments must be a JSON object")
    return value
