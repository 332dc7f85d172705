"""What the thread stores write, the same way in each: names made of digests, summaries and
batches as JSON, and how long a cancel and a run that stopped writing are kept.

Thread ids and run ids are the client's strings (any characters, any length): none goes raw
into a path or a Redis key, only its digest; the raw id stays inside what is stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from bridge.serve.threads.store import Batch, ThreadSummary

#: Seconds a cancel waits for the process that runs the run to see it (it looks every second
#: or so); past that the run has ended or the process is gone.
CANCEL_KEPT = 60.0
#: Seconds a run's events are kept after its last batch while it has not ended (Redis: after
#: the last refresh of their expiry, once a minute): a process that died mid-run leaves none
#: behind for long. At least: a run may write nothing from its start to its end, so a store
#: keeps it ``--run-timeout`` and a minute when that is longer (``thread_store``).
RUN_ALIVE = 3600.0


def digest(text: str) -> str:
    """The name a client's string (or an owner) goes by in paths and keys."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def summary_json(summary: ThreadSummary) -> bytes:
    """A summary as one line of ASCII JSON (no newline in it)."""
    return json.dumps(asdict(summary), separators=(",", ":")).encode()


def summary_from_json(data: bytes | str) -> ThreadSummary:
    """A summary ``summary_json`` wrote (``ValueError`` for anything else)."""
    fields = json.loads(data)
    if not isinstance(fields, dict):
        raise ValueError("a thread's summary is a JSON object")
    running = fields.get("running")
    return ThreadSummary(
        id=str(fields["id"]),
        title=str(fields["title"]),
        updated=float(fields["updated"]),
        running=None if running is None else str(running),
    )


def frames_json(batch: Batch) -> str:
    """A batch's frames as one line of ASCII JSON."""
    return json.dumps(list(batch.frames))


def frames_from_json(data: bytes | str) -> tuple[str, ...]:
    """The frames ``frames_json`` wrote."""
    return frames_of(json.loads(data))


def frames_of(value: object) -> tuple[str, ...]:
    """A batch's frames, read back from JSON (``ValueError`` for anything else)."""
    if not isinstance(value, list) or not all(isinstance(frame, str) for frame in value):
        raise ValueError("a batch's frames are a JSON list of strings")
    return tuple(value)
