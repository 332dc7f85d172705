"""The ASGI app: ``POST /`` runs the agent, ``GET /health``, ``GET /capabilities``.

Mount it where you like (``Mount("/agent", app=create_app(config))``); ``mount()`` also routes
``POST /agent`` itself, which a bare ``Mount`` answers with a redirect to ``/agent/``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import httpx
from ag_ui.core import (
    PROTOCOL_VERSION,
    Message,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Receive, Scope, Send

from bridge.config import ANY_UPSTREAM_MODEL, BridgeConfig
from bridge.core.encode import encode_event
from bridge.core.errors import InvalidRunInputError
from bridge.serve.http.capabilities import capabilities
from bridge.serve.http.frames import ClientProtocol, FrameWriter, client_protocol
from bridge.serve.http.run_input import read_run_input
from bridge.serve.http.stream import EventStreamResponse
from bridge.serve.observe.observation import RunObservation, Telemetry
from bridge.serve.redact import Redactor, install_log_redaction
from bridge.serve.run.loop import Prepare, ToolLoop, run_agent
from bridge.serve.run.props import UpstreamProps
from bridge.serve.run.request import (
    build_chat_request,
    build_responses_request,
    configured_scope,
    served_models,
)
from bridge.serve.run.resume import Approvals, settle_approvals
from bridge.serve.tools.approvals import new_secret
from bridge.serve.tools.mcp_apps import answer_widget
from bridge.serve.tools.mcp_tools import McpServer, McpStartError, start_mcp_servers
from bridge.serve.tools.server_tools import ServerTools, python_tool
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.record import Recorder

logger = logging.getLogger("agui_bridge")


class Bridge:
    """The app's state: its configuration and its one pooled upstream client."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        tools: Sequence[Callable[..., Any]] = (),
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._transport = transport
        self._upstream: UpstreamClient | None = None
        self.active_runs = 0
        self.shutting_down = False
        self._stop_runs = anyio.Event()
        # Secrets never leave the bridge: every frame, error body, /capabilities and log line.
        self.redactor = Redactor((config.api_key, config.auth_token, config.secret))
        install_log_redaction(self.redactor)
        self.recorder: Recorder | None = None
        if config.record_dir is not None:  # serve --record: each run and its upstream exchange
            self.recorder = Recorder(config.record_dir, config, self.redactor)
        # Sync tools run on threads of the app's own (sized by tool_threads), not one each.
        self._tool_threads = ThreadPoolExecutor(
            max_workers=config.tool_threads, thread_name_prefix="server-tool"
        )
        self.tools = ServerTools(
            [python_tool(tool, threads=self._tool_threads) for tool in tools],
            timeout=config.tool_timeout,
            max_parallel=config.max_parallel_tools,
            redact=self.redactor.redact,
            approve=config.approve,
        )
        # Interrupts are signed, not stored (README "Approving tools"): with no secret given,
        # one of this process's own, which no other process (nor this one restarted) knows.
        secret = config.secret.encode() if config.secret is not None else new_secret()
        if config.secret is None and (config.approve or self.tools.any_waits):
            logger.warning(
                "no interrupt secret given (--secret-env): approvals use one of this process's "
                "own, so they do not survive a restart or span processes"
            )
        self.approvals = Approvals(
            secret=secret, timeout=config.approval_timeout, redact=self.redactor.redact
        )
        self._mcp: list[McpServer] | None = None if config.mcp_servers else []
        self._mcp_lock = asyncio.Lock()
        self.telemetry = Telemetry.from_config(config, self.redactor.redact)
        self.upstream_props = UpstreamProps(
            config, lambda name: self.upstream.llama_cpp_props(name)
        )

    async def start(self) -> None:
        """Connect to the MCP servers and add their tools (once; the lifespan calls it, and the
        first run does when the app is mounted where its lifespan does not run). Raises
        ``McpStartError`` when a server that is not optional cannot be reached (the next call
        tries again), ``ValueError`` when two server tools share a name."""
        if self._mcp is not None:
            return
        async with self._mcp_lock:
            if self._mcp is not None:
                return
            try:
                self._mcp, tools = await start_mcp_servers(
                    self.config.mcp_servers,
                    call_timeout=self.config.tool_timeout,
                    connect_timeout=self.config.connect_timeout,
                    optional=self.config.mcp_optional,
                )
            except McpStartError as exc:  # its message goes to a terminal or an HTTP body
                raise McpStartError(self.redactor.redact(str(exc))) from None
            self.tools.add(tools)

    @property
    def mcp_unavailable(self) -> list[str]:
        """The MCP servers whose tools cannot be called now: an optional one that could not be
        reached at start, one that died since."""
        return [server.name for server in self._mcp or () if not server.available]

    @property
    def upstream(self) -> UpstreamClient:
        # Created on first use: a sub-app's lifespan does not run when it is mounted.
        if self._upstream is None:
            wrap = self.recorder.wrap if self.recorder is not None else None
            self._upstream = UpstreamClient(self.config, transport=self._transport, wrap=wrap)
        return self._upstream

    async def aclose(self) -> None:
        for server in self._mcp or ():
            await server.aclose()
        # Calls still queued for a thread are dropped; running ones cannot be stopped.
        self._tool_threads.shutdown(wait=False, cancel_futures=True)
        if self._upstream is not None:
            await self._upstream.aclose()
            self._upstream = None
        tracing = self.telemetry.tracing
        if tracing is not None:  # its last spans go out (the exporter's own timeout bounds it)
            await anyio.to_thread.run_sync(tracing.shutdown)

    async def run(self, request: Request) -> Response:
        received = time.perf_counter()
        try:
            self._authorize(request)
            if self.shutting_down:
                raise InvalidRunInputError(
                    "the bridge is shutting down", status=503, code="shutting_down"
                )
            if self.active_runs >= self.config.max_concurrent_runs:
                raise InvalidRunInputError(
                    "the bridge is serving as many runs as it may; retry in a moment",
                    status=503,
                    code="too_many_runs",
                )
            run_input = await read_run_input(request, self.config)
            await self._start_for_request()
            proxied = _proxied_request(run_input)
            if proxied is not None:  # an MCP App's widget asks its server: no model, no turn
                return self._proxied(run_input, proxied, received)
            loop, prepare = self._tool_loop(run_input, await self._upstream_models())
            body = loop.build(run_input.messages)
        except ClientDisconnect:
            self.telemetry.refused(400, "client_disconnected")
            return Response(status_code=400)  # gone while sending its body: nobody to answer
        except InvalidRunInputError as exc:
            self.telemetry.refused(exc.status, exc.code)
            headers = {"Retry-After": "1"} if exc.status == 503 else None
            if exc.status == 401:
                headers = {"WWW-Authenticate": "Bearer"}
            return self.error_response(exc.status, exc.code, exc.message, headers=headers)
        self.active_runs += 1
        protocol = client_protocol(run_input.protocol_version, self.config.agui_protocol)
        observe = self.telemetry.run(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            model=str(body["model"]),
            protocol=protocol,
            received=received,
            headers=request.headers,
        )
        frames = self._frames(run_input, body, loop, protocol, observe, prepare)
        if self.recorder is not None:
            frames = self.recorder.recorded(run_input, frames)

        def ended(response: EventStreamResponse) -> None:
            self.active_runs -= 1
            observe.end(
                bytes_sent=response.bytes_sent,
                disconnected=response.client_gone,
                stopped=response.stopped,
            )
            self.upstream_props.run_ended(observe.code, observe.upstream_retries)

        return EventStreamResponse(
            frames,
            keepalive_interval=self.config.keepalive_interval,
            stop=self._stop_runs,
            stop_frame=_SHUTDOWN_FRAME,
            on_close=ended,
        )

    def _proxied(self, run_input: RunAgentInput, value: Any, received: float) -> Response:
        """A widget's request through a run (``bridge.serve.tools.mcp_apps``): ``RUN_STARTED``,
        then ``RUN_FINISHED`` whose result is the MCP server's answer or the error."""
        self.active_runs += 1
        started = RunStartedEvent(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            protocol_version=PROTOCOL_VERSION,  # as every run's (the 0.0 lines get it left out)
        )
        writer = FrameWriter(
            self.redactor,
            client_protocol(run_input.protocol_version, self.config.agui_protocol),
        )

        async def frames() -> AsyncGenerator[str, None]:
            yield writer.frames([started])
            result, server, method, outcome = await answer_widget(
                value, self._mcp or (), self.tools.waits, call_timeout=self.config.tool_timeout
            )
            finished = RunFinishedEvent(
                thread_id=run_input.thread_id, run_id=run_input.run_id, result=result
            )
            self.telemetry.proxied(server, method, outcome, time.perf_counter() - received)
            yield writer.frames([finished])

        def ended(response: EventStreamResponse) -> None:
            self.active_runs -= 1

        return EventStreamResponse(
            frames(),
            keepalive_interval=self.config.keepalive_interval,
            stop=self._stop_runs,
            stop_frame=_SHUTDOWN_FRAME,
            on_close=ended,
        )

    async def _start_for_request(self) -> None:
        """``start()`` for a request (an app mounted where its lifespan does not run): a
        server that cannot be reached is HTTP 503 for this request, tried again by the next."""
        try:
            await self.start()
        except McpStartError as exc:
            raise InvalidRunInputError(str(exc), status=503, code="mcp_unavailable") from exc

    def begin_shutdown(self, grace: float) -> None:
        """Refuse new runs now; after ``grace`` seconds end the running ones with RUN_ERROR
        ``shutting_down``. Call it on the event loop's thread (a signal handler is)."""
        if not self.shutting_down:
            self.shutting_down = True
            loop = asyncio.get_running_loop()
            # call_soon_threadsafe: safe to schedule from inside a signal handler.
            loop.call_soon_threadsafe(loop.call_later, grace, self._stop_runs.set)

    def _tool_loop(
        self, run_input: RunAgentInput, upstream_models: list[str]
    ) -> tuple[ToolLoop, Prepare | None]:
        """The run's server tools, offered beside the frontend's, and how to build each of its
        requests (the first from the client's messages, the next with the turns since); and,
        with ``--reasoning-scope auto``, what sets the scope once the run has begun: llama.cpp's
        ``/props`` is read after RUN_STARTED, which goes before the upstream is asked anything.
        The first build, which checks the input, sends back the turn in progress."""
        frontend = run_input.tools or []
        taken = [tool.name for tool in frontend if tool.name in self.tools]
        if taken:
            raise InvalidRunInputError(
                f"the frontend's tool {taken[0]!r} has the name of a server tool of this bridge"
            )
        offered = run_input
        if self.tools:
            offered = run_input.model_copy(update={"tools": [*frontend, *self.tools.definitions()]})
        build_request = (
            build_responses_request
            if self.config.upstream_api == "responses"
            else build_chat_request
        )

        waits = self.tools.waits
        scope = [configured_scope(self.config)]

        def build(messages: Sequence[Message]) -> dict[str, Any]:
            conversation = offered
            settled = settle_approvals(messages, waits)
            if settled is not run_input.messages:
                conversation = offered.model_copy(update={"messages": list(settled)})
            return build_request(conversation, self.config, upstream_models, scope=scope[0])

        async def prepare(body: dict[str, Any]) -> dict[str, Any]:
            resolved = await self.upstream_props.reasoning_scope(str(body["model"]))
            if resolved == scope[0]:
                return body
            scope[0] = resolved
            return build(run_input.messages)

        loop = ToolLoop(self.tools, build, self.config.max_tool_rounds, self.approvals)
        return loop, prepare if self.config.reasoning_scope == "auto" else None

    async def _frames(
        self,
        run_input: RunAgentInput,
        body: dict[str, Any],
        loop: ToolLoop,
        protocol: ClientProtocol,
        observe: RunObservation,
        prepare: Prepare | None,
    ) -> AsyncGenerator[str, None]:
        options = self.config.translate_for(body["model"])
        writer = FrameWriter(self.redactor, protocol)
        run = run_agent(
            run_input,
            body,
            self.upstream,
            options,
            api=self.config.upstream_api,
            loop=loop if self.tools else None,
            observe=observe,
            prepare=prepare,
        )
        async with aclosing(run) as batches:
            async for batch in batches:
                observe.sent(batch)
                yield writer.frames(batch)

    async def _upstream_models(self) -> list[str]:
        if ANY_UPSTREAM_MODEL not in self.config.models:
            return []
        return await self.upstream.list_models()

    def _authorize(self, request: Request) -> None:
        token = self.config.auth_token
        if token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # compare_digest: the time taken must not tell how much of a guess was right.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.encode()):
            raise InvalidRunInputError(
                "this bridge needs Authorization: Bearer <token>", status=401, code="unauthorized"
            )

    async def health(self, request: Request) -> Response:
        # Degraded, not down: HTTP 200 keeps the bridge in a load balancer's pool (it serves,
        # without some tools), and the body names what is missing.
        missing = self.mcp_unavailable
        if missing:
            return JSONResponse({"status": "degraded", "mcp_unavailable": missing})
        return JSONResponse({"status": "ok"})

    async def metrics(self, request: Request) -> Response:
        """``GET /metrics``: the Prometheus exposition (behind the auth token unless
        ``metrics_public``)."""
        metrics = self.telemetry.metrics
        if metrics is None:
            return self.error_response(404, "not_found", "metrics are off (serve --metrics)")
        if not self.config.metrics_public:
            try:
                self._authorize(request)
            except InvalidRunInputError as exc:
                self.telemetry.refused(exc.status, exc.code)
                headers = {"WWW-Authenticate": "Bearer"}
                return self.error_response(exc.status, exc.code, exc.message, headers=headers)
        body, content_type = metrics.render(request.headers.get("accept"))
        # Redacted like every body: a label value (a frontend tool's name) is the client's text.
        return Response(self.redactor.redact(body.decode()), media_type=content_type)

    async def describe(self, request: Request) -> Response:
        """``GET /capabilities`` (``bridge.serve.http.capabilities``)."""
        try:
            self._authorize(request)
            await self._start_for_request()
        except InvalidRunInputError as exc:
            self.telemetry.refused(exc.status, exc.code)
            return self.error_response(exc.status, exc.code, exc.message)
        described = capabilities(
            self.config,
            self.tools,
            served_models(self.config, await self._upstream_models()),
            await self.upstream_props.props(self.config.model),
            await self.upstream_props.reasoning_scope(self.config.model),
        )
        return self.json_response(described)

    def json_response(
        self, content: Any, *, status_code: int = 200, headers: dict[str, str] | None = None
    ) -> Response:
        """A JSON answer, redacted of the configured secrets."""
        body = self.redactor.redact(json.dumps(content, ensure_ascii=False, separators=(",", ":")))
        return Response(body, status_code, headers, media_type="application/json")

    def error_response(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> Response:
        return self.json_response(
            {"error": {"code": code, "message": message}}, status_code=status, headers=headers
        )


def _proxied_request(run_input: RunAgentInput) -> Any:
    """``forwardedProps.__proxiedMCPRequest``, if the run is an MCP App widget's request."""
    props = run_input.forwarded_props
    return props.get("__proxiedMCPRequest") if isinstance(props, dict) else None


def create_app(
    config: BridgeConfig,
    *,
    tools: Sequence[Callable[..., Any]] = (),
    transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """The bridge as an ASGI app. ``tools``: Python functions (sync or async) the bridge runs
    itself when the model calls them (README "Server-side tools"). ``transport`` replaces the
    network (tests of one module)."""
    bridge = Bridge(config, tools=tools, transport=transport)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await bridge.start()  # the MCP servers' tools, listed at start
        try:
            yield
        finally:
            await bridge.aclose()

    middleware = []
    if config.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", "accept"],
            )
        )
    app = Starlette(
        middleware=middleware,
        routes=[
            Route("/", bridge.run, methods=["POST"]),
            Route("/health", bridge.health, methods=["GET"]),
            Route("/capabilities", bridge.describe, methods=["GET"]),
            *([Route("/metrics", bridge.metrics, methods=["GET"])] if config.metrics else []),
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
    path = path.rstrip("/")
    return [Route(path, _AtRoot(app, path), methods=["POST", "OPTIONS"]), Mount(path, app=app)]


class _AtRoot:
    """Hands a request for ``{path}`` to the app as a request for its ``/`` (with its middleware:
    CORS and all), as ``Mount`` does for ``{path}/``."""

    def __init__(self, app: Starlette, path: str) -> None:
        self._app = app
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        root_path = scope.get("root_path", "") + self._path
        await self._app({**scope, "path": root_path + "/", "root_path": root_path}, receive, send)


_SHUTDOWN_FRAME = encode_event(
    RunErrorEvent(message="the bridge is shutting down; try again", code="shutting_down")
)
