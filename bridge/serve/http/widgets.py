"""A widget's proxied request (README "Generative UI (MCP Apps)"): a run whose
``forwardedProps.__proxiedMCPRequest`` names one of our MCP servers and one of four methods,
answered without the model: ``RUN_STARTED``, then ``RUN_FINISHED`` whose ``result`` is the MCP
server's answer, or an error the widget can tell (``tools.mcp_apps`` says what a widget may
ask)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread
from ag_ui.core import (
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
)
from starlette.responses import Response

from bridge.core.encode import encode_event
from bridge.serve.http.admission import Slot
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.frames import FrameWriter, client_protocol
from bridge.serve.http.stream import FrameSink
from bridge.serve.redact import Redactor
from bridge.serve.run.loop import run_started
from bridge.serve.run.output import UnencodableEventError
from bridge.serve.tools.mcp_apps import ProxiedRequest, ProxyRefused, error_result, proxied_request
from bridge.serve.tools.mcp_tools import McpServer
from bridge.serve.tools.server_tools import ToolError

logger = logging.getLogger("agui_bridge")


def proxied_request_of(run_input: RunAgentInput) -> Any:
    """``forwardedProps.__proxiedMCPRequest``, if the run is an MCP App widget's request."""
    props = run_input.forwarded_props
    return props.get("__proxiedMCPRequest") if isinstance(props, dict) else None


def answer(
    bridge: Bridge, run_input: RunAgentInput, value: Any, received: float, slot: Slot
) -> Response:
    """The widget's request answered as a run of its own: ``RUN_STARTED`` at once, then
    ``RUN_FINISHED`` with the MCP server's answer or the error."""
    started = run_started(run_input)
    writer = FrameWriter(
        bridge.redactor, client_protocol(run_input.protocol_version, bridge.config.agui_protocol)
    )

    async def produce(sink: FrameSink) -> None:
        sink.add(writer.frames([started]))
        await sink.flush()
        result, server, method, outcome = await answer_widget(
            value, bridge.mcp_servers, bridge.tools.gated, call_timeout=bridge.config.tool_timeout
        )
        finished = RunFinishedEvent(
            thread_id=run_input.thread_id, run_id=run_input.run_id, result=result
        )
        # The MCP server's answer may be big (a 30 MB text held the event loop 0.3 s here):
        # its frame is made in a worker thread, a slice at a time.
        try:
            frame = await anyio.to_thread.run_sync(finished_frame, finished, bridge.redactor)
        except Exception as exc:  # whatever fails, the run ends with its terminal event
            error = UnencodableEventError("the bridge could not encode the MCP server's answer")
            logger.warning("a widget's MCP request: %s", error.message, exc_info=exc)
            ended = RunErrorEvent(message=error.message, code=error.code)
            frame, outcome = writer.frames([ended]), "error"
        bridge.telemetry.proxied(server, method, outcome, time.perf_counter() - received)
        sink.add(frame)

    return bridge.event_stream(produce, slot)


def finished_frame(finished: RunFinishedEvent, redactor: Redactor) -> str:
    """The frame of a widget's ``RUN_FINISHED``, as ``FrameWriter`` writes it for every client
    line (it has no ``outcome``, the one field a line shapes), redacted a slice at a time by
    the redactor that carries a secret across the slices' edges."""
    return redactor.redact_sliced(encode_event(finished))


async def answer_widget(
    value: Any, servers: Sequence[McpServer], waits: Callable[[str], bool], *, call_timeout: float
) -> tuple[dict[str, Any], str, str, str]:
    """A widget's request answered: the result (the MCP server's, or ``error_result``), its
    server and method as metrics label them (only ours, only the four: else ``unknown``), and
    how it went (``ok``, ``refused``, ``error``). ``waits``: whether a server tool, by the name
    it is or would be offered under, waits for approval (``ServerTools.gated``: a tool its
    server hides from the model is not offered, and no less under ``--approve``)."""
    server_name, method = "unknown", "unknown"
    try:
        request = proxied_request(value)
        method = request.method
        server = _named_server(request, servers)
        server_name = server.name
        name = request.params.get("name")
        approved = not (
            method == "tools/call" and isinstance(name, str) and waits(server.tool_name(name))
        )
        result = await asyncio.wait_for(server.proxied(request, approved=approved), call_timeout)
        return result, server_name, method, "ok"
    except ProxyRefused as exc:
        return error_result(str(exc)), server_name, method, "refused"
    except TimeoutError:
        message = f"the MCP server did not answer within {call_timeout:g} s"
        return error_result(message), server_name, method, "error"
    except ToolError as exc:
        return error_result(str(exc)), server_name, method, "error"
    except Exception:  # a bug of ours: the widget gets a clean error, the log the traceback
        logger.exception("a widget's MCP request failed")
        return error_result("the bridge failed on this request"), server_name, method, "error"


def _named_server(request: ProxiedRequest, servers: Sequence[McpServer]) -> McpServer:
    """The MCP server a widget names, by its id (our ``--mcp`` name) or its hash; both, if
    given, must be the same server's."""
    for server in servers:
        if request.server_id:
            hash_agrees = not request.server_hash or request.server_hash == server.hash
            if request.server_id == server.name and hash_agrees:
                return server
        elif request.server_hash and request.server_hash == server.hash:
            return server
    named = request.server_id or request.server_hash or "none named"
    raise ProxyRefused(f"unknown MCP server: {named}")
