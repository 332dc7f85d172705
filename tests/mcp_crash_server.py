"""An MCP server (the SDK's own) that dies when asked to: for the bridge's fault tests."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashy", log_level="WARNING")


@server.tool()
def get_time() -> str:
    """The time, while the server lives."""
    return "noon"


@server.tool()
def crash() -> str:
    """Ends the server's process at once."""
    os._exit(1)


if __name__ == "__main__":
    server.run()
