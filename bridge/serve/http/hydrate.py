"""A hydrate (README "Threads"): a run with no messages for a thread answers the thread as it
stands and calls no model, or follows the run going on in it (``bridge.serve.http.threads``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ag_ui.core import RunAgentInput, RunFinishedEvent, RunFinishedInterruptOutcome
from pydantic import ValidationError
from starlette.responses import Response

from bridge.serve.http.admission import Slot
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.frames import FrameWriter
from bridge.serve.http.stream import SSE_HEADERS, SlicedResponse
from bridge.serve.http.threads import Frames, follow_response, from_store, unavailable
from bridge.serve.run.loop import run_started
from bridge.serve.threads.keeper import ThreadKeeper
from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.run_frames import id_prefix
from bridge.serve.threads.store import RunKey, ThreadStoreError
from bridge.serve.threads.thread import Thread, dumped, snapshot_frames

logger = logging.getLogger("agui_bridge")


async def hydrate(
    bridge: Bridge,
    keeper: ThreadKeeper,
    run_input: RunAgentInput,
    owner: str,
    writer: FrameWriter,
    slot: Slot,
) -> Response:
    """A run with no messages: the thread as it stands (``MESSAGES_SNAPSHOT``, its state, the
    interrupt it waits on), or, when a run goes on in it, that run from its start with the
    thread before it, then live. An unknown thread is an empty one. No model is called.

    A hydrate is work (a thread of megabytes read, its snapshot made and redacted): it holds
    a place among the runs (``slot``) until its snapshot is sent, and its work is done off the
    event loop, one hydrate at a time, each step short (``ThreadKeeper.off_loop``)."""
    thread_id = run_input.thread_id
    live = keeper.live.of_thread(owner, thread_id)
    try:
        thread = None if live is not None else await keeper.thread(owner, thread_id)
        if live is not None and live.can_follow(0):
            before = await _thread_before(keeper, live)
            bridge.telemetry.thread("hydrate", thread_id, live.run_id, live.last)
            return await _following(
                bridge, keeper, live.run_id, lambda cut: live.follow(0, cut), before, writer, slot
            )
        if thread is not None and thread.running is not None and keeper.store.shared:
            running = RunKey(owner, thread.running)
            info = await keeper.store.run_info(running)
            # Going on elsewhere, or ended with its thread not saved as it left it yet (its end's
            # save comes after its events): the run, whole, from the store.
            if info is not None:
                process = "" if info.ended else info.process
                stored = from_store(keeper, running, 0, process)
                bridge.telemetry.thread("hydrate", thread_id, thread.running)
                return await _following(
                    bridge, keeper, thread.running, lambda _: stored, thread, writer, slot
                )
    except ThreadStoreError as exc:
        return bridge.refused(unavailable(exc))
    shown = thread or Thread()
    bridge.telemetry.thread("hydrate", thread_id, run_input.run_id)
    body = await keeper.off_loop(_hydrated, bridge, run_input, shown, writer)
    return SlicedResponse(
        body, media_type="text/event-stream", headers=SSE_HEADERS, on_close=slot.hand_over().release
    )


def _hydrated(
    bridge: Bridge, run_input: RunAgentInput, thread: Thread, writer: FrameWriter
) -> list[bytes]:
    """A hydrate's whole answer (in a worker thread): ``RUN_STARTED``, the thread's snapshot,
    ``RUN_FINISHED``, each frame with its ``id:``."""
    prefix = id_prefix(run_input.run_id).encode()
    snapshot = _redacted_snapshot(bridge, thread, writer)
    frames = [
        writer.frame(run_started(run_input)).encode(),
        *snapshot,
        writer.frame(_finished(run_input, thread)).encode(),
    ]
    # Each frame after its ``id:`` line, the frames not copied again (``SlicedResponse``).
    return [
        piece for at, frame in enumerate(frames, 1) for piece in (b"%s%d\n" % (prefix, at), frame)
    ]


async def _following(
    bridge: Bridge,
    keeper: ThreadKeeper,
    run_id: str,
    source: Callable[[Callable[[], None]], Frames],
    before: Thread,
    writer: FrameWriter,
    slot: Slot,
) -> Response:
    made = await keeper.off_loop(_redacted_snapshot, bridge, before, writer)
    snapshot = b"".join(made).decode()
    return follow_response(bridge, run_id, source, lambda: snapshot, slot)


async def _thread_before(keeper: ThreadKeeper, live: LiveRun) -> Thread:
    """The thread as the run going on in it began: its input's messages and state."""
    run_input: RunAgentInput = live.input
    messages = await keeper.off_loop(dumped, run_input.messages)
    return Thread(messages, run_input.state)


def _redacted_snapshot(bridge: Bridge, thread: Thread, writer: FrameWriter) -> list[bytes]:
    """The thread's snapshot for the hydrating client's line (``writer.protocol``), redacted a
    slice at a time (in a worker thread)."""
    tool_text = writer.protocol == "0.0"
    frames = snapshot_frames(thread, tool_text=tool_text)
    if thread.clean and not tool_text:  # the very JSON this process saved redacted
        return frames
    return [bridge.redactor.redact_sliced_bytes(frame) for frame in frames]


def _finished(run_input: RunAgentInput, thread: Thread) -> RunFinishedEvent:
    outcome = None
    if thread.interrupts:
        try:
            outcome = RunFinishedInterruptOutcome.model_validate(
                {"type": "interrupt", "interrupts": thread.interrupts}
            )
        except ValidationError:
            logger.warning("thread %s: its interrupts could not be read", run_input.thread_id)
    return RunFinishedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id, outcome=outcome)
