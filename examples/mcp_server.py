"""A small MCP server (the official ``mcp`` SDK's ``MCPServer``) for the bridge's server tools.

    # stdio: the bridge starts it
    agui-bridge serve ... --mcp clock="python examples/mcp_server.py"
    # streamable HTTP: start it, then point the bridge at it
    python examples/mcp_server.py --http --port 9000
    agui-bridge serve ... --mcp clock=http://127.0.0.1:9000/mcp

Its tools are offered to the model as ``clock__get_time``, ``clock__add`` and so on. The last two
are there for tests: one that fails and one that takes as long as it is told.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("clock", log_level="WARNING")


@server.tool()
def get_time(zone: str = "UTC") -> str:
    """The current time in a time zone.

    Args:
        zone: An IANA time zone name, such as Europe/Paris.
    """
    return datetime.now(ZoneInfo(zone)).strftime(f"%H:%M on %A %d %B %Y ({zone})")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(reason)


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait this many seconds, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run()


if __name__ == "__main__":
    main()
