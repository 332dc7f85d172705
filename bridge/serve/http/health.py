"""``GET /health``: whether the bridge serves, for a load balancer or an orchestrator."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bridge.serve.http.bridge import Bridge


async def health(bridge: Bridge, request: Request) -> Response:
    # Degraded, not down: HTTP 200 keeps the bridge in a load balancer's pool (it serves,
    # without some tools, or without running approved calls: every replica shares the store),
    # and the body names what is missing.
    body: dict[str, Any] = {"status": "ok"}
    missing = bridge.mcp_unavailable
    if missing:
        body.update(status="degraded", mcp_unavailable=missing)
    if await bridge.approval_store_down():
        body.update(status="degraded", approval_store="unavailable")
    if bridge.threads is not None and await bridge.threads.down():
        body.update(status="degraded", thread_store="unavailable")
    return JSONResponse(body)
