"""The ASGI app: ``POST /`` runs the agent, ``GET /health``, ``GET /capabilities``.

Mount it where you like (``Mount("/agent", app=create_app(config))``); ``mount()`` also routes
``POST /agent`` itself, which a bare ``Mount`` answers with a redirect to ``/agent/``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
from ag_ui.core import (
    AgentCapabilities,
    IdentityCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    ReasoningCapabilities,
    RunAgentInput,
    ToolsCapabilities,
    TransportCapabilities,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route

from bridge.config import BridgeConfig
from bridge.encode import encode_event
from bridge.errors import InvalidRunInputError
from bridge.request import build_chat_request
from bridge.run import run_agent
from bridge.upstream import UpstreamClient

try:
    __version__ = version("agui-bridge")
except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    __version__ = "0"

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Bridge:
    """The app's state: its configuration and its one pooled upstream client."""

    def __init__(
        self, config: BridgeConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._transport = transport
        self._upstream: UpstreamClient | None = None

    @property
    def upstream(self) -> UpstreamClient:
        # Created on first use: a sub-app's lifespan does not run when it is mounted.
        if self._upstream is None:
            self._upstream = UpstreamClient(self.config, transport=self._transport)
        return self._upstream

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()
            self._upstream = None

    async def run(self, request: Request) -> Response:
        try:
            run_input = await _read_run_input(request)
            body = build_chat_request(run_input, self.config)
        except InvalidRunInputError as exc:
            return error_response(exc.status, exc.code, exc.message)
        return StreamingResponse(
            self._sse(run_input, body), media_type="text/event-stream", headers=SSE_HEADERS
        )

    async def _sse(self, run_input: RunAgentInput, body: dict[str, Any]) -> AsyncIterator[str]:
        options = self.config.translate_for(body["model"])
        async for batch in run_agent(run_input, body, self.upstream, options):
            yield "".join(encode_event(event) for event in batch)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def capabilities(self, request: Request) -> Response:
        props = await self.upstream.llama_cpp_props()
        custom: dict[str, Any] = {
            "models": list(self.config.models),
            "reasoningHistory": self.config.reasoning_history,
            "reasoningScope": self.config.reasoning_scope,
        }
        if props is not None:
            caps = props.get("chat_template_caps")
            preserve = caps.get("supports_preserve_reasoning") if isinstance(caps, dict) else None
            custom["llamaCpp"] = {"supportsPreserveReasoning": preserve}
        capabilities = AgentCapabilities(
            identity=IdentityCapabilities(
                name="agui-bridge",
                type="openai-compatible",
                description="AG-UI endpoint in front of an OpenAI-compatible model server",
                version=__version__,
            ),
            transport=TransportCapabilities(streaming=True, websocket=False, http_binary=False),
            tools=ToolsCapabilities(supported=True, client_provided=True, parallel_calls=True),
            reasoning=ReasoningCapabilities(supported=True, streaming=True, encrypted=True),
            multimodal=MultimodalCapabilities(input=MultimodalInputCapabilities(image=True)),
            custom=custom,
        )
        return JSONResponse(capabilities.model_dump(by_alias=True, mode="json"))


def create_app(
    config: BridgeConfig, *, transport: httpx.AsyncBaseTransport | None = None
) -> Starlette:
    """The bridge as an ASGI app. ``transport`` replaces the network (tests of one module)."""
    bridge = Bridge(config, transport=transport)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await bridge.aclose()

    app = Starlette(
        routes=[
            Route("/", bridge.run, methods=["POST"]),
            Route("/health", bridge.health, methods=["GET"]),
            Route("/capabilities", bridge.capabilities, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.bridge = bridge
    return app


def mount(path: str, app: Starlette) -> list[BaseRoute]:
    """Routes that serve a ``create_app`` app under ``path``: ``POST {path}`` and ``{path}/…``.

    Pass ``lifespan=app.router.lifespan_context`` to the parent app so the upstream client is
    closed on shutdown.
    """
    bridge: Bridge = app.state.bridge
    path = path.rstrip("/")
    return [Route(path, bridge.run, methods=["POST"]), Mount(path, app=app)]


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


async def _read_run_input(request: Request) -> RunAgentInput:
    content_type = request.headers.get("content-type", "")
    if content_type and "json" not in content_type:
        raise InvalidRunInputError(
            f"send the RunAgentInput as application/json, not {content_type!r}", status=415
        )
    raw = await request.body()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidRunInputError(f"the body is not valid JSON: {exc}") from exc
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise InvalidRunInputError(f"not a valid RunAgentInput: {problems}", status=422) from exc
