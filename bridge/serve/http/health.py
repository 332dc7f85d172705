"""``GET /health``: whether the bridge serves, for a load balancer or an orchestrator."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bridge.serve.http.bridge import Bridge


async def health(bridge: Bridge, request: Request) -> Response:
    # Degraded, not down: HTTP 200 keeps the bridge in a load balancer's pool (it serves,
    # without some tools), and the body names what is missing.
    missing = bridge.mcp_unavailable
    if missing:
        return JSONResponse({"status": "degraded", "mcp_unavailable": missing})
    return JSONResponse({"status": "ok"})
