"""Hostile peers for ``test_hostile_cli.py``.

Run as a script, an MCP server on stdio (the SDK's own) whose stderr, which the bridge logs a
line at a time as ``[mcp NAME] …``, carries what would forge or rewrite log lines: a carriage
return, ANSI escapes, U+2028, NEL, a bidirectional override. ``HOSTILE_TEXTS`` are the same for
ids and a widget's log line; ``unauthorized_upstream()`` refuses every request as a wrong key,
``echoing_upstream()`` every chat request quoting the prompt, and ``traced_runs()`` traces a run
before it.
"""

from __future__ import annotations

import json
import sys

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

#: Each text forges a line (``FORGED``) or acts on the terminal, were it written raw.
HOSTILE_TEXTS = (
    "cr\rINFO:     FORGED by a carriage return",
    "esc\x1b[2J\x1b[31mFORGED in red\x1b[0m",
    "lf\nINFO:     FORGED by a line feed",
    "ls\u2028FORGED by a line separator",
    "nel\x85FORGED by a next-line",
    "bidi\u202eDEGROF",
    "del\x7f and a C1 CSI \x9b31mFORGED in red",
)
#: The user's words, which reach a span only with ``--otel-content``.
PROMPT = "my diary says quetzalcoatlite"


def unauthorized_upstream() -> Starlette:
    """An OpenAI-compatible upstream that refuses every request as OpenAI does a wrong key."""

    async def refuse(request: Request) -> JSONResponse:
        error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
        return JSONResponse({"error": error}, status_code=401)

    return Starlette(routes=[Route("/{path:path}", refuse, methods=["GET", "POST"])])


def _mcp_server() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("hostile", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Says the text back."""
        return text

    for text in HOSTILE_TEXTS:
        sys.stderr.buffer.write(text.encode() + b"\n")
    sys.stderr.buffer.write(b"a raw CSI byte \x9b31m, not UTF-8\n")
    sys.stderr.flush()
    server.run()


if __name__ == "__main__":
    _mcp_server()


def echoing_upstream() -> Starlette:
    """An upstream that refuses every chat request quoting the user's last message back, as
    some servers' validation errors do: its error message is the user's text."""

    async def refuse(request: Request) -> JSONResponse:
        body = await request.json()
        said = body["messages"][-1]["content"]
        return JSONResponse({"error": {"message": f"cannot answer {said!s}"}}, status_code=400)

    return Starlette(routes=[Route("/v1/chat/completions", refuse, methods=["POST"])])


def traced_runs(content: bool) -> None:
    """In a process of its own (a tracer provider is set once per process): a bridge traced
    into memory (``--otel-content`` or not) before ``echoing_upstream``, both on real sockets,
    one run with hostile ids and a prompt the upstream quotes; prints the spans as JSON."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from bridge import BridgeConfig, create_app
    from servers import run_input, serve

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with serve(echoing_upstream()) as upstream:
        config = BridgeConfig(
            upstream_url=f"{upstream}/v1", model="m", otel=True, otel_content=content, retries=0
        )
        with serve(create_app(config)) as bridge:
            prompt = [{"id": "u", "role": "user", "content": f"{PROMPT} {HOSTILE_TEXTS[1]}"}]
            body = run_input(prompt, threadId=HOSTILE_TEXTS[0], runId=HOSTILE_TEXTS[2])
            httpx.post(bridge, json=body, timeout=30).raise_for_status()
    spans = [
        {
            "name": span.name,
            "attributes": dict(span.attributes or {}),
            "status": span.status.description,
        }
        for span in exporter.get_finished_spans()
    ]
    print(json.dumps(spans, default=str))
