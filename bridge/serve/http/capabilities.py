"""``GET /capabilities``: what this bridge is and serves, as AG-UI's ``AgentCapabilities``, true
for the configuration it describes: its server tools (in ``tools.items``, with their schemas),
the shared state (``--shared-state``), the attachments taken (what the model server's ``/props``
says, else what the bridge passes on), reasoning, approvals, the rounds of server tools a run
may take; and in ``custom`` what AG-UI has no place for (models, client protocols, reasoning
settings, with llama.cpp what its ``/props`` says of the chat template)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import (
    AgentCapabilities,
    ExecutionCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    ReasoningCapabilities,
    StateCapabilities,
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
from bridge.serve.run.modalities import upstream_takes
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
    threads = config.threads is not None
    approvals, asking = tools.any_approvals, tools.any_asks
    described = AgentCapabilities(
        identity=IdentityCapabilities(
            name="agui-bridge",
            type="openai-compatible",
            description="AG-UI endpoint in front of an OpenAI-compatible model server",
            version=__version__,
        ),
        # With threads a run outlives its connection, and a client comes back to it after the
        # last frame it read (Last-Event-ID, the frames' ids).
        transport=TransportCapabilities(
            streaming=True, websocket=False, http_binary=False, resumable=threads
        ),
        tools=ToolsCapabilities(
            supported=True,
            items=tools.definitions() or None,
            client_provided=True,
            parallel_calls=True,
        ),
        # The model edits the state with update_state: each patch a STATE_DELTA, the whole a
        # STATE_SNAPSHOT at the run's end; a kept thread's state comes back on a hydrate.
        state=StateCapabilities(
            snapshots=config.shared_state or threads,
            deltas=config.shared_state,
            memory=False,
            persistent_state=threads,
        ),
        # llama.cpp never sends reasoning encrypted; other servers may (OpenRouter, OpenAI's
        # Responses API), as REASONING_ENCRYPTED_VALUE.
        reasoning=ReasoningCapabilities(
            supported=True, streaming=True, encrypted=llama_cpp_props is None
        ),
        multimodal=MultimodalCapabilities(input=_attachments(config, llama_cpp_props)),
        execution=ExecutionCapabilities(
            max_iterations=config.max_tool_rounds,
            # --run-timeout bounds a run only with threads (it outlives its connection).
            max_execution_time=round(config.run_timeout * 1000) if threads else None,
        ),
        # Server tools under approval end a run with an interrupt; the answer may edit the
        # arguments (editedArgs); a tool that asks the person (ask_user, @asks_user) ends it
        # with an input_required interrupt, its answer checked against the question's schema.
        human_in_the_loop=HumanInTheLoopCapabilities(
            supported=True, approvals=approvals, interrupts=True, approve_with_edits=approvals
        )
        if approvals or asking
        else None,
        custom=custom,
    )
    return described.model_dump(by_alias=True, mode="json", exclude_none=True)


def _attachments(
    config: BridgeConfig, llama_cpp_props: dict[str, Any] | None
) -> MultimodalInputCapabilities:
    """The attachments the model takes: where its server says (llama.cpp's ``/props``
    ``modalities``), what it says, and no PDFs (llama-server reads no files); else what the
    bridge passes on through the upstream's API (``bridge.serve.run.parts``: the Responses API
    has no video), for the server to take or refuse in its own words. Text documents go as
    text to every model, and are no modality of their own here."""
    takes = upstream_takes(llama_cpp_props)
    if takes is not None:
        kinds = takes.kinds
        return MultimodalInputCapabilities(
            image="image" in kinds, audio="audio" in kinds, video="video" in kinds, pdf=False
        )
    video = config.upstream_api == "chat"
    return MultimodalInputCapabilities(image=True, audio=True, video=video, pdf=True)
