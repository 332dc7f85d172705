"""The MCP Apps example server (examples/mcp_app_server.py) through the official SDK's client, over
stdio and streamable HTTP: the UI tool names its widget, the widget's HTML reads as an MCP App,
both tools answer with text and with the number the widget reads; a client without MCP Apps gets
the same text."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servers import mcp_http_server

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters
from mcp.client.extension import advertise

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mcp_app_server.py"
UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
WIDGET = "ui://counter/app.html"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The example over streamable HTTP, in a process of its own."""
    with mcp_http_server(EXAMPLE) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> StdioServerParameters | str:
    if request.param == "stdio":
        return StdioServerParameters(command=sys.executable, args=[str(EXAMPLE)])
    url: str = request.getfixturevalue("http_url")
    return url


def _client(server: StdioServerParameters | str, *, apps: bool = True) -> Client:
    extensions = [advertise(UI, {"mimeTypes": [APP_MIME]})] if apps else []
    return Client(server, extensions=extensions)


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def test_the_ui_tool_names_its_widget_and_the_widget_may_call_increment(
    server: StdioServerParameters | str,
) -> None:
    async def check() -> None:
        async with _client(server) as client:
            assert UI in (client.server_capabilities.extensions or {})
            tools = {tool.name: _wire(tool) for tool in (await client.list_tools()).tools}
        assert sorted(tools) == ["counter", "increment"]
        # The model is offered counter; increment is for the widget only.
        assert tools["counter"]["_meta"] == {"ui": {"resourceUri": WIDGET}}
        assert tools["increment"]["_meta"] == {"ui": {"resourceUri": WIDGET, "visibility": ["app"]}}
        assert tools["increment"]["inputSchema"]["required"] == ["count"]

    asyncio.run(check())


def test_the_widget_is_an_mcp_app_that_speaks_to_its_host(
    server: StdioServerParameters | str,
) -> None:
    async def check() -> None:
        async with _client(server) as client:
            listed = [_wire(r) for r in (await client.list_resources()).resources]
            read = _wire(await client.read_resource(WIDGET))
        assert [(r["uri"], r["mimeType"]) for r in listed] == [(WIDGET, APP_MIME)]
        [content] = read["contents"]
        assert content["uri"] == WIDGET
        assert content["mimeType"] == APP_MIME
        assert content["_meta"] == {"ui": {"prefersBorder": True}}
        html = content["text"]
        assert html.startswith("<!doctype html>")
        # The host's side of the protocol the widget's script relies on.
        for method in (
            "ui/initialize",
            "ui/notifications/initialized",
            "ui/notifications/tool-input",
            "ui/notifications/tool-result",
            "ui/notifications/size-changed",
            "tools/call",
        ):
            assert f'"{method}"' in html, method

    asyncio.run(check())


@pytest.mark.parametrize("apps", [True, False], ids=["with-apps", "text-only"])
def test_counter_and_increment_answer_in_text_and_with_the_count(
    server: StdioServerParameters | str, apps: bool
) -> None:
    async def check() -> None:
        async with _client(server, apps=apps) as client:
            shown = _wire(await client.call_tool("counter", {"start": 1}))
            default = _wire(await client.call_tool("counter", {}))
            added = _wire(await client.call_tool("increment", {"count": 41}))
            missing = _wire(await client.call_tool("increment", {}))
        assert shown["isError"] is False
        assert shown["content"] == [
            {"type": "text", "text": "The counter shows 1. Click +1 in the widget to add one."}
        ]
        assert shown["structuredContent"] == {"count": 1}
        assert default["structuredContent"] == {"count": 0}
        assert added["content"] == [{"type": "text", "text": "The counter shows 42."}]
        assert added["structuredContent"] == {"count": 42}
        assert missing["isError"] is True

    asyncio.run(check())
