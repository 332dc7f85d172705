"""What the bridge tells about its runs: Prometheus metrics (``--metrics``,
``bridge.serve.observe.metrics``), OpenTelemetry spans (``--otel``,
``bridge.serve.observe.otel``, with the ``otel`` extra) and one log line per run (README
"Observability").

A run's ``RunObservation`` gathers its facts where they happen: the response's batches
(``sent``: the first event, the terminal one), each upstream request (``turn``: its answers,
retries, first output, usage), each server tool (``tool``), and the response's end (``end``:
bytes sent, a client that went away). Nothing here runs per token but a counter's increment and
one comparison: the rest is per batch, per request or per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    ToolCall,
)

from bridge.config import BridgeConfig, LogFormat
from bridge.core.errors import BridgeError, UpstreamConnectionError, UpstreamHTTPError
from bridge.core.translate import TurnOutcome
from bridge.serve.observe.facts import RunFacts, ToolOutcome
from bridge.serve.observe.log import log_proxied, log_run, log_thread

if TYPE_CHECKING:  # imported only where they are used: metrics and tracing are optional
    from bridge.serve.observe.metrics import Metrics
    from bridge.serve.observe.otel import ChatSpan, RunSpan, ToolSpan, Tracing


class Telemetry:
    """The app's telemetry: its metrics and tracer (each ``None`` when off), the run line's
    form, and the redaction every text that leaves goes through."""

    def __init__(
        self,
        *,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        log_format: LogFormat = "text",
        redact: Callable[[str], str] = str,
    ) -> None:
        self.metrics = metrics
        self.tracing = tracing
        self.log_format = log_format
        self.redact = redact

    @classmethod
    def from_config(cls, config: BridgeConfig, redact: Callable[[str], str]) -> Telemetry:
        """The app's telemetry by its configuration; OpenTelemetry is imported only when
        tracing is on, prometheus-client only with metrics."""
        metrics = tracing = None
        if config.metrics:
            from bridge.serve.observe.metrics import Metrics

            metrics = Metrics()
        if config.otel:
            from bridge.serve.observe.otel import Tracing

            tracing = Tracing(
                upstream_url=config.upstream_url, content=config.otel_content, redact=redact
            )
        return cls(metrics=metrics, tracing=tracing, log_format=config.log_format, redact=redact)

    def run(
        self,
        *,
        thread_id: str,
        run_id: str,
        model: str,
        protocol: str,
        received: float,
        headers: Mapping[str, str] = {},
    ) -> RunObservation:
        """A run begins (``received``: ``time.perf_counter()`` when its request came in)."""
        return RunObservation(
            self,
            thread_id=thread_id,
            run_id=run_id,
            model=model,
            protocol=protocol,
            received=received,
            headers=headers,
        )

    def refused(self, status: int, code: str) -> None:
        """A request answered with an HTTP error instead of a run."""
        if self.metrics is not None:
            self.metrics.refused(status, code)

    def thread(self, kind: str, thread_id: str, run_id: str, replayed: int = 0) -> None:
        """A request of threads kept (``bridge.serve.observe.log.log_thread``)."""
        if self.metrics is not None:
            self.metrics.thread(kind, replayed)
        log_thread(kind, thread_id, run_id, replayed)

    def proxied(self, server: str, method: str, outcome: str, duration: float) -> None:
        """An MCP App widget's request answered (a run of its own kind: no model, no turn)."""
        if self.metrics is not None:
            self.metrics.proxied(server, method, outcome)
        log_proxied(server, method, outcome, duration)


class RunObservation(RunFacts):
    """One run's facts, gathered as it goes and told once it ends (``end``)."""

    def __init__(
        self,
        telemetry: Telemetry,
        *,
        thread_id: str,
        run_id: str,
        model: str,
        protocol: str,
        received: float,
        headers: Mapping[str, str],
    ) -> None:
        super().__init__(
            thread_id=thread_id, run_id=run_id, model=model, protocol=protocol, received=received
        )
        self._telemetry = telemetry
        self.metrics = telemetry.metrics
        self.span: RunSpan | None = None
        if telemetry.tracing is not None:
            self.span = telemetry.tracing.run(
                headers, thread_id=thread_id, run_id=run_id, model=model
            )
        if self.metrics is not None:
            self.metrics.run_started(model)

    @property
    def capture_content(self) -> bool:
        """Whether the spans carry message content (``--otel-content``)."""
        return self.span is not None and self.span.content

    def sent(self, batch: Sequence[BaseEvent]) -> None:
        """A batch of the run's events goes to the client."""
        if self.first_event is None:
            self.first_event = time.perf_counter()
        last = batch[-1] if batch else None
        if isinstance(last, RunFinishedEvent):
            interrupted = last.outcome is not None and last.outcome.type == "interrupt"
            self.outcome = "interrupted" if interrupted else "finished"
        elif isinstance(last, RunErrorEvent):
            self.outcome, self.code = "error", last.code or "error"

    def turn(self, body: Mapping[str, Any]) -> TurnObservation:
        """An upstream request of the run begins (one per model turn)."""
        self.upstream_requests += 1
        return TurnObservation(self, body)

    def tool(self, call: ToolCall) -> ToolObservation:
        """A server tool's call begins."""
        return ToolObservation(self, call)

    def tool_calls_left(self, names: Sequence[str], outcome: ToolOutcome) -> None:
        """Calls that did not run here: left to the frontend (``handed_off``), waiting for a
        person (``awaiting_approval``) or declined by one (``rejected``)."""
        self.tool_calls += len(names)
        if self.metrics is not None:
            side = "frontend" if outcome == "handed_off" else "server"
            for name in names:
                self.metrics.tool_call(name, side, outcome)

    def state_update(self, outcome: str) -> None:
        """An ``update_state`` call: ``applied``, or why not (``invalid``, ``schema``,
        ``too_large``)."""
        if outcome == "applied":
            self.state_updates += 1
        if self.metrics is not None:
            self.metrics.state_update(outcome)

    def end(self, *, bytes_sent: int, disconnected: bool, stopped: bool) -> None:
        """The response is over (``stopped``: ended by the shutdown's RUN_ERROR)."""
        now = time.perf_counter()
        if stopped:  # the shutdown's RUN_ERROR went out in place of the run's own end
            self.outcome, self.code = "error", "shutting_down"
        duration = now - self.received
        metrics = self.metrics
        if metrics is not None:
            metrics.run_ended(self, duration, disconnected=disconnected)
        if self.span is not None:
            self.span.end(self)
        log_run(self, duration, bytes_sent, self._telemetry.redact, self._telemetry.log_format)


class TurnObservation:
    """One upstream request: its HTTP answers (``answered``, one per attempt), its retries and
    resends, its first output (``output``), its end (``end``)."""

    def __init__(self, run: RunObservation, body: Mapping[str, Any]) -> None:
        self._run = run
        self.model = str(body.get("model") or run.model)
        self.started = time.perf_counter()
        self.first_output: float | None = None
        self.chunks = 0
        self.status: int | None = None
        self.span: ChatSpan | None = None
        if run.span is not None:
            self.span = run.span.chat(self.model, body)

    def headers(self) -> dict[str, str]:
        """The trace context the upstream request carries (W3C ``traceparent``)."""
        return self.span.headers() if self.span is not None else {}

    def answered(self, status: int) -> None:
        """The upstream answered this attempt with an HTTP status."""
        self.status = status
        if self._run.metrics is not None:
            self._run.metrics.upstream_answered(self._run.model, str(status))

    def retry(self) -> None:
        self._run.upstream_retries += 1
        if self._run.metrics is not None:
            self._run.metrics.upstream_retry(self._run.model)

    @property
    def resends(self) -> int:
        """The run's resends so far, all its requests together: the transport's budget."""
        return self._run.upstream_resends

    def resent(self) -> None:
        """The request went out again at once on a new connection (the transport's resend)."""
        self._run.upstream_resends += 1
        if self._run.metrics is not None:
            self._run.metrics.upstream_resend(self._run.model)

    def content(self, events: Sequence[BaseEvent]) -> None:
        """The turn's answer text, for its span (``--otel-content`` only)."""
        if self.span is not None:
            self.span.output.extend(
                event.delta for event in events if isinstance(event, TextMessageContentEvent)
            )

    def output(self) -> None:
        """The turn's first output reached the translator: the time to first token."""
        now = time.perf_counter()
        self.first_output = now
        run = self._run
        if run.time_to_first_token is None:
            run.time_to_first_token = now - run.received
        if run.metrics is not None:
            run.metrics.first_token(run.model, now - self.started)

    def end(
        self, outcome: TurnOutcome, error: BridgeError | None, *, cancelled: bool = False
    ) -> None:
        """The turn is over: answered, failed (``error``), or ``cancelled`` with its run."""
        run = self._run
        usage = outcome.usage
        if usage is not None:
            run.tokens["input"] += usage.input_tokens or 0
            run.tokens["output"] += usage.output_tokens or 0
            run.tokens["reasoning"] += usage.reasoning_tokens or 0
            run.tokens["cached_input"] += usage.cached_input_tokens or 0
        kind = failure_kind(error) if error is not None else None
        if run.metrics is not None:
            if self.status is None and error is not None:  # no HTTP answer at all
                run.metrics.upstream_answered(run.model, "none")
            run.metrics.turn_ended(run.model, self.chunks, usage, kind)
        if self.span is not None:
            first = None if self.first_output is None else self.first_output - self.started
            self.span.end(outcome, error, kind, first, self.status, cancelled=cancelled)


def failure_kind(error: BridgeError) -> str:
    """How an upstream request failed, in a word: the connection's reason (``refused``,
    ``dns``, ``tls``, ``closed``, ``connect``), ``http``, or the error's code."""
    if isinstance(error, UpstreamConnectionError):
        return error.reason or "connect"
    if isinstance(error, UpstreamHTTPError):
        return "http"
    return error.code


class ToolObservation:
    """One server tool's call, from its start to ``end``."""

    def __init__(self, run: RunObservation, call: ToolCall) -> None:
        self._run = run
        self.name = call.function.name
        self.started = time.perf_counter()
        self.span: ToolSpan | None = None
        if run.span is not None:
            self.span = run.span.tool(call)

    def end(self, outcome: ToolOutcome, result: str) -> None:
        run = self._run
        run.tool_calls += 1
        if run.metrics is not None:
            run.metrics.tool_call(self.name, "server", outcome)
            run.metrics.tool_duration(self.name, time.perf_counter() - self.started)
        if self.span is not None:
            self.span.end(outcome, result)
