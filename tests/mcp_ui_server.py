"""An MCP server with MCP Apps tools, for the bridge's tests (stdio, or ``--http --port N``):

- ``board``: a UI tool (``ui://board/app.html``) for the model; its text says whether the client
  announced the Apps extension;
- ``bump``: a tool the widget may call (``visibility: ["app"]``), not offered to the model;
- ``plain``: a tool without UI; a resource that is not ``ui://`` (``notes://secret``).
"""

from __future__ import annotations

import argparse

from mcp.server.apps import Apps, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer

apps = Apps()
COUNT = {"value": 0}
HTML = "<!doctype html><title>board</title><p id=n>0</p>"


@apps.tool(resource_uri="ui://board/app.html", description="Show the board")
def board(ctx: Context, title: str = "Board") -> str:
    mode = "with apps" if client_supports_apps(ctx) else "text only"
    return f"{title}: {COUNT['value']} ({mode})"


@apps.tool(resource_uri="ui://board/app.html", visibility=["app"], description="Add one")
def bump() -> str:
    COUNT["value"] += 1
    return str(COUNT["value"])


apps.add_html_resource("ui://board/app.html", HTML, prefers_border=True)
server = MCPServer("ui", log_level="WARNING", extensions=[apps])


@server.tool()
def plain() -> str:
    """A tool without a UI."""
    return "plain"


@server.resource("notes://secret")
def secret() -> str:
    return "not for widgets"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run()


if __name__ == "__main__":
    main()
