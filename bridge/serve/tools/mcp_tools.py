"""MCP servers' tools as server tools, through the official ``mcp`` SDK (the ``mcp`` extra).

Each configured server gets one connection, owned by a task of its own for the app's life (the
SDK's transports must be entered and left in one task): stdio for a command, streamable HTTP for
a URL. Its tools are listed once at start and offered as ``NAME__tool``. A server that cannot be
reached at start stops the start (``McpStartError``), unless it is optional: then it is reported
once in the log and offers nothing. One that dies later answers each call with an error the
model can read, and the bridge keeps serving. A stdio server's stderr goes to our log, a line at
a time, as ``[mcp NAME] …`` (redacted with every record); logs show a server's URL or command
line without credentials (``shown_target``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
import threading
from collections.abc import Collection, Mapping
from typing import IO, TYPE_CHECKING, Any, TextIO

import anyio.to_thread
from ag_ui.core import ActivitySnapshotEvent

from bridge.core.emitter import random_id
from bridge.serve.redact import redact_new_loggers, shown_target
from bridge.serve.tools.mcp_apps import (
    ACTIVITY_TYPE,
    APP_MIME_TYPE,
    EXTENSION_ID,
    ProxiedRequest,
    ProxyRefused,
    UiTool,
    activity_content,
    server_hash,
    ui_of,
)
from bridge.serve.tools.mcp_content import result_parts, result_text
from bridge.serve.tools.results import BIG_RESULT, parts_size
from bridge.serve.tools.server_tools import (
    TOOL_NAME,
    ServerTool,
    ToolError,
    ToolOutput,
    json_arguments,
)

if TYPE_CHECKING:
    from mcp import Client

logger = logging.getLogger("agui_bridge")

#: Between a server's name and its tool's in the name offered to the model.
SEPARATOR = "__"
#: The longest line of a server's stderr logged as one record; a longer one goes in pieces.
_LOG_LINE = 4096


class McpStartError(RuntimeError):
    """A configured MCP server that is not optional could not be reached at start: the bridge
    does not start without it. The message is one line naming each such server and why."""


class McpServer:
    """One MCP server: ``start()`` connects and lists its tools, ``aclose()`` lets it go."""

    def __init__(self, name: str, target: str, *, timeout: float) -> None:
        self.name = name
        self.target = target
        #: The target as logs and errors show it: no credentials.
        self.shown = shown_target(target)
        self._timeout = timeout
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._listed: list[Any] = []
        self.failure: str | None = None
        #: Its id for MCP Apps' widgets (``serverHash``): the same on every replica.
        self.hash = server_hash(name, self.shown)
        #: Its tools by their own names, and the UI of those that have one.
        self.tool_names: frozenset[str] = frozenset()
        self.ui_tools: dict[str, UiTool] = {}

    @property
    def available(self) -> bool:
        """Connected: its tools can be called (false once it failed or stopped)."""
        return self._client is not None

    async def start(self, connect_timeout: float) -> list[ServerTool]:
        """Connect and list the tools (``[]``, with ``failure`` saying why, when the server
        cannot be used)."""
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), connect_timeout)
        except TimeoutError:
            self.failure = f"no answer within {connect_timeout:g} s"
        if self._client is None:
            await self.aclose()
            return []
        self.tool_names = frozenset(listed.name for listed in self._listed)
        for listed in self._listed:
            ui = ui_of(getattr(listed, "meta", None))
            if ui is not None:
                self.ui_tools[listed.name] = ui
        # A tool whose UI is only for its app (visibility ["app"]) is not the model's.
        return [
            self._tool(listed)
            for listed in self._listed
            if listed.name not in self.ui_tools or self.ui_tools[listed.name].for_model
        ]

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 5)

    async def _own(self) -> None:
        """The task that owns the connection, from connecting to letting go."""
        from mcp import Client, StdioServerParameters
        from mcp.client.extension import advertise
        from mcp.client.stdio import stdio_client

        stderr: _ServerLog | None = None
        try:
            server = _server(self.target)
            if isinstance(server, StdioServerParameters):
                stderr = _ServerLog(self.name)
                server = stdio_client(server, errlog=stderr.file)
            # The MCP Apps extension announced: servers then send their tools' UIs.
            apps = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})
            async with Client(server, extensions=[apps]) as client:
                self._listed = list((await client.list_tools()).tools)
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # reported: at start by start(), later by each call
            # An error may quote the URL it failed on (credentials and all).
            self.failure = _describe(exc).replace(self.target, self.shown)
            if self._client is not None:
                logger.error("MCP server %s stopped: %s", self.name, self.failure)
        finally:
            self._client = None
            self._ready.set()
            if stderr is not None:
                stderr.close()

    def _lost(self, failure: str) -> None:
        """The connection is gone for good (the server died): calls now fail at once, /health
        names the server, and the owning task lets the connection go."""
        if self._client is not None:
            logger.error("MCP server %s stopped: %s", self.name, failure)
            self.failure = failure
            self._client = None
            self._stop.set()

    def tool_name(self, remote: str) -> str:
        """The name one of its tools is offered under (``NAME__tool``)."""
        return f"{self.name}{SEPARATOR}{remote}"

    def _tool(self, listed: Any) -> ServerTool:
        name = self.tool_name(listed.name)
        if not TOOL_NAME.match(name):
            raise ValueError(f"MCP server {self.name}: tool name {name!r} is not usable")
        remote = listed.name
        ui = self.ui_tools.get(remote)

        async def invoke(arguments: str) -> str | ToolOutput:
            values = json_arguments(arguments)
            result = await self._call(remote, values)
            parts = result_parts(result)
            if parts_size(parts) < BIG_RESULT:
                text = result_text(result)
            else:  # a big image's JSON is a pass over megabytes: off the event loop
                text = await anyio.to_thread.run_sync(result_text, result)
            if result.is_error:
                raise ToolError(text)
            if ui is None:
                return ToolOutput(text, parts=parts) if parts else text
            dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            content = activity_content(dumped, ui, self.name, self.hash, values)
            activity = ActivitySnapshotEvent(
                message_id=random_id("act"),
                activity_type=ACTIVITY_TYPE,
                content=content,
                replace=True,
            )
            return ToolOutput(text, (activity,), parts)

        schema = dict(listed.input_schema)
        schema.pop("title", None)
        description = listed.description or ""
        if ui is not None:  # as @ag-ui/mcp-apps-middleware offers it
            description = f"{description}\n[UI Resource: {ui.resource_uri}]".lstrip("\n")
        return ServerTool(name, description, schema, invoke)

    async def _call(self, remote: str, arguments: dict[str, Any]) -> Any:
        """Call one of its tools; ``ToolError`` when the server fails or is gone."""
        client = self._client
        if client is None:
            raise ToolError(f"the MCP server {self.name} is not available ({self.failure})")
        try:
            return await client.call_tool(remote, arguments, read_timeout_seconds=self._timeout)
        except Exception as exc:
            if _connection_closed(exc):
                self._lost(_describe(exc))
            raise ToolError(f"the MCP server {self.name} failed: {_describe(exc)}") from exc

    async def proxied(self, request: ProxiedRequest, *, approved: bool) -> dict[str, Any]:
        """A widget's request (``bridge.serve.tools.mcp_apps``), answered by this server: its MCP
        result as JSON. A tool only if its server lets the app call it (``_meta.ui.visibility``
        not said, or naming ``"app"``); ``approved``: ``False`` for a tool under ``--approve``
        (then only one its server names for the app, ``visibility: ["app"]``).
        ``ProxyRefused`` for what a widget may not ask; ``ToolError`` when the server fails."""
        params = request.params
        if request.method == "notifications/message":  # the widget's log line: ours to keep
            logger.info("[mcp-app %s] %s", self.name, str(params.get("data", params))[:_LOG_LINE])
            return {"success": True}
        client = self._client
        if client is None:
            raise ToolError(f"the MCP server {self.name} is not available ({self.failure})")
        if request.method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str) or name not in self.tool_names:
                raise ProxyRefused(f"the MCP server {self.name} has no tool {name!r}")
            ui = self.ui_tools.get(name)
            if ui is not None and not ui.for_app:
                raise ProxyRefused(
                    f'{self.tool_name(name)} is not for the app: its server leaves "app" out '
                    "of its _meta.ui.visibility"
                )
            if not approved and (ui is None or not ui.said_for_app):
                raise ProxyRefused(
                    f"{self.tool_name(name)} waits for approval: a widget may call it "
                    'only if its server marks it for the app (_meta.ui.visibility: ["app"])'
                )
            arguments = params.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise ProxyRefused("tools/call arguments must be an object")
            result: Any = await self._call(name, arguments)
        elif request.method == "ping":  # the widget asks the host: answered while connected
            return {}
        else:  # resources/read
            uri = params.get("uri")
            if not isinstance(uri, str) or not uri.startswith("ui://"):
                raise ProxyRefused(f"a widget may read only ui:// resources, not {uri!r}")
            try:
                result = await client.read_resource(uri)
            except Exception as exc:
                if _connection_closed(exc):
                    self._lost(_describe(exc))
                raise ToolError(f"the MCP server {self.name} failed: {_describe(exc)}") from exc
        return dict(result.model_dump(mode="json", by_alias=True, exclude_none=True))


async def start_mcp_servers(
    servers: Mapping[str, str],
    *,
    call_timeout: float,
    connect_timeout: float,
    optional: Collection[str] = (),
) -> tuple[list[McpServer], list[ServerTool]]:
    """Connect to every configured server at once; their tools, as ``NAME__tool``. A server
    that cannot be reached is logged and offers nothing if it is ``optional``; else
    ``McpStartError`` (after letting the others go)."""
    try:
        import mcp.client.stdio  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(
            "MCP servers are configured but the mcp SDK is not installed: "
            "pip install 'agui-bridge[mcp]'"
        ) from exc
    redact_new_loggers()  # the SDK's loggers exist now (made at import): redact them too
    connections = [
        McpServer(name, target, timeout=call_timeout) for name, target in servers.items()
    ]
    listed = await asyncio.gather(*(c.start(connect_timeout) for c in connections))
    failed = [c for c in connections if not c.available]
    required = [c for c in failed if c.name not in optional]
    if required:
        for connection in connections:
            await connection.aclose()
        raise McpStartError(
            "; ".join(
                f"MCP server {c.name} ({c.shown}) could not start: {c.failure} "
                f"(--mcp-optional {c.name} serves without it)"
                for c in required
            )
        )
    for connection in failed:
        logger.error(
            "MCP server %s (%s) is not available: %s; serving without its tools",
            connection.name,
            connection.shown,
            connection.failure,
        )
    for connection, tools in zip(connections, listed, strict=True):
        if connection.available:
            logger.info(
                "MCP server %s (%s): %d tools", connection.name, connection.shown, len(tools)
            )
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


class _ServerLog:
    """A stdio server's stderr into our log, a line at a time, as ``[mcp NAME] …`` (where the
    log's redaction sees it): ``file`` is the write end of a pipe (the SDK wants a real file
    for the process's stderr), read by a thread of its own until every writer closed it."""

    def __init__(self, name: str) -> None:
        read_end, write_end = os.pipe()
        self.file: TextIO = os.fdopen(write_end, "w")
        reader = threading.Thread(
            target=self._read, args=(os.fdopen(read_end, "rb"), name), daemon=True
        )
        reader.name = f"mcp-stderr:{name}"
        reader.start()

    @staticmethod
    def _read(pipe: IO[bytes], name: str) -> None:
        with pipe:
            while line := pipe.readline(_LOG_LINE):
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    logger.warning("[mcp %s] %s", name, text)

    def close(self) -> None:
        """Our copy of the write end: the reader ends once the server's is closed too."""
        self.file.close()


def _connection_closed(exc: Exception) -> bool:
    """The SDK's word for a session that is over (a stdio server's process ended)."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def _describe(exc: BaseException) -> str:
    """One line for an error, leaves of an exception group included."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
