"""One probe's answer: what the doctor read from the server, or the error that ended it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bridge.core.errors import BridgeError, UpstreamConnectionError


@dataclass
class Answer:
    """One probe request: what it read, or the error that ended it."""

    name: str
    path: str
    method: str = "POST"
    chunks: list[dict[str, Any] | str] = field(default_factory=list)
    error: BridgeError | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "probe": self.name,
            "method": self.method,
            "path": self.path,
            "ok": self.ok,
            "ms": round(self.seconds * 1000),
        }
        if self.error is not None:
            out.update(code=self.error.code, message=self.error.message)
            if isinstance(self.error, UpstreamConnectionError) and self.error.reason:
                out["reason"] = self.error.reason
        return out
