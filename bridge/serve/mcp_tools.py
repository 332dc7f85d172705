"""MCP servers' tools as server tools, through the official ``mcp`` SDK (the ``mcp`` extra).

Each configured server gets one connection, owned by a task of its own for the app's life (the
SDK's transports must be entered and left in one task): stdio for a command, streamable HTTP for
a URL. Its tools are listed once at start and offered as ``NAME__tool``. A server that cannot be
reached at start is reported once in the log and offers nothing; one that dies later answers
each call with an error the model can read. Either way the bridge keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bridge.serve.tools import TOOL_NAME, ServerTool, ToolError, json_arguments

if TYPE_CHECKING:
    from mcp import Client

logger = logging.getLogger("agui_bridge")

#: Between a server's name and its tool's in the name offered to the model.
SEPARATOR = "__"


class McpServer:
    """One MCP server: ``start()`` connects and lists its tools, ``aclose()`` lets it go."""

    def __init__(self, name: str, target: str, *, timeout: float) -> None:
        self.name = name
        self.target = target
        self._timeout = timeout
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._listed: list[Any] = []
        self.failure: str | None = None

    async def start(self, connect_timeout: float) -> list[ServerTool]:
        """Connect and list the tools (``[]``, logged once, when the server cannot be used)."""
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), connect_timeout)
        except TimeoutError:
            self.failure = f"no answer within {connect_timeout:g} s"
        if self._client is None:
            logger.error(
                "MCP server %s (%s) is not available: %s", self.name, self.target, self.failure
            )
            await self.aclose()
            return []
        return [self._tool(listed) for listed in self._listed]

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 5)

    async def _own(self) -> None:
        """The task that owns the connection, from connecting to letting go."""
        from mcp import Client

        try:
            async with Client(_server(self.target)) as client:
                self._listed = list((await client.list_tools()).tools)
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # reported: at start by start(), later by each call
            self.failure = _describe(exc)
            if self._client is not None:
                logger.error("MCP server %s stopped: %s", self.name, self.failure)
        finally:
            self._client = None
            self._ready.set()

    def _tool(self, listed: Any) -> ServerTool:
        name = f"{self.name}{SEPARATOR}{listed.name}"
        if not TOOL_NAME.match(name):
            raise ValueError(f"MCP server {self.name}: tool name {name!r} is not usable")
        remote = listed.name

        async def invoke(arguments: str) -> str:
            client = self._client
            if client is None:
                raise ToolError(f"the MCP server {self.name} is not available ({self.failure})")
            try:
                result = await client.call_tool(
                    remote, json_arguments(arguments), read_timeout_seconds=self._timeout
                )
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(f"the MCP server {self.name} failed: {_describe(exc)}") from exc
            text = _result_text(result)
            if result.is_error:
                raise ToolError(text)
            return text

        schema = dict(listed.input_schema)
        schema.pop("title", None)
        return ServerTool(name, listed.description or "", schema, invoke)


async def start_mcp_servers(
    servers: Mapping[str, str], *, call_timeout: float, connect_timeout: float
) -> tuple[list[McpServer], list[ServerTool]]:
    """Connect to every configured server at once; their tools, as ``NAME__tool``."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(
            "MCP servers are configured but the mcp SDK is not installed: "
            "pip install 'agui-bridge[mcp]'"
        ) from exc
    connections = [
        McpServer(name, target, timeout=call_timeout) for name, target in servers.items()
    ]
    listed = await asyncio.gather(*(c.start(connect_timeout) for c in connections))
    return connections, [tool for tools in listed for tool in tools]


def _server(target: str) -> Any:
    """A URL for streamable HTTP; else a command line, run with stdio."""
    from mcp import StdioServerParameters

    if target.startswith(("http://", "https://")):
        return target
    command, *args = shlex.split(target)
    if command in ("python", "python3"):
        command = sys.executable  # the bridge's own environment, where the SDK is
    return StdioServerParameters(command=command, args=args)


def _result_text(result: Any) -> str:
    """What the model reads: the text blocks; other blocks (images, resources) as JSON."""
    texts = []
    for block in result.content:
        if getattr(block, "type", None) == "text":
            texts.append(block.text)
        else:
            texts.append(json.dumps(block.model_dump(mode="json", exclude_none=True)))
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(texts)


def _describe(exc: BaseException) -> str:
    """One line for an error, leaves of an exception group included."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
