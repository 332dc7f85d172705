"""The app's state, shared by every request kind: the configuration, the one pooled upstream
client, the server tools and MCP servers, approvals, telemetry and recording; and what every
kind does alike: authorise, refuse with a JSON error, stream a response, stop at shutdown."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx
from ag_ui.core import RunErrorEvent
from starlette.requests import Request
from starlette.responses import Response

from bridge.config import ANY_UPSTREAM_MODEL, BridgeConfig
from bridge.core.encode import encode_event
from bridge.core.errors import InvalidRunInputError
from bridge.core.upstream_url import url_secrets
from bridge.serve.http.admission import Admission, Slot
from bridge.serve.http.stream import EventStreamResponse, OpenStreams, Produce
from bridge.serve.observe.observation import Telemetry
from bridge.serve.redact import Redactor, install_log_redaction
from bridge.serve.run.props import UpstreamProps
from bridge.serve.run.resume import Approvals
from bridge.serve.threads.keeper import ThreadKeeper
from bridge.serve.threads.owner import OwnerOf
from bridge.serve.threads.stores import thread_store
from bridge.serve.tools.approvals import new_secret
from bridge.serve.tools.ask_user import ask_user_tool
from bridge.serve.tools.claims import StoreWatch, claim_store
from bridge.serve.tools.mcp_tools import McpServer, McpStartError, start_mcp_servers
from bridge.serve.tools.python_tools import python_tool
from bridge.serve.tools.server_tools import ServerTools, load_jsonschema
from bridge.serve.tools.state import update_state_tool
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.pool import UpstreamPool
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
        owner: OwnerOf | None = None,
        upstreams: UpstreamPool | None = None,
    ) -> None:
        self.config = config
        self._transport = transport
        self._pool = upstreams if transport is None else None
        self._upstream: UpstreamClient | None = None
        #: The places among the runs going on (``--max-concurrent-runs``).
        self.admission = Admission(config.max_concurrent_runs)
        self.shutting_down = False
        #: The open SSE responses: their keep-alive timer, the shutdown's stop.
        self.streams = OpenStreams(config.keepalive_interval)
        # Secrets never leave the bridge: every frame, error body, /capabilities and log line.
        # The URLs' own: the upstream's and the approval store's passwords, keys in a query.
        held = (
            *url_secrets(config.upstream_url),
            *url_secrets(config.approval_store),
            *url_secrets(config.threads or ""),
        )
        self.redactor = Redactor((config.api_key, config.auth_token, config.secret, *held))
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
            redactor=self.redactor,
            approve=config.approve,
        )
        if config.ask_user:  # questions to the person (README "Asking the user")
            self.tools.add([ask_user_tool()])
        if config.shared_state:  # the model's edits of a run's state (README "Shared state")
            self.tools.add([update_state_tool()])
        # Interrupts are signed, not stored (README "Approving tools"): with no secret given,
        # one of this process's own, which no other process (nor this one restarted) knows.
        secret = config.secret.encode() if config.secret is not None else new_secret()
        if config.secret is None and (config.approve or self.tools.any_waits):
            logger.warning(
                "no interrupt secret given (--secret-env): approvals use one of this process's "
                "own, so they do not survive a restart or span processes"
            )
        self.approvals = Approvals(
            secret=secret,
            timeout=config.approval_timeout,
            redact=self.redactor.redact,
            claims=claim_store(config.approval_store),
        )
        self._store_watch = StoreWatch(self.approvals.claims)
        #: The threads kept (``--threads``; README "Threads"), or ``None``.
        self.threads: ThreadKeeper | None = None
        if config.threads is not None:
            store = thread_store(
                config.threads,
                ttl=config.thread_ttl,
                max_bytes=config.thread_store_bytes,
                run_timeout=config.run_timeout,
            )
            self.threads = ThreadKeeper(
                config,
                store,
                self.redactor.redact_sliced,
                owner,
                redact_bytes=self.redactor.redact_sliced_bytes,
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
            if tools:  # its import holds the loop a second: not in the loop's thread
                await anyio.to_thread.run_sync(load_jsonschema)
            self.tools.add(tools)

    async def start_for_request(self) -> None:
        """``start()`` for a request (an app mounted where its lifespan does not run): a
        server that cannot be reached is HTTP 503 for this request, tried again by the next."""
        try:
            await self.start()
        except McpStartError as exc:
            raise InvalidRunInputError(str(exc), status=503, code="mcp_unavailable") from exc

    @property
    def mcp_servers(self) -> Sequence[McpServer]:
        """The MCP servers connected at start (none before)."""
        return self._mcp or ()

    @property
    def mcp_unavailable(self) -> list[str]:
        """The MCP servers whose tools cannot be called now: an optional one that could not be
        reached at start, one that died since."""
        return [server.name for server in self.mcp_servers if not server.available]

    async def approval_store_down(self) -> bool:
        """Whether approvals are in use and their store does not answer (``/health``)."""
        in_use = bool(self.config.approve) or self.tools.any_waits
        return in_use and not await self._store_watch.available()

    @property
    def upstream(self) -> UpstreamClient:
        # Created on first use: a sub-app's lifespan does not run when it is mounted.
        if self._upstream is None:
            if self._pool is not None and self.recorder is None:  # a recording's is its own
                self._upstream = self._pool.client(self.config)
            else:
                wrap = self.recorder.wrap if self.recorder is not None else None
                self._upstream = UpstreamClient(self.config, transport=self._transport, wrap=wrap)
        return self._upstream

    async def upstream_models(self) -> list[str]:
        """The upstream's models, when ``--models`` lets any of them be asked for."""
        if ANY_UPSTREAM_MODEL not in self.config.models:
            return []
        return await self.upstream.list_models()

    async def aclose(self) -> None:
        for server in self.mcp_servers:
            await server.aclose()
        # Calls still queued for a thread are dropped; running ones cannot be stopped.
        self._tool_threads.shutdown(wait=False, cancel_futures=True)
        if self._upstream is not None:
            if self._pool is not None and self.recorder is None:
                await self._pool.release(self.config)
            else:
                await self._upstream.aclose()
            self._upstream = None
        if self.threads is not None:
            await self.threads.aclose()
        await self._store_watch.aclose()
        await self.approvals.claims.aclose()
        tracing = self.telemetry.tracing
        if tracing is not None:  # its last spans go out (the exporter's own timeout bounds it)
            await anyio.to_thread.run_sync(tracing.shutdown)

    def begin_shutdown(self, grace: float) -> None:
        """Refuse new runs now; after ``grace`` seconds end the running ones with RUN_ERROR
        ``shutting_down``. Call it on the event loop's thread (a signal handler is)."""
        if not self.shutting_down:
            self.shutting_down = True
            loop = asyncio.get_running_loop()
            # call_soon_threadsafe: safe to schedule from inside a signal handler.
            loop.call_soon_threadsafe(loop.call_later, grace, self.streams.stop)

    @property
    def active_runs(self) -> int:
        """The places taken: runs going on, hydrates and widgets' requests being answered."""
        return self.admission.taken

    def admit(self) -> Slot:
        """A place for a new run, taken before its body is read: not while shutting down,
        nor past ``max_concurrent_runs`` (with threads kept, a run nobody follows gives its
        place to one whose client is there: ``ThreadKeeper.give_way``)."""
        if self.shutting_down:
            raise InvalidRunInputError(
                "the bridge is shutting down", status=503, code="shutting_down"
            )
        keeper = self.threads
        return self.admission.take(keeper.give_way if keeper is not None else None)

    def authorize(self, request: Request) -> None:
        token = self.config.auth_token
        if token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # compare_digest: the time taken must not tell how much of a guess was right.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.encode()):
            raise InvalidRunInputError(
                "this bridge needs Authorization: Bearer <token>", status=401, code="unauthorized"
            )

    def event_stream(
        self,
        produce: Produce,
        slot: Slot,
        ended: Callable[[EventStreamResponse], None] | None = None,
    ) -> EventStreamResponse:
        """A run's SSE response, holding its place (``slot``) until it ends (``ended`` is
        told then); the shutdown's RUN_ERROR ends it once the grace is over. ``produce``
        writes its frames."""
        slot.hand_over()

        def closed(response: EventStreamResponse) -> None:
            slot.release()
            if ended is not None:
                ended(response)

        return EventStreamResponse(
            produce,
            streams=self.streams,
            stop_frame=_SHUTDOWN_FRAME,
            on_close=closed,
        )

    def follow_stream(self, produce: Produce, slot: Slot | None = None) -> EventStreamResponse:
        """The SSE response of a client following a kept run (``bridge.serve.http.threads``):
        not a run of its own (the run is counted as it goes, followed or not), but a hydrate's
        place (``slot``) until its snapshot is sent, or it ends; the shutdown ends it as it
        ends the runs'."""
        return EventStreamResponse(
            produce,
            streams=self.streams,
            stop_frame=_SHUTDOWN_FRAME,
            on_close=(lambda _: slot.release()) if slot is not None else None,
        )

    def refused(self, exc: InvalidRunInputError) -> Response:
        """A request refused with its HTTP error, counted (``Retry-After`` on a 503, the scheme
        asked for on a 401)."""
        self.telemetry.refused(exc.status, exc.code)
        headers = {"Retry-After": "1"} if exc.status == 503 else None
        if exc.status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        return self.error_response(exc.status, exc.code, exc.message, headers=headers)

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


_SHUTDOWN_FRAME = encode_event(
    RunErrorEvent(message="the bridge is shutting down; try again", code="shutting_down")
)
