"""Mount the bridge inside your own Starlette app.

OPENAI_BASE_URL=http://127.0.0.1:8080/v1 uvicorn examples.starlette_app:app --port 8000
# the agent: POST http://127.0.0.1:8000/agent
"""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bridge.app import create_app, mount
from bridge.config import BridgeConfig


def build(upstream_url: str, model: str) -> Starlette:
    agent = create_app(
        BridgeConfig(
            upstream_url=upstream_url,
            model=model,
            api_key=os.environ.get("OPENAI_API_KEY"),
        )
    )

    async def home(request: object) -> PlainTextResponse:
        return PlainTextResponse("my app; the agent is at POST /agent")

    # mount() routes POST /agent itself and everything under /agent/; the parent's lifespan
    # closes the bridge's pooled upstream client on shutdown.
    return Starlette(
        routes=[Route("/", home), *mount("/agent", agent)],
        lifespan=agent.router.lifespan_context,
    )


app = build(
    os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    os.environ.get("AGUI_BRIDGE_MODEL", "default"),
)
