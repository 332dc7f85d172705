"""An upstream's failures in the bridge's words: every httpx failure is translated here, once,
into the bridge's error hierarchy (``bridge.core.errors``), saying what failed where (the host
and port, the URL of a 404, the certificate, the refused port) and, for an HTTP error, in the
upstream's own words when it has some."""

from __future__ import annotations

import email.utils
import socket
import ssl
import time

import httpx

from bridge.config import BridgeConfig
from bridge.core.errors import (
    MAX_MESSAGE_CHARS,
    BridgeError,
    UpstreamConnectionError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamTruncatedError,
)
from bridge.core.upstream_url import shown_url, upstream_url_hint
from bridge.serve.upstream.parse import parse_json
from bridge.serve.upstream.transport import failure_kind

# An error body is read for its message only; a server sending megabytes of HTML is cut off.
_MAX_ERROR_BODY = 64 * 1024


class UpstreamFailures:
    """How the failures of one upstream (``origin``, called at ``base``) read."""

    def __init__(self, config: BridgeConfig, origin: httpx.URL, base: str) -> None:
        self._config = config
        self._origin = origin
        self._base = base

    @property
    def where(self) -> str:
        default_port = 443 if self._origin.scheme == "https" else 80
        return f"{self._origin.host}:{self._origin.port or default_port}"

    async def http_error(self, response: httpx.Response) -> UpstreamHTTPError:
        raw = b""
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) >= _MAX_ERROR_BODY:
                break
        body = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
        words = _error_message(raw[:_MAX_ERROR_BODY])
        if response.status_code == 404:
            message = self._not_found(response.request, words)
        else:
            status = f"{response.status_code} {response.reason_phrase}".strip()
            message = words or f"the upstream answered HTTP {status}"
        retry_after = _retry_after(response.headers.get("retry-after"))
        if retry_after is not None:
            message = f"{message} (the upstream asks to retry after {retry_after:.0f} s)"
        return UpstreamHTTPError(response.status_code, message, body=body, retry_after=retry_after)

    def _not_found(self, request: httpx.Request, words: str | None) -> str:
        """A 404 about the URL (no words of the upstream's own, or only "Not Found") names the
        URL called; any 404 also names the base URL probably meant when ``--upstream-url`` lacks
        its version segment (``…:8080`` for ``…:8080/v1``), the usual cause. A 404 in words of
        its own (an unknown model) is left to say it alone otherwise."""
        called = f"{request.method} {shown_url(str(request.url))}"
        hint = upstream_url_hint(self._base)
        where = f"{called}; {hint}" if hint else called
        words = " ".join(words.split()) if words else None
        if words is None or words.lower().removeprefix("404 ") in _NOT_FOUND_WORDS:
            return f"the upstream answered HTTP 404 Not Found to {where}"
        if hint is None:
            return words
        room = MAX_MESSAGE_CHARS - len(where) - 3  # the URL and the hint survive a long message
        return f"{words if len(words) <= room else words[: room - 1] + '…'} ({where})"

    def translate(self, exc: BaseException, *, answering: bool = True) -> BridgeError:
        kind = failure_kind(exc)
        if kind == "connect_timeout":
            return UpstreamTimeoutError(
                f"could not connect to the upstream at {self.where} within "
                f"{self._config.connect_timeout:g} s"
            )
        if kind == "read_timeout":
            return UpstreamTimeoutError(
                f"the upstream at {self.where} sent nothing for {self._config.idle_timeout:g} s"
            )
        if kind == "connect":
            reason, why = _connect_failure(exc, https=self._origin.scheme == "https")
            return UpstreamConnectionError(
                f"could not connect to the upstream at {self.where}{why}", reason=reason
            )
        if kind == "closed" and not answering:
            return UpstreamConnectionError(
                f"the upstream at {self.where} closed the connection without answering",
                reason="closed",
            )
        if kind == "closed":
            return UpstreamTruncatedError(
                f"the upstream at {self.where} closed the connection mid-answer"
            )
        return UpstreamConnectionError(f"the connection to the upstream at {self.where} failed")


#: What servers say for a path they do not serve (FastAPI's ``{"detail": "Not Found"}``, Go's
#: ``404 page not found``): nothing the URL would not say better.
_NOT_FOUND_WORDS = frozenset({"not found", "page not found"})

#: OpenSSL's words when an https:// client meets a server that speaks plain HTTP.
_PLAIN_HTTP_SSL_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"}
)


def _connect_failure(exc: BaseException, *, https: bool) -> tuple[str, str]:
    """Why no connection was made (``refused``, ``dns``, ``tls``, else ``connect``) and the words
    that say it, read from the exceptions behind ``exc`` (httpx and aiohttp both chain the
    socket's own)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            return "dns", f": its host name does not resolve ({cause.strerror or 'DNS failure'})"
        # aiohttp's own TLS errors subclass ssl's without its details: the ssl one is behind.
        reason = getattr(cause, "reason", None)
        if isinstance(cause, ssl.SSLCertVerificationError) and reason is not None:
            detail = getattr(cause, "verify_message", None) or reason
            return "tls", (
                f": its TLS certificate is not trusted ({detail}); SSL_CERT_FILE names the "
                "CA certificates to trust"
            )
        if isinstance(cause, ssl.SSLError) and reason is not None:
            plain = https and reason in _PLAIN_HTTP_SSL_REASONS
            hint = "; does it speak plain HTTP? try http://" if plain else ""
            return (
                "tls",
                f": the TLS handshake failed ({str(reason).replace('_', ' ').lower()}){hint}",
            )
        if isinstance(cause, ConnectionRefusedError):
            return "refused", ": the connection was refused (is the server running on that port?)"
        cause = cause.__cause__ or cause.__context__
    return "connect", ""


def _error_message(body: bytes) -> str | None:
    """The upstream's own words: ``{"error": {"message"}}``, ``{"error": "…"}``, ``{"detail"}``,
    and any of them as the one item of a JSON array (Gemini's OpenAI-compatible endpoint
    answers ``[{"error": {"code": 400, "message": …, "status": …}}]``)."""
    try:
        data = parse_json(body)
    except ValueError:
        return None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error", data)
    if isinstance(error, str) and error:
        return error
    if isinstance(error, dict):
        for key in ("message", "detail", "msg"):
            value = error.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
