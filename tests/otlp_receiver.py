"""A real OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest`` (gzip or deflate as the exporter may send it), on uvicorn on
127.0.0.1. It keeps each span as a plain dict (``ReceivedSpan``) and lets a test wait for them.

Needs ``opentelemetry-proto``, which comes with the ``otel`` extra's OTLP/HTTP exporter.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from servers import serve

PROTOBUF = "application/x-protobuf"


class ReceivedSpan(TypedDict):
    """One span as the receiver got it; ids in lowercase hex (``parent_span_id`` is ``""`` for
    a root), ``kind`` and ``status`` as the proto's names less their prefix (``"CLIENT"``,
    ``"ERROR"``), times in Unix nanoseconds."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    status: str
    status_message: str
    start_ns: int
    end_ns: int
    scope: str
    resource: dict[str, Any]


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as Python: arrays as lists, key-value lists as dicts."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, which)


def attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


def _span(span: Span, scope: str, resource: dict[str, Any]) -> ReceivedSpan:
    return {
        "name": span.name,
        "kind": Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "attributes": attributes(span.attributes),
        "status": Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
        "status_message": span.status.message,
        "start_ns": span.start_time_unix_nano,
        "end_ns": span.end_time_unix_nano,
        "scope": scope,
        "resource": resource,
    }


class OtlpReceiver:
    """The spans received so far (``spans``), and ``wait`` for more."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.encodings: list[str] = []  # each export's Content-Encoding ("" when none)
        self._changed = threading.Condition()
        self.app = Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])

    async def _traces(self, request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != PROTOBUF:
            return PlainTextResponse("only application/x-protobuf", status_code=415)
        body = await request.body()
        encoding = request.headers.get("content-encoding", "").strip().lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding:
                return PlainTextResponse(f"unknown encoding {encoding}", status_code=415)
            export = ExportTraceServiceRequest.FromString(body)
        except (OSError, zlib.error, DecodeError) as exc:
            return PlainTextResponse(f"undecodable: {exc}", status_code=400)
        received: list[ReceivedSpan] = []
        for resource_spans in export.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                scope = scope_spans.scope.name
                received += [_span(span, scope, resource) for span in scope_spans.spans]
        with self._changed:
            self.encodings.append(encoding)
            self.spans.extend(received)
            self._changed.notify_all()
        reply = ExportTraceServiceResponse().SerializeToString()
        return Response(reply, media_type=PROTOBUF)

    def wait(
        self, done: Callable[[list[ReceivedSpan]], bool], *, timeout: float = 15
    ) -> list[ReceivedSpan]:
        """The spans received, once ``done(spans)`` holds; AssertionError, showing what did
        arrive, if it does not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = [(s["name"], s["trace_id"]) for s in self.spans]
                    raise AssertionError(f"the spans awaited did not arrive; got {names}")
                self._changed.wait(left)
            return list(self.spans)

    def wait_for_spans(
        self, count: int = 1, *, name: str | None = None, trace_id: str | None = None
    ) -> list[ReceivedSpan]:
        """Once ``count`` spans (named ``name``, in trace ``trace_id``, if given) arrived: those."""

        def matching(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
            return [
                s
                for s in spans
                if (name is None or s["name"] == name)
                and (trace_id is None or s["trace_id"] == trace_id)
            ]

        return matching(self.wait(lambda spans: len(matching(spans)) >= count))


@contextmanager
def otlp_receiver() -> Iterator[tuple[OtlpReceiver, str]]:
    """A running receiver and its base URL (what ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes; the
    exporter appends ``/v1/traces``)."""
    receiver = OtlpReceiver()
    with serve(receiver.app) as url:
        yield receiver, url
