"""``/metrics``: the bridge's Prometheus metrics, by the official ``prometheus-client``, in a
registry of the app's own (README "Observability" lists them).

Label values stay bounded: ``model`` is one the bridge serves (the request was checked against
``--model``/``--models`` or the upstream's list before a run begins); ``tool`` is a server
tool's name (the app's own), or a frontend tool's name up to ``MAX_FRONTEND_TOOLS`` distinct
names, ``other`` after; ``code`` is one of the bridge's error codes.
"""

from __future__ import annotations

import os

from ag_ui.core import TokenUsage
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    multiprocess,
)
from prometheus_client.exposition import choose_encoder

from bridge import __version__
from bridge.serve.observe.facts import RunFacts

#: Distinct frontend tool names labelled as such; the client chooses them, so more are ``other``.
MAX_FRONTEND_TOOLS = 100

_LATENCY = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
_FIRST_EVENT = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_RUN = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_TOOL = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The app's metrics and their registry."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        #: prometheus-client's multiprocess mode (``serve --workers``): each worker's values go
        #: to this folder, and ``/metrics`` reports them all, from whichever worker answers.
        self.multiprocess_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
        if self.multiprocess_dir is None:  # a process's own: meaningless summed over workers
            ProcessCollector(registry=registry)  # process_cpu_seconds_total, RSS, open fds
            PlatformCollector(registry=registry)
        info = Gauge(
            "agui_bridge_info",
            "The bridge's version.",
            ["version"],
            registry=registry,
            multiprocess_mode="max",
        )
        info.labels(__version__).set(1)
        self.runs_started = Counter(
            "agui_bridge_runs_started", "Runs begun.", ["model"], registry=registry
        )
        self.runs_in_flight = Gauge(
            "agui_bridge_runs_in_flight",
            "Runs streaming now.",
            ["model"],
            registry=registry,
            multiprocess_mode="livesum",  # the live workers' sum
        )
        self.runs_ended = Counter(
            "agui_bridge_runs_ended",
            "Runs ended, by outcome (finished, error, cancelled, interrupted) and error code.",
            ["model", "outcome", "code"],
            registry=registry,
        )
        self.run_duration = Histogram(
            "agui_bridge_run_duration_seconds",
            "From the request to the run's end.",
            ["model", "outcome"],
            buckets=_RUN,
            registry=registry,
        )
        self.ttft = Histogram(
            "agui_bridge_time_to_first_token_seconds",
            "From an upstream request to its first output (gen_ai.client.operation."
            "time_to_first_chunk).",
            ["model"],
            buckets=_LATENCY,
            registry=registry,
        )
        self.first_event = Histogram(
            "agui_bridge_time_to_first_event_seconds",
            "From the request to the first event sent.",
            ["model"],
            buckets=_FIRST_EVENT,
            registry=registry,
        )
        self.tokens = Counter(
            "agui_bridge_tokens",
            "Tokens by kind (input, output, reasoning, cached_input) from the upstream's usage "
            "(gen_ai.client.token.usage).",
            ["model", "kind"],
            registry=registry,
        )
        self.chunks = Counter(
            "agui_bridge_output_chunks",
            "Stream chunks read from the upstream.",
            ["model"],
            registry=registry,
        )
        self.upstream_requests = Counter(
            "agui_bridge_upstream_requests",
            "Upstream requests' answers by HTTP status (each attempt; none: no answer).",
            ["model", "status"],
            registry=registry,
        )
        self.upstream_failures = Counter(
            "agui_bridge_upstream_failures",
            "Upstream requests that failed, by kind (refused, dns, tls, connect, closed, http, "
            "upstream_timeout, upstream_truncated, bad_upstream_chunk, upstream_error).",
            ["model", "kind"],
            registry=registry,
        )
        self.retries = Counter(
            "agui_bridge_upstream_retries",
            "Upstream requests tried again.",
            ["model"],
            registry=registry,
        )
        self.resends = Counter(
            "agui_bridge_upstream_resends",
            "Upstream requests sent again at once on a new connection: a pooled one closed "
            "before any answer (not retries).",
            ["model"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "agui_bridge_tool_calls",
            "Tool calls by tool, side (frontend, server) and outcome.",
            ["tool", "side", "outcome"],
            registry=registry,
        )
        self.tool_seconds = Histogram(
            "agui_bridge_tool_duration_seconds",
            "Server tools' run time.",
            ["tool"],
            buckets=_TOOL,
            registry=registry,
        )
        self.disconnects = Counter(
            "agui_bridge_client_disconnects",
            "Clients that went away before their run's end.",
            ["model"],
            registry=registry,
        )
        self.refusals = Counter(
            "agui_bridge_requests_refused",
            "Requests answered with an HTTP error instead of a run, by status and code.",
            ["status", "code"],
            registry=registry,
        )
        self.proxied_requests = Counter(
            "agui_bridge_proxied_mcp_requests",
            "MCP App widgets' requests answered without the model, by server, method "
            "(resources/read, tools/call, notifications/message, ping) and outcome (ok, "
            "refused, error).",
            ["server", "method", "outcome"],
            registry=registry,
        )
        self.state_updates = Counter(
            "agui_bridge_state_updates",
            "The model's update_state calls (--shared-state), by outcome: applied, invalid (the "
            "patch does not apply), schema (it breaks --state-schema), too_large (over "
            "--max-state-bytes), too_deep (deeper than a client may send back).",
            ["outcome"],
            registry=registry,
        )
        self.thread_requests = Counter(
            "agui_bridge_thread_requests",
            "Threads kept (--threads), by kind: hydrate (a thread given back), reconnect (a "
            "run followed again), cancel (a run stopped by its owner), unfollowed (a run that "
            "ended with no client following it), abandoned (cancelled after --run-grace).",
            ["kind"],
            registry=registry,
        )
        self.events_replayed = Counter(
            "agui_bridge_events_replayed",
            "Events sent again to a client that came back (a reconnect, a hydrate that follows "
            "a run going on).",
            registry=registry,
        )
        self._frontend_tools: set[str] = set()

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition body and its content type (OpenMetrics when the scraper asks)."""
        encoder, content_type = choose_encoder(accept or "")
        if self.multiprocess_dir is None:
            return encoder(self.registry), content_type
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return encoder(registry), content_type

    def run_started(self, model: str) -> None:
        self.runs_started.labels(model).inc()
        self.runs_in_flight.labels(model).inc()

    def run_ended(self, run: RunFacts, duration: float, *, disconnected: bool) -> None:
        model = run.model
        self.runs_in_flight.labels(model).dec()
        self.runs_ended.labels(model, run.outcome, run.code).inc()
        self.run_duration.labels(model, run.outcome).observe(duration)
        if run.first_event is not None:
            self.first_event.labels(model).observe(run.first_event - run.received)
        if disconnected:
            self.disconnects.labels(model).inc()

    def first_token(self, model: str, seconds: float) -> None:
        self.ttft.labels(model).observe(seconds)

    def upstream_answered(self, model: str, status: str) -> None:
        self.upstream_requests.labels(model, status).inc()

    def upstream_retry(self, model: str) -> None:
        self.retries.labels(model).inc()

    def upstream_resend(self, model: str) -> None:
        self.resends.labels(model).inc()

    def turn_ended(
        self, model: str, chunks: int, usage: TokenUsage | None, failure: str | None
    ) -> None:
        if chunks:
            self.chunks.labels(model).inc(chunks)
        if usage is not None:
            for kind, count in (
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("reasoning", usage.reasoning_tokens),
                ("cached_input", usage.cached_input_tokens),
            ):
                if count:
                    self.tokens.labels(model, kind).inc(count)
        if failure is not None:
            self.upstream_failures.labels(model, failure).inc()

    def tool_call(self, name: str, side: str, outcome: str) -> None:
        if side == "frontend" and name not in self._frontend_tools:
            if len(self._frontend_tools) >= MAX_FRONTEND_TOOLS:
                name = "other"
            else:
                self._frontend_tools.add(name)
        self.tool_calls.labels(name, side, outcome).inc()

    def tool_duration(self, name: str, seconds: float) -> None:
        self.tool_seconds.labels(name).observe(seconds)

    def refused(self, status: int, code: str) -> None:
        self.refusals.labels(str(status), code).inc()

    def proxied(self, server: str, method: str, outcome: str) -> None:
        self.proxied_requests.labels(server, method, outcome).inc()

    def state_update(self, outcome: str) -> None:
        self.state_updates.labels(outcome).inc()

    def thread(self, kind: str, replayed: int) -> None:
        self.thread_requests.labels(kind).inc()
        if replayed:
            self.events_replayed.inc(replayed)
