"""``--reasoning-scope auto``: llama.cpp's ``GET /props``, read per model and cached, says which
turns get their reasoning back.

Its ``chat_template_caps.supports_preserve_reasoning`` is the chat template's own answer:
``true`` when the template renders earlier turns' reasoning (GLM-4.7's preserved thinking), so
the model expects it back in every turn (``all``); ``false`` when it drops it, so only the turn
in progress needs it (``current-turn``), as for every server without ``/props``.

The cache holds one entry per model (llama.cpp's router serves several and answers
``/props?model=NAME``; a single-model server ignores the query). An answer stays fresh for
``ttl`` seconds; a read that failed (no connection, no whole answer within its deadline or size,
llama.cpp's 503 while it loads, the router's 400 for a model it has not loaded) gives
``current-turn`` for ``retry`` seconds, then is tried again. A run whose upstream failed,
dropped it or had to be retried drops every entry (``run_ended``): a server that restarts drops
its connections and may come back with another model. Runs that find an entry stale share one
GET (single flight), made in a task of its own so that a run cancelled meanwhile cancels no
other run's wait. So at most one GET per model per ``ttl`` on the runs' path, and none for an
explicit scope or the Responses API (its reasoning goes back as encrypted items, whatever the
scope).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bridge.config import BridgeConfig
from bridge.core.errors import BridgeError
from bridge.serve.run.history import ReasoningScope
from bridge.serve.run.request import configured_scope

#: ``GET /props`` for a model: its JSON object, ``None`` for a server without one; raises
#: ``BridgeError`` when it could not be read (``UpstreamClient.llama_cpp_props``).
ReadProps = Callable[[str], Awaitable[dict[str, Any] | None]]

#: Seconds an answer of ``/props`` is used for; seconds before a failed read is tried again.
PROPS_TTL = 30.0
PROPS_RETRY = 5.0

#: Run errors that say the upstream went away or is (re)starting: its /props may have changed.
_UPSTREAM_TROUBLE = frozenset(
    {
        "upstream_unreachable",
        "upstream_timeout",
        "upstream_truncated",
        "upstream_http_502",
        "upstream_http_503",
        "upstream_http_504",
    }
)


def auto_reasoning_scope(props: Mapping[str, Any] | None) -> tuple[ReasoningScope, str]:
    """What ``auto`` resolves to with this ``/props`` answer (``None``: none), and why, in
    words (the doctor's ``reasoning_scope`` line)."""
    caps = props.get("chat_template_caps") if props is not None else None
    preserve = caps.get("supports_preserve_reasoning") if isinstance(caps, dict) else None
    if preserve is True:
        return "all", "all turns: llama.cpp's template preserves reasoning"
    if preserve is False:
        return "current-turn", "the turn in progress: the template drops earlier reasoning"
    if props is not None:
        return "current-turn", "the turn in progress (/props says nothing of it)"
    return "current-turn", "the turn in progress (no /props)"


class UpstreamProps:
    """The upstream's ``/props`` per model, cached (see the module docstring), and the reasoning
    scope each run's history is sent with."""

    def __init__(
        self,
        config: BridgeConfig,
        read: ReadProps,
        *,
        ttl: float = PROPS_TTL,
        retry: float = PROPS_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``ttl``, ``retry`` and ``clock`` are attributes a test may change."""
        self._config = config
        self._read = read
        self.ttl = ttl
        self.retry = retry
        self.clock = clock
        self._entries: dict[str, tuple[float, dict[str, Any] | None]] = {}  # (until, props)
        self._reading: dict[str, asyncio.Future[dict[str, Any] | None]] = {}

    async def reasoning_scope(self, model: str) -> ReasoningScope:
        """The scope for a run of ``model``: the configured one, or what ``auto`` resolves to."""
        if self._config.reasoning_scope != "auto":
            return configured_scope(self._config)
        if self._config.upstream_api == "responses":
            return "current-turn"  # no reasoning goes back in its messages: no GET for nothing
        return auto_reasoning_scope(await self.props(model))[0]

    async def props(self, model: str) -> dict[str, Any] | None:
        """``/props`` for ``model`` as last read, read again once stale; ``None`` for a server
        without it, or while a failed read waits to be tried again."""
        entry = self._entries.get(model)
        if entry is not None and self.clock() < entry[0]:
            return entry[1]
        reading = self._reading.get(model)
        if reading is None:
            # The read is shared by every run that waits for it, so it belongs to none: an
            # empty context keeps it out of the run's recording (and its trace).
            reading = self._reading[model] = asyncio.get_running_loop().create_task(
                self._fetch(model), context=contextvars.Context()
            )
        # Shielded: a run cancelled while it waits leaves the read to the others.
        return await asyncio.shield(reading)

    async def _fetch(self, model: str) -> dict[str, Any] | None:
        try:
            props: dict[str, Any] | None = await self._read(model)
            fresh_for = self.ttl
        except BridgeError:
            props, fresh_for = None, self.retry
        finally:
            del self._reading[model]
        self._entries[model] = (self.clock() + fresh_for, props)
        return props

    def run_ended(self, code: str, upstream_retries: int) -> None:
        """A run is over (``code``: its error's, else empty): after a failure or a retry that
        says the upstream went away or is (re)starting, every model's ``/props`` is read again."""
        if upstream_retries or code in _UPSTREAM_TROUBLE:
            self._entries.clear()
