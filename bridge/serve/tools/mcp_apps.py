"""MCP Apps (README "Generative UI (MCP Apps)"): tools of our MCP servers that bring a UI.

Such a tool declares ``_meta.ui.resourceUri`` (older servers: ``_meta["ui/resourceUri"]``), a
``ui://`` HTML resource the frontend shows in a sandboxed iframe. Two things happen:

- **After the tool runs** (a model's call, run like any server tool): an ``ACTIVITY_SNAPSHOT``
  of type ``mcp-apps`` follows its ``TOOL_CALL_RESULT``, with the whole MCP result, the
  resource's URI, the server's id (its ``--mcp`` name) and hash, and the call's arguments, as
  ``@ag-ui/mcp-apps-middleware`` sends it and CopilotKit's ``MCPAppsActivityRenderer`` reads it.
- **The widget's requests** come back as runs whose ``forwardedProps.__proxiedMCPRequest``
  names the server and one of four methods (``resources/read``, ``tools/call``,
  ``notifications/message``, ``ping``): read here (``proxied_request``), answered by the HTTP
  face (``bridge.serve.http.widgets``) without the model, by ``RUN_STARTED`` then
  ``RUN_FINISHED`` whose ``result`` is the MCP result, or an error the widget can tell
  (``{error, isError: true, content: [text]}``).

A widget may read only ``ui://`` resources and call only tools its server lists and lets the app
call (``_meta.ui.visibility`` not said, or naming ``"app"``); a tool under ``--approve`` (by the
name it is or would be offered under, whether or not the model is offered it) only when its
visibility names ``"app"`` (the server's author says the app calls it; a click in the widget is
then the person's approval).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

logger = logging.getLogger("agui_bridge")

#: The extension our MCP client announces, and the resource type it accepts.
EXTENSION_ID = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
ACTIVITY_TYPE = "mcp-apps"
#: The methods a widget's proxied request may use.
METHODS = frozenset({"resources/read", "tools/call", "notifications/message", "ping"})


@dataclass(frozen=True)
class UiTool:
    """What a tool's ``_meta`` says of its UI."""

    resource_uri: str
    visibility: tuple[str, ...] | None  # None: not said (the spec's default: model and app)

    @property
    def for_model(self) -> bool:
        return self.visibility is None or "model" in self.visibility

    @property
    def for_app(self) -> bool:
        """Whether the server's author lets the widget call it (not said: the spec's default
        lets it; ``[]`` or ``["model"]`` does not)."""
        return self.visibility is None or "app" in self.visibility

    @property
    def said_for_app(self) -> bool:
        """Whether the server's author says the widget calls it (``"app"`` listed): then a
        click in the widget is a person's approval of the call."""
        return self.visibility is not None and "app" in self.visibility


def ui_of(meta: Any) -> UiTool | None:
    """A listed tool's UI, from its ``_meta``, or ``None``."""
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    uri = ui.get("resourceUri") if isinstance(ui, Mapping) else None
    if not isinstance(uri, str):
        uri = meta.get("ui/resourceUri")
    if not isinstance(uri, str) or not uri:
        return None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    said = (
        tuple(v for v in visibility if isinstance(v, str)) if isinstance(visibility, list) else None
    )
    return UiTool(uri, said)


def server_hash(name: str, shown_target: str) -> str:
    """A server's stable hash: the same on every replica with the same ``--mcp`` flag (made
    from what logs may show of it, so no credential is in it, even hashed)."""
    return hashlib.sha256(f"{name}\n{shown_target}".encode()).hexdigest()[:32]


def activity_content(
    result: dict[str, Any], ui: UiTool, server: str, hash_: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """The ``mcp-apps`` activity's content, in the shape the renderer's schema checks."""
    return {
        "result": result,
        "resourceUri": ui.resource_uri,
        "serverHash": hash_,
        "serverId": server,
        "toolInput": arguments,
    }


class ProxyRefused(Exception):
    """A proxied request that is not answered (a method, server, tool or resource not allowed);
    the message says which, for the widget."""


def error_result(message: str) -> dict[str, Any]:
    """A refusal or failure as the widget reads it: ``error``, and a tool result's shape."""
    return {"error": message, "isError": True, "content": [{"type": "text", "text": message}]}


@dataclass(frozen=True)
class ProxiedRequest:
    server_hash: str
    server_id: str
    method: str
    params: dict[str, Any]


def proxied_request(value: Any) -> ProxiedRequest:
    """``forwardedProps.__proxiedMCPRequest`` read; ``ProxyRefused`` if it is not one."""
    if not isinstance(value, Mapping):
        raise ProxyRefused("__proxiedMCPRequest must be an object")
    method = value.get("method")
    if not isinstance(method, str) or method not in METHODS:
        allowed = ", ".join(sorted(METHODS))
        raise ProxyRefused(f"MCP method not allowed for a widget: {method!r} (allowed: {allowed})")
    params = value.get("params")
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ProxyRefused("__proxiedMCPRequest.params must be an object")
    server_hash = value.get("serverHash")
    server_id = value.get("serverId")
    return ProxiedRequest(
        server_hash if isinstance(server_hash, str) else "",
        server_id if isinstance(server_id, str) else "",
        method,
        dict(params),
    )
