"""OpenTelemetry traces by the GenAI semantic conventions (README "Observability"), with the
``otel`` extra: imported only when tracing is on.

Per run an ``invoke_agent agui-bridge`` span, the child of the request's W3C ``traceparent`` if
it carries one; under it a ``chat <model>`` span (kind CLIENT) per upstream request, whose
context the request carries on, and an ``execute_tool <name>`` span per server tool call.
Message content goes on the spans only with ``--otel-content``; without it a failed span's status
says the error's code, never its message (an upstream's error may quote the prompt). Every text
from outside is redacted, then made one line (``bridge.core.oneline``).

The exporter follows the SDK's environment variables: ``OTEL_TRACES_EXPORTER`` (``otlp``, the
default, ``console`` or ``none``), ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``, ``_HEADERS``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_BSP_*``. A tracer provider the
host app has set already (logfire, its own SDK setup) is used as it is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

try:
    from opentelemetry import propagate, trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "OpenTelemetry tracing (--otel) needs the otel extra: pip install 'agui-bridge[otel]'"
    ) from exc

from ag_ui.core import ToolCall

from bridge import __version__
from bridge.core.errors import BridgeError, UpstreamHTTPError
from bridge.core.oneline import json_line, one_line
from bridge.core.translate import TurnOutcome
from bridge.serve.observe.facts import RunFacts, ToolOutcome

AGENT_NAME = "agui-bridge"

#: gen_ai.provider.name for the upstreams the conventions name; any other server speaks the
#: OpenAI API and is named so.
_PROVIDERS = {
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "openrouter.ai": "openrouter",
}


class Tracing:
    """The app's tracer, on the host app's provider or on one of its own (``shutdown`` flushes
    and closes only its own)."""

    def __init__(
        self, *, upstream_url: str, content: bool = False, redact: Callable[[str], str] = str
    ) -> None:
        self.content = content
        #: Every text a span carries goes through it (an upstream's error quoting the key).
        self._redact = redact
        url = urlsplit(upstream_url)
        self.server_address = url.hostname or ""
        self.server_port = url.port or (443 if url.scheme == "https" else 80)
        self.provider_name = _PROVIDERS.get(self.server_address, "openai_compatible")
        current = trace.get_tracer_provider()
        self._own: TracerProvider | None = None
        if isinstance(current, TracerProvider):
            provider: trace.TracerProvider = current
        else:
            self._own = provider = _provider_from_environment()
        self._tracer = provider.get_tracer("agui-bridge", __version__)

    def shutdown(self) -> None:
        if self._own is not None:
            self._own.shutdown()

    def text(self, value: str) -> str:
        """A text from outside (an id, a name, an error) as a span carries it: redacted, one
        line."""
        return one_line(self._redact(value))

    def json(self, value: Any) -> str:
        """Content (with ``--otel-content``) as a span carries it: JSON, redacted, one line."""
        return json_line(self._redact(_json(value)))

    def run(
        self, headers: Mapping[str, str], *, thread_id: str, run_id: str, model: str
    ) -> RunSpan:
        # Inside a host app's own span (its ASGI instrumentation), nest there; else the
        # request's traceparent, if any, is the parent.
        current = trace.get_current_span().get_span_context()
        parent = None if current.is_valid else propagate.extract(headers)
        span = self._tracer.start_span(
            f"invoke_agent {AGENT_NAME}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.provider.name": self.provider_name,
                "gen_ai.request.model": self.text(model),
                "gen_ai.conversation.id": self.text(thread_id),
                "agui.run.id": self.text(run_id),
            },
        )
        return RunSpan(self, span, self.text(thread_id))

    def _child(self, parent: Span, name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        context = trace.set_span_in_context(parent)
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attributes)


class RunSpan:
    """A run's ``invoke_agent`` span and the makers of its children."""

    def __init__(self, tracing: Tracing, span: Span, thread_id: str) -> None:
        self._tracing = tracing
        self._span = span
        self._thread_id = thread_id
        self.content = tracing.content

    def chat(self, model: str, body: Mapping[str, Any]) -> ChatSpan:
        tracing = self._tracing
        model = tracing.text(model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": tracing.provider_name,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": self._thread_id,
            "server.address": tracing.server_address,
            "server.port": tracing.server_port,
        }
        for key, name in _REQUEST_PARAMETERS.items():
            value = body.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[name] = value
        if self.content:
            messages = body.get("messages")
            if isinstance(messages, list):
                inputs = tracing.json(list(map(_input_message, messages)))
            else:  # the Responses API's input items, as they went
                inputs = tracing.json(body.get("input"))
            attributes["gen_ai.input.messages"] = inputs
            if body.get("tools"):
                attributes["gen_ai.tool.definitions"] = tracing.json(body["tools"])
        span = tracing._child(self._span, f"chat {model}", SpanKind.CLIENT, attributes)
        return ChatSpan(span, self.content, tracing)

    def tool(self, call: ToolCall) -> ToolSpan:
        tracing = self._tracing
        name = tracing.text(call.function.name)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": tracing.text(call.id),
            "gen_ai.tool.type": "function",
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = tracing.text(call.function.arguments)
        span = tracing._child(self._span, f"execute_tool {name}", SpanKind.INTERNAL, attributes)
        return ToolSpan(span, self.content, tracing)

    def end(self, run: RunFacts) -> None:
        span = self._span
        span.set_attribute("agui.run.outcome", run.outcome)
        for kind, name in _USAGE.items():
            if run.tokens[kind]:
                span.set_attribute(name, run.tokens[kind])
        if run.outcome == "error":
            span.set_attribute("error.type", run.code)
            span.set_status(Status(StatusCode.ERROR, run.code))
        elif run.outcome == "cancelled":
            span.set_attribute("error.type", "cancelled")
        span.end()


class ChatSpan:
    """An upstream request's ``chat`` span."""

    def __init__(self, span: Span, content: bool, tracing: Tracing) -> None:
        self._span = span
        self._content = content
        self._tracing = tracing
        self.output: list[str] = []  # the turn's text, with --otel-content

    def headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self._span))
        return carrier

    def end(
        self,
        outcome: TurnOutcome,
        error: BridgeError | None,
        failure: str | None,
        first_chunk: float | None,
        status: int | None,
        *,
        cancelled: bool = False,
    ) -> None:
        span = self._span
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if outcome.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [outcome.finish_reason])
        usage = outcome.usage
        if usage is not None:
            for field, name in _TOKEN_FIELDS.items():
                value = getattr(usage, field)
                if value is not None:
                    span.set_attribute(name, value)
        if first_chunk is not None:
            span.set_attribute("gen_ai.response.time_to_first_chunk", first_chunk)
        if self._content and (self.output or outcome.tool_call_ids):
            parts: list[dict[str, Any]] = []
            if self.output:
                parts.append({"type": "text", "content": "".join(self.output)})
            for call_id, name in zip(outcome.tool_call_ids, outcome.tool_call_names, strict=True):
                parts.append({"type": "tool_call", "id": call_id, "name": name})
            message = {"role": "assistant", "parts": parts}
            if outcome.finish_reason:
                message["finish_reason"] = outcome.finish_reason
            span.set_attribute("gen_ai.output.messages", self._tracing.json([message]))
        if error is not None:
            # An HTTP error by its status, as OpenTelemetry's HTTP conventions have it.
            kind = str(error.status) if isinstance(error, UpstreamHTTPError) else failure
            span.set_attribute("error.type", kind or error.code)
            # The message is the upstream's words, which may quote the prompt: content.
            said = self._tracing.text(error.message) if self._content else error.code
            span.set_status(Status(StatusCode.ERROR, said))
        elif cancelled:
            span.set_attribute("error.type", "cancelled")
        span.end()


class ToolSpan:
    """A server tool call's ``execute_tool`` span."""

    def __init__(self, span: Span, content: bool, tracing: Tracing) -> None:
        self._span = span
        self._content = content
        self._tracing = tracing

    def end(self, outcome: ToolOutcome, result: str) -> None:
        span = self._span
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", self._tracing.text(result))
        if outcome != "ok":
            span.set_attribute("error.type", outcome)
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end()


_REQUEST_PARAMETERS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
}
_TOKEN_FIELDS = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
}
_USAGE = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "reasoning": "gen_ai.usage.reasoning.output_tokens",
    "cached_input": "gen_ai.usage.cache_read.input_tokens",
}


def _input_message(message: Any) -> Any:
    """A Chat Completions message in the GenAI conventions' form: its role and its parts
    (``text``, ``reasoning``, ``tool_call``, ``tool_call_response``; other content as it is)."""
    if not isinstance(message, dict):
        return message
    role = message.get("role")
    parts: list[Any] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    content = message.get("content")
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}
        )
    elif isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for item in content:
            text = item.get("text") if isinstance(item, dict) else None
            parts.append({"type": "text", "content": text} if isinstance(text, str) else item)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id") if isinstance(call, dict) else None,
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return {"role": role, "parts": parts}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _provider_from_environment() -> TracerProvider:
    """A provider of the bridge's own, its exporters named by ``OTEL_TRACES_EXPORTER``."""
    resource = Resource.create(
        {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: AGENT_NAME}
    )
    provider = TracerProvider(resource=resource)
    names = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
    for name in filter(None, (part.strip().lower() for part in names.split(","))):
        if name == "none":
            continue
        processor: SpanProcessor = BatchSpanProcessor(_exporter(name))
        provider.add_span_processor(processor)
    return provider


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValueError(
            f"OTEL_TRACES_EXPORTER={name!r}: the bridge exports traces with otlp, console or none"
        )
    protocol = os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if protocol and protocol != "http/protobuf":
        raise ValueError(
            f"OTLP protocol {protocol!r}: the otel extra exports over http/protobuf; set "
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (and the collector's HTTP port, 4318)"
        )
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ValueError(
            "tracing needs the OTLP/HTTP exporter: pip install 'agui-bridge[otel]'"
        ) from exc
    return OTLPSpanExporter()
