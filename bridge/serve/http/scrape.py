"""``GET /metrics`` (``--metrics``): the Prometheus scrape, behind the auth token unless
``--metrics-public``. The metrics themselves are ``bridge.serve.observe.metrics``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bridge.core.errors import InvalidRunInputError
from bridge.serve.http.bridge import Bridge


async def scrape(bridge: Bridge, request: Request) -> Response:
    metrics = bridge.telemetry.metrics
    if metrics is None:
        return bridge.error_response(404, "not_found", "metrics are off (serve --metrics)")
    if not bridge.config.metrics_public:
        try:
            bridge.authorize(request)
        except InvalidRunInputError as exc:
            return bridge.refused(exc)
    body, content_type = metrics.render(request.headers.get("accept"))
    # Redacted like every body: a label value (a frontend tool's name) is the client's text.
    return Response(bridge.redactor.redact(body.decode()), media_type=content_type)
