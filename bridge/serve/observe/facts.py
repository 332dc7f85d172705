"""The facts of one run, as every sink reads them (metrics, traces, the run's log line): kept
apart from the observation that gathers them, so that the sinks need nothing of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["finished", "error", "cancelled", "interrupted"]
ToolOutcome = Literal[
    "ok",
    "error",
    "timeout",
    "cancelled",
    "awaiting_approval",
    "rejected",
    "already_run",
    "handed_off",
]


@dataclass(kw_only=True, eq=False)
class RunFacts:
    """What a run was and did: set as it goes, read once it ends."""

    thread_id: str
    run_id: str
    model: str
    #: The client's protocol line (``1.0`` or ``0.0``).
    protocol: str
    #: ``time.perf_counter()`` when the run's request came in.
    received: float
    first_event: float | None = None
    #: Seconds from the request to the run's first upstream output.
    time_to_first_token: float | None = None
    outcome: Outcome = "cancelled"  # until a terminal event is sent
    code: str = ""
    tokens: dict[str, int] = field(
        default_factory=lambda: {"input": 0, "output": 0, "reasoning": 0, "cached_input": 0}
    )
    tool_calls: int = 0
    upstream_requests: int = 0
    upstream_retries: int = 0
    #: Requests sent again at once on a new connection: a pooled one closed before any answer.
    upstream_resends: int = 0
    #: The model's edits of the shared state that applied (``update_state``).
    state_updates: int = 0
