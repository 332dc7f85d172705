"""An MCP server (stdio, the official SDK's ``MCPServer``) whose tools answer with more than
text, for ``test_hostile_tool_parts.py``:

- ``picture``: a text block, an image, an embedded text resource and a blob resource (a PNG);
- ``leaky``: the key given as ``--key`` in a text block, inside an image's bytes, inside a blob
  resource's bytes and in its URI;
- ``garbled``: an image whose data is not base64;
- ``big_picture``: an image of ``--size`` bytes.

Run as ``python peers_tool_parts.py [--key KEY] [--size BYTES]``.
"""

from __future__ import annotations

import argparse
import base64

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

#: A one-pixel PNG (its bytes as they are: the tests compare them).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
LOGO = PNG + b"logo"
NOTES = "# Notes\nThe chart shows sales by month."


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def picture_blocks() -> list[ContentBlock]:
    """What ``picture`` answers (the tests build what they expect from it)."""
    return [
        TextContent(type="text", text="Here is the chart."),
        ImageContent(type="image", data=encoded(PNG), mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///notes/readme.md", mime_type="text/markdown", text=NOTES
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///pics/logo.png", mime_type="image/png", blob=encoded(LOGO)
            ),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--key", default="no-key-given")
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    key: str = args.key
    size: int = args.size
    server = MCPServer("media", log_level="WARNING")

    @server.tool()
    def picture() -> list[ContentBlock]:
        """A chart, its notes and the logo."""
        return picture_blocks()

    @server.tool()
    def leaky() -> list[ContentBlock]:
        """Everything with the key in it."""
        inside = PNG + f" the key: {key} ".encode()
        return [
            TextContent(type="text", text=f"the key is {key}"),
            ImageContent(type="image", data=encoded(inside), mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri=f"file:///keys/{key}.png", mime_type="image/png", blob=encoded(inside)
                ),
            ),
        ]

    @server.tool()
    def garbled() -> list[ContentBlock]:
        """An image whose data is not base64."""
        return [ImageContent(type="image", data="not base64!", mime_type="image/png")]

    @server.tool()
    def big_picture() -> list[ContentBlock]:
        """A big image."""
        data = (PNG * (size // len(PNG) + 1))[:size]
        return [ImageContent(type="image", data=encoded(data), mime_type="image/png")]

    server.run()


if __name__ == "__main__":
    main()
