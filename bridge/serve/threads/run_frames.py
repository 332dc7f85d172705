"""What a kept run's frames are made of around its ``LiveRun`` (``bridge.serve.threads.live``):
their ``id:`` lines, the frame that ends a run, the frame said when a thread passes its limit,
and the error of frames let go."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import quote

from ag_ui.core import BaseEvent, CustomEvent

from bridge.core.encode import encode_event
from bridge.core.errors import BridgeError
from bridge.serve.threads.store import Batch

#: The characters of frames one entry of a shared store carries at most (a frame more than it
#: when one alone passes it): a run handed over whole, at its end or to a follower that comes
#: late, goes in entries each encoded and sent in a moment.
MIRROR_BATCH_CHARS = 256 * 1024

#: Said to the run's clients when its thread passes ``max_bytes`` (README "Threads").
NOT_KEPT_FRAME = encode_event(
    CustomEvent(
        name="agui_bridge.thread_not_kept",
        value={
            "code": "thread_too_large",
            "message": "this run passed the bridge's --max-thread-bytes: it goes on, but it will "
            "not be kept in its thread, nor can it be followed again after a reload",
        },
    )
)

#: The start of a frame that ends a run (``encode_event`` writes ``type`` first).
_ENDS = ('data: {"type":"RUN_FINISHED"', 'data: {"type":"RUN_ERROR"')


def id_prefix(run_id: str) -> str:
    """What begins the ``id:`` line of each frame of the run (made once per response)."""
    return f"id: {quote(run_id, safe='')}:"


def with_ids(prefix: str, first: int, frames: list[str]) -> str:
    """The frames, each with its ``id:`` line (``prefix``: the run's ``id_prefix``)."""
    if len(frames) == 1:  # most batches: one token's frame
        return f"{prefix}{first}\n{frames[0]}"
    return "".join([f"{prefix}{first + i}\n{frame}" for i, frame in enumerate(frames)])


def ends_run(frame: str) -> bool:
    """Whether the frame is a run's terminal event."""
    return frame.startswith(_ENDS)


class RunGoneError(BridgeError):
    """The frames a follower asked for were let go (the run passed ``max_bytes``)."""

    code = "run_not_kept"

    @classmethod
    def of(cls, run_id: str) -> RunGoneError:
        return cls(
            f"the run {run_id!r} passed --max-thread-bytes: the events this client had not "
            "taken yet were let go"
        )


#: Writes the run's last events through its own writer (redacted, shaped for its client).
EndWith = Callable[[Sequence[BaseEvent]], None]


def in_batches(first: int, frames: Sequence[str]) -> list[tuple[Batch, bool]]:
    """Frames from number ``first`` in batches of about ``MIRROR_BATCH_CHARS`` at most, each
    with whether it ends the run (``LiveRun.unmirrored``); ``frames`` are not empty."""
    batches: list[tuple[Batch, bool]] = []
    taken: list[str] = []
    size = 0
    for frame in frames:
        taken.append(frame)
        size += len(frame)
        if size >= MIRROR_BATCH_CHARS:
            batches.append((Batch(first, taken), False))
            first, taken, size = first + len(taken), [], 0
    if taken:
        batches.append((Batch(first, taken), False))
    last, _ = batches[-1]
    batches[-1] = last, ends_run(last.frames[-1])
    return batches
