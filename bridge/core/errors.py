"""One small error hierarchy; every error carries a stable machine ``code`` for RUN_ERROR.code.

Modelled on openai-python's ``_exceptions.py``: httpx exceptions are translated in one place
(the upstream client) with ``raise … from exc``; the translator raises the protocol errors.
"""

from __future__ import annotations

from typing import Any

# Upstream error messages reach a browser: keep them readable and bounded.
MAX_MESSAGE_CHARS = 500


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose."""

    code: str = "bridge_error"

    def __init__(self, message: str) -> None:
        super().__init__(_clip(message))

    @property
    def message(self) -> str:
        return str(self.args[0])


class UpstreamHTTPError(BridgeError):
    """The upstream answered with an HTTP error status before streaming."""

    def __init__(
        self, status: int, message: str, *, body: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def code(self) -> str:  # type: ignore[override]
        return f"upstream_http_{self.status}"


class UpstreamConnectionError(BridgeError):
    """The upstream could not be reached; ``reason`` says how, when the transport told:
    ``refused``, ``dns``, ``tls``, ``connect`` (another failure to connect) or ``closed`` (it
    connected, and the upstream closed the connection without answering)."""

    code = "upstream_unreachable"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class UpstreamTimeoutError(BridgeError):
    """The upstream did not connect or went silent for longer than allowed."""

    code = "upstream_timeout"


class UpstreamProtocolError(BridgeError):
    """The upstream sent something that is not a valid chat-completion chunk."""

    code = "bad_upstream_chunk"


class UpstreamTruncatedError(UpstreamProtocolError):
    """The stream ended with neither a ``finish_reason`` nor ``[DONE]``."""

    code = "upstream_truncated"


class UpstreamStreamError(BridgeError):
    """The upstream reported an error inside the stream (``{"error": …}`` chunk)."""

    code = "upstream_error"

    def __init__(
        self, message: str, *, upstream_code: str | None = None, upstream_type: str | None = None
    ) -> None:
        super().__init__(message)
        self.upstream_code = upstream_code
        self.upstream_type = upstream_type

    @classmethod
    def from_payload(cls, payload: Any) -> UpstreamStreamError:
        """Build from the value of an ``error`` key: an object with ``message``, or a string."""
        if isinstance(payload, dict):
            message = payload.get("message")
            code = payload.get("code")
            kind = payload.get("type")
            return cls(
                message
                if isinstance(message, str) and message
                else "the upstream reported an error",
                upstream_code=None if code is None else str(code),
                upstream_type=kind if isinstance(kind, str) else None,
            )
        if isinstance(payload, str) and payload:
            return cls(payload)
        return cls("the upstream reported an error")


class InternalError(BridgeError):
    """A bug in the bridge itself; the details go to the log, never to the client."""

    code = "internal_error"


class InvalidRunInputError(BridgeError):
    """The client's request cannot be run (it is answered with HTTP 4xx, not a stream)."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
