"""An MCP server with an MCP App (the official ``mcp`` SDK's ``Apps`` extension): a counter widget.

    # stdio: the bridge starts it
    agui-bridge serve ... --mcp app="python examples/mcp_app_server.py"
    # streamable HTTP: start it, then point the bridge at it
    python examples/mcp_app_server.py --http --port 9001
    agui-bridge serve ... --mcp app=http://127.0.0.1:9001/mcp

``counter`` is offered to the model (``app__counter``); its ``_meta.ui.resourceUri`` names the
widget, ``ui://counter/app.html``, which a host with MCP Apps (CopilotKit) shows in a sandboxed
iframe once the tool has run. The widget's "+1" asks the host to call ``increment`` (its
``visibility`` is ``["app"]``: the widget may call it, the model is not offered it) and shows the
count the server sent back. Both tools also answer in text, for hosts without MCP Apps.
"""

from __future__ import annotations

import argparse
from typing import Annotated

from mcp.server.apps import Apps
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

WIDGET_URI = "ui://counter/app.html"


class Count(BaseModel):
    """The number a result carries in its structuredContent, for the widget."""

    count: int


def _count_result(count: int, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content={"count": count}
    )


apps = Apps()


@apps.tool(resource_uri=WIDGET_URI)
def counter(
    start: Annotated[int, Field(description="The number the counter starts at.")] = 0,
) -> Annotated[CallToolResult, Count]:
    """Show a counter the user can click up, starting at a number."""
    return _count_result(start, f"The counter shows {start}. Click +1 in the widget to add one.")


@apps.tool(resource_uri=WIDGET_URI, visibility=["app"])
def increment(
    count: Annotated[int, Field(description="The number the widget shows now.")],
) -> Annotated[CallToolResult, Count]:
    """Add one to the counter's number (the counter's widget calls it)."""
    return _count_result(count + 1, f"The counter shows {count + 1}.")


# The widget speaks the MCP Apps protocol (JSON-RPC over postMessage, spec 2026-01-26) to its
# host by hand: ui/initialize, then the host's ui/notifications/tool-input and tool-result carry
# the call's arguments and result; "+1" sends tools/call, which the host proxies to this server.
WIDGET_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Counter</title>
<style>
  body { margin: 0; font: 15px/1.4 system-ui, sans-serif; color: #1f2937; }
  main { display: flex; align-items: center; gap: 16px; padding: 14px 18px; }
  #count { font-size: 40px; font-weight: 700; min-width: 2ch; text-align: center; }
  button { font: inherit; font-weight: 600; padding: 8px 18px; border: 0; border-radius: 8px;
           background: #4f46e5; color: white; cursor: pointer; }
  button:disabled { background: #a5b4fc; cursor: wait; }
  #status { color: #6b7280; font-size: 13px; }
  #status.error { color: #b91c1c; }
</style>
</head>
<body>
<main>
  <div>
    <div id="status">Counter</div>
    <div id="count" data-testid="count">…</div>
  </div>
  <button id="plus" data-testid="increment" disabled>+1</button>
</main>
<script>
(() => {
  const countEl = document.getElementById("count");
  const statusEl = document.getElementById("status");
  const plus = document.getElementById("plus");
  const pending = new Map();
  let nextId = 1;
  let count = null;

  const post = (message) => window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*");
  const notify = (method, params) => post({ method, params });
  const request = (method, params) => {
    const id = nextId++;
    post({ id, method, params });
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  };
  const show = (value, status, isError = false) => {
    if (Number.isInteger(value)) count = value;
    countEl.textContent = count === null ? "…" : String(count);
    statusEl.textContent = status;
    statusEl.className = isError ? "error" : "";
    plus.disabled = count === null;
  };
  const errorText = (result) =>
    (result.content || []).map((block) => block.text || "").join(" ") || "the tool failed";

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const message = event.data;
    if (!message || message.jsonrpc !== "2.0") return;
    if (message.id !== undefined && !message.method) {
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) waiting?.reject(new Error(message.error.message));
      else waiting?.resolve(message.result);
    } else if (message.method === "ui/notifications/tool-input") {
      show(message.params?.arguments?.start, "Counter");
    } else if (message.method === "ui/notifications/tool-result") {
      show(message.params?.structuredContent?.count, "Counter");
    } else if (message.id !== undefined) {
      post({ id: message.id, result: {} }); // ping, ui/resource-teardown
    }
  });

  plus.addEventListener("click", async () => {
    plus.disabled = true;
    statusEl.textContent = "Asking the server…";
    try {
      const result = await request("tools/call", { name: "increment", arguments: { count } });
      if (result.isError) show(null, errorText(result), true);
      else show(result.structuredContent?.count, "Added by the server");
    } catch (error) {
      show(null, error.message, true);
    }
  });

  new ResizeObserver(() =>
    notify("ui/notifications/size-changed", { height: document.body.scrollHeight }),
  ).observe(document.body);

  request("ui/initialize", {
    protocolVersion: "2026-01-26",
    appInfo: { name: "counter", version: "1.0.0" },
    appCapabilities: {},
  }).then(() => notify("ui/notifications/initialized", {}));
})();
</script>
</body>
</html>
"""

apps.add_html_resource(WIDGET_URI, WIDGET_HTML, title="Counter", prefers_border=True)
server = MCPServer("counter", log_level="WARNING", extensions=[apps])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run()


if __name__ == "__main__":
    main()
