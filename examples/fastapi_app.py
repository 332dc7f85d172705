"""Mount the bridge inside a FastAPI app.

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 AGUI_BRIDGE_MODEL=qwen3 \\
        uvicorn examples.fastapi_app:app --port 8000
    # the agent: POST http://127.0.0.1:8000/agent
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from bridge.app import create_app, mount
from bridge.config import BridgeConfig


def build(upstream_url: str, model: str) -> FastAPI:
    agent = create_app(
        BridgeConfig(
            upstream_url=upstream_url,
            model=model,
            api_key=os.environ.get("OPENAI_API_KEY"),
        )
    )
    api = FastAPI(lifespan=agent.router.lifespan_context)

    @api.get("/")
    async def home() -> dict[str, str]:
        return {"agent": "POST /agent"}

    # mount() gives a route for POST /agent itself and the sub-app under /agent/ (FastAPI
    # routers take Starlette routes as they are).
    api.router.routes.extend(mount("/agent", agent))
    return api


app = build(
    os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    os.environ.get("AGUI_BRIDGE_MODEL", "default"),
)
