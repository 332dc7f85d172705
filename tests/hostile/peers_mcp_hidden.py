"""An MCP server (stdio) whose tools' UIs say who may call them; each call of a tool appends its
name to the file named by the first argument, so the test sees what ran.

- ``panel``: a UI tool for the model (visibility not said);
- ``hidden``: ``_meta.ui.visibility: []``: for neither the model nor its widget;
- ``model_only``: ``visibility: ["model"]``: not the widget's;
- ``app_only``: ``visibility: ["app"]``: the widget's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.apps import Apps
from mcp.server.mcpserver import MCPServer

RAN = Path(sys.argv[1])
URI = "ui://panel/app.html"
apps = Apps()


def _ran(name: str) -> str:
    with RAN.open("a") as file:
        file.write(name + "\n")
    return f"{name} ran"


@apps.tool(resource_uri=URI, description="Show the panel")
def panel() -> str:
    return _ran("panel")


@apps.tool(resource_uri=URI, visibility=[], description="For nobody")
def hidden() -> str:
    return _ran("hidden")


@apps.tool(resource_uri=URI, visibility=["model"], description="The model's")
def model_only() -> str:
    return _ran("model_only")


@apps.tool(resource_uri=URI, visibility=["app"], description="The widget's")
def app_only() -> str:
    return _ran("app_only")


apps.add_html_resource(URI, "<!doctype html><title>panel</title>")
server = MCPServer("hidden", log_level="WARNING", extensions=[apps])

if __name__ == "__main__":
    server.run()
