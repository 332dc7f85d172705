"""Upstream clients shared by the apps of one process (``serve``'s ``[agents.NAME]``): the apps
whose upstream settings are the same share one client, so one pool of connections."""

from __future__ import annotations

from dataclasses import dataclass

from bridge.config import BridgeConfig
from bridge.serve.upstream.client import UpstreamClient


@dataclass(frozen=True)
class _Upstream:
    """What shapes a client: the same values, the same client."""

    url: str
    api_key: str | None
    transport: str
    connect_timeout: float
    idle_timeout: float
    max_line_bytes: int
    retries: int
    retry_backoff: float
    retry_after_cap: float


class UpstreamPool:
    """One ``UpstreamClient`` per upstream (its URL, key, transport, timeouts and retries),
    held by the apps that use it and closed when the last lets it go."""

    def __init__(self) -> None:
        self._clients: dict[_Upstream, UpstreamClient] = {}
        self._holders: dict[_Upstream, int] = {}

    def client(self, config: BridgeConfig) -> UpstreamClient:
        """The client for ``config``'s upstream, made by the first app that asks for it."""
        key = _key(config)
        if key not in self._clients:
            self._clients[key] = UpstreamClient(config)
            self._holders[key] = 0
        self._holders[key] += 1
        return self._clients[key]

    async def release(self, config: BridgeConfig) -> None:
        """An app lets its client go; the last one closes it."""
        key = _key(config)
        self._holders[key] -= 1
        if self._holders[key] == 0:
            del self._holders[key]
            await self._clients.pop(key).aclose()

    def __len__(self) -> int:
        """The clients held now (one per upstream shared)."""
        return len(self._clients)


def _key(config: BridgeConfig) -> _Upstream:
    return _Upstream(
        config.upstream_url,
        config.api_key,
        config.upstream_transport,
        config.connect_timeout,
        config.idle_timeout,
        config.max_line_bytes,
        config.retries,
        config.retry_backoff,
        config.retry_after_cap,
    )
