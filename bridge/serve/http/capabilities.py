"""``GET /capabilities``: what this bridge is and serves, as AG-UI's ``AgentCapabilities``: its
models, client protocols, server tools and reasoning settings (with llama.cpp, what its
``/props`` says of the chat template)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    ReasoningCapabilities,
    ToolsCapabilities,
    TransportCapabilities,
)
from starlette.requests import Request
from starlette.responses import Response

from bridge import __version__
from bridge.config import BridgeConfig
from bridge.core.errors import InvalidRunInputError
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.frames import CLIENT_PROTOCOLS
from bridge.serve.run.request import served_models
from bridge.serve.tools.server_tools import ServerTools


async def describe(bridge: Bridge, request: Request) -> Response:
    try:
        bridge.authorize(request)
        await bridge.start_for_request()
    except InvalidRunInputError as exc:
        return bridge.refused(exc)
    config, props = bridge.config, bridge.upstream_props
    described = capabilities(
        config,
        bridge.tools,
        served_models(config, await bridge.upstream_models()),
        await props.props(config.model),
        await props.reasoning_scope(config.model),
    )
    return bridge.json_response(described)


def capabilities(
    config: BridgeConfig,
    tools: ServerTools,
    models: Sequence[str],
    llama_cpp_props: dict[str, Any] | None,
    reasoning_scope: str,
) -> dict[str, Any]:
    """The capabilities as JSON: ``models`` are the ones served; ``llama_cpp_props`` is
    llama.cpp's ``/props`` for the default model, or ``None`` for another server;
    ``reasoning_scope`` is the scope the default model's runs get (``auto`` resolved)."""
    custom: dict[str, Any] = {
        "models": list(models),
        "reasoningHistory": config.reasoning_history,
        "reasoningScope": config.reasoning_scope,
        # The AG-UI client lines served: each run's events are shaped for the line its
        # client announces (protocolVersion), unless pinned.
        "aguiProtocols": list(CLIENT_PROTOCOLS),
        "aguiProtocol": config.agui_protocol,
        # Tools the bridge runs itself (Python functions, MCP servers' NAME__tool).
        "serverTools": [tool.name for tool in tools.definitions()],
        # Whether GET /threads and a hydrate answer (--threads): a page asks before it lists.
        "threads": config.threads is not None,
    }
    if config.reasoning_scope == "auto":
        custom["reasoningScopeResolved"] = reasoning_scope
    if llama_cpp_props is not None:
        caps = llama_cpp_props.get("chat_template_caps")
        preserve = caps.get("supports_preserve_reasoning") if isinstance(caps, dict) else None
        # Only what it means: whatever else the upstream put there is not ours to repeat.
        preserve = preserve if isinstance(preserve, bool) else None
        custom["llamaCpp"] = {"supportsPreserveReasoning": preserve}
    described = AgentCapabilities(
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
        # Server tools under approval end a run with an interrupt; the answer may edit the
        # arguments (editedArgs).
        human_in_the_loop=HumanInTheLoopCapabilities(interrupts=True, approve_with_edits=True)
        if tools.any_waits
        else None,
        custom=custom,
    )
    return described.model_dump(by_alias=True, mode="json")
