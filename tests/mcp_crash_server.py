"""An MCP server (the SDK's own) that dies when asked to: for the bridge's fault tests.

``--say TEXT`` writes TEXT to its stderr as it starts; ``--junk TEXT`` writes TEXT to its stdout,
where only JSON-RPC belongs, as it starts."""

from __future__ import annotations

import argparse
import os
import sys

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
    parser = argparse.ArgumentParser()
    parser.add_argument("--say", help="a line for stderr, at start")
    parser.add_argument("--junk", help="a line for stdout that is not JSON-RPC, at start")
    args = parser.parse_args()
    if args.say:
        print(args.say, file=sys.stderr, flush=True)
    if args.junk:
        print(args.junk, flush=True)
    server.run()
