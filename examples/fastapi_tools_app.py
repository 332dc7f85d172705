"""A FastAPI app whose agent has server-side tools: two Python functions the bridge runs itself
(one sync, one async), and optionally the tools of an MCP server, beside the frontend's tools.

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 AGUI_BRIDGE_MODEL=qwen3 \\
        uvicorn examples.fastapi_tools_app:app --port 8000
    # with the example MCP server's tools too (offered as clock__get_time, …):
    AGUI_BRIDGE_MCP="python examples/mcp_server.py" uvicorn examples.fastapi_tools_app:app
"""

from __future__ import annotations

import asyncio
import os

from fastapi import FastAPI
from pydantic import BaseModel

from bridge import BridgeConfig, create_app, mount

ORDERS = {7: ("shipped", ["tea", "cups"]), 8: ("packing", ["kettle"])}


class Order(BaseModel):
    number: int
    status: str
    items: list[str]


def get_order(order_id: int) -> Order:
    """Look up one of the shop's orders.

    Args:
        order_id: The order's number, as printed on the receipt.
    """
    status, items = ORDERS.get(order_id, ("unknown", []))
    return Order(number=order_id, status=status, items=items)


async def search_docs(query: str, limit: int = 3) -> list[str]:
    """Search the shop's help pages; the titles of the best matches.

    Args:
        query: What to look for.
        limit: How many titles at most.
    """
    await asyncio.sleep(0)  # a real one would await a search service here
    pages = ["Returns and refunds", "Delivery times", "Caring for your teapot"]
    words = query.lower().split()
    return [page for page in pages if any(word in page.lower() for word in words)][:limit]


def build(upstream_url: str, model: str, *, mcp: str | None = None) -> FastAPI:
    config = BridgeConfig(
        upstream_url=upstream_url,
        model=model,
        api_key=os.environ.get("OPENAI_API_KEY"),
        mcp_servers={"clock": mcp} if mcp else {},
    )
    agent = create_app(config, tools=[get_order, search_docs])
    # The agent's lifespan lists the MCP server's tools at start and stops it at shutdown.
    api = FastAPI(lifespan=agent.router.lifespan_context)
    api.router.routes.extend(mount("/agent", agent))
    return api


app = build(
    os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    os.environ.get("AGUI_BRIDGE_MODEL", "default"),
    mcp=os.environ.get("AGUI_BRIDGE_MCP"),
)
