"""The requests of threads kept (``--threads``; README "Threads"): ``GET /threads`` (the owner's
threads, for a sidebar), ``DELETE /threads/{id}``, ``GET /runs/{runId}/events`` (a run
followed again after a reload: every frame after ``Last-Event-ID``, then the rest live) and
``POST /runs/{runId}/cancel``; and what ``POST /`` does with a thread: a run kept as it goes
(``carry_response``); a hydrate (``bridge.serve.http.hydrate``) follows a run with them.

Every frame of a kept run carries an ``id:`` (the run's id, percent-encoded, and the frame's
number), which ``Last-Event-ID`` gives back. Another owner's thread or run reads as unknown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from urllib.parse import unquote

from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
)
from starlette.requests import Request
from starlette.responses import Response

from bridge.core.encode import encode_event
from bridge.core.errors import BridgeError, InvalidRunInputError
from bridge.serve.http.admission import Slot
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.stream import EventStreamResponse, FrameSink
from bridge.serve.threads.followers import CUT_FRAME
from bridge.serve.threads.keeper import ThreadKeeper
from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.run_frames import RunGoneError, ends_run, id_prefix, with_ids
from bridge.serve.threads.store import RunKey, ThreadStoreError

logger = logging.getLogger("agui_bridge")

#: Frames numbered from here on, as a stream's source gives them: (first's number, frames).
Frames = AsyncIterator[tuple[int, list[str]]]


class RunLostError(BridgeError):
    """The run of another process stopped being written before its end (that process died,
    or the store let its events go): its follower is told so, instead of a stream with no
    end."""

    code = "run_lost"


def keeper_of(bridge: Bridge, request: Request) -> tuple[ThreadKeeper, str]:
    """The bridge's threads and the request's owner (authorised); 404 without ``--threads``."""
    bridge.authorize(request)
    keeper = bridge.threads
    if keeper is None:
        raise InvalidRunInputError(
            "this bridge keeps no threads (start it with --threads)", status=404, code="not_found"
        )
    return keeper, keeper.owner(request)


def _unknown(what: str) -> InvalidRunInputError:
    return InvalidRunInputError(f"no such {what}", status=404, code="not_found")


def unavailable(exc: ThreadStoreError) -> InvalidRunInputError:
    return InvalidRunInputError(exc.message, status=503, code=exc.code)


async def list_threads(bridge: Bridge, request: Request) -> Response:
    try:
        keeper, owner = keeper_of(bridge, request)
        listed = await keeper.threads(owner)
    except InvalidRunInputError as exc:
        return bridge.refused(exc)
    except ThreadStoreError as exc:
        return bridge.refused(unavailable(exc))
    return bridge.json_response(
        {
            "threads": [
                {
                    "id": summary.id,
                    "title": summary.title,
                    "updatedAt": datetime.fromtimestamp(summary.updated, UTC).isoformat(),
                    "running": summary.running,
                }
                for summary in listed
            ]
        }
    )


async def forget_thread(bridge: Bridge, request: Request) -> Response:
    thread_id = request.path_params["thread_id"]
    try:
        keeper, owner = keeper_of(bridge, request)
        live = keeper.live.of_thread(owner, thread_id)
        if live is not None:  # stopped, and its saves done (its begin's too) before the forget
            live.cancel()
            await asyncio.shield(live.saved)
        # The forget makes a later save of a run begun before it come to nothing, wherever
        # that run goes on; one going on in another process is asked to stop too.
        forgotten = await keeper.store.forget(owner, thread_id)
        if forgotten is None and live is None:
            raise _unknown("thread")
        running = forgotten.running if forgotten is not None else None
        if running is not None and (live is None or running != live.run_id):
            await keeper.store.cancel(RunKey(owner, running))
    except InvalidRunInputError as exc:
        return bridge.refused(exc)
    except ThreadStoreError as exc:
        return bridge.refused(unavailable(exc))
    return Response(status_code=204)


async def cancel_run(bridge: Bridge, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    try:
        keeper, owner = keeper_of(bridge, request)
        run = RunKey(owner, run_id)  # the caller's run of that id: never another owner's
        live = keeper.live.get(run)
        if live is not None:
            if not live.cancel():
                raise _ended(run_id)
        else:
            info = await keeper.store.run_info(run) if keeper.store.shared else None
            if info is None:
                raise _unknown("run")
            if info.ended:
                raise _ended(run_id)
            await keeper.store.cancel(run)
    except InvalidRunInputError as exc:
        return bridge.refused(exc)
    except ThreadStoreError as exc:
        return bridge.refused(unavailable(exc))
    bridge.telemetry.thread("cancel", "", run_id)
    return bridge.json_response({"runId": run_id, "cancelled": True}, status_code=202)


def _ended(run_id: str) -> InvalidRunInputError:
    return InvalidRunInputError(f"the run {run_id!r} has ended", status=409, code="run_ended")


async def run_events(bridge: Bridge, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    try:
        keeper, owner = keeper_of(bridge, request)
        after = _after(request, run_id)
        run = RunKey(owner, run_id)  # the caller's run of that id: never another owner's
        live = keeper.live.get(run)
        if live is not None:  # this process's run
            if after >= live.last and (after > live.last or live.ended):
                return _at_the_end(run_id, after, live.last)
            if not live.can_follow(after):
                raise InvalidRunInputError(
                    f"the run {run_id!r} passed --max-thread-bytes: its early events were let go",
                    status=410,
                    code="run_not_kept",
                )
            bridge.telemetry.thread("reconnect", "", run_id, max(live.last - after, 0))
            if isinstance(live, LiveRun):
                return carry_response(bridge, live, after)
            ended = live
            return follow_response(bridge, run_id, lambda _: ended.follow(after))
        source = await _from_other(keeper, run, after)
        if source is None:
            return Response(status_code=204)
        bridge.telemetry.thread("reconnect", "", run_id, 0)
    except InvalidRunInputError as exc:
        return bridge.refused(exc)
    except ThreadStoreError as exc:
        return bridge.refused(unavailable(exc))
    return follow_response(bridge, run_id, lambda _: source)


def _after(request: Request, run_id: str) -> int:
    """The number of the last frame the client had: ``Last-Event-ID`` (this run's) or
    ``?after=N``; 0 for none."""
    given = request.headers.get("last-event-id") or ""
    ident, _, number = given.rpartition(":")
    ident = unquote(ident)  # as the frames' ``id:`` lines write it
    if not given:  # the run id as the path gave it, decoded once
        ident, number = run_id, request.query_params.get("after", "0")
    if ident != run_id or not (number.isascii() and number.isdigit()) or len(number) > 12:
        raise InvalidRunInputError(
            f"Last-Event-ID {given[:80]!r} names no frame of the run {run_id!r}",
            status=400,
            code="invalid_input",
        )
    return int(number)


def _at_the_end(run_id: str, after: int, last: int) -> Response:
    """A client that has every frame of an ended run (204), or names one past the last its
    run wrote (400)."""
    if after == last:
        return Response(status_code=204)
    raise _past_the_end(run_id, after)


def _past_the_end(run_id: str, after: int) -> InvalidRunInputError:
    return InvalidRunInputError(
        f"Last-Event-ID names frame {after} of the run {run_id!r}, past the last it wrote",
        status=400,
        code="invalid_input",
    )


async def _from_other(keeper: ThreadKeeper, run: RunKey, after: int) -> Frames | None:
    """The frames after ``after`` of a run of another process (a shared store), as the store
    has them; ``None`` when the run ended with frame ``after`` (the client has them all);
    404 for another owner's run or none; 400 for a frame past an ended run's last."""
    if not keeper.store.shared:
        raise _unknown("run")
    info = await keeper.store.run_info(run)
    if info is None:
        raise _unknown("run")
    if info.ended and after and not await keeper.store.run_events(run, after, 0):
        # Nothing after it: the client had the last frame, or names one never written.
        if not await keeper.store.run_events(run, after - 1, 0):
            raise _past_the_end(run.run_id, after)
        return None
    return from_store(keeper, run, after, "" if info.ended else info.process)


async def from_store(keeper: ThreadKeeper, run: RunKey, after: int, process: str) -> Frames:
    """A run of another process, as the store has its frames; ends with its terminal frame, or
    when the store has nothing more of it. ``process``: the one running it, asked to hand its
    frames to the store as they come (``""``: none, the run has ended)."""
    run_id = run.run_id
    wait = keeper.config.keepalive_interval
    if process:
        await keeper.store.want(run, process)
    # A run whose process died writes no more: after --run-timeout with nothing new, the
    # follower is let go (the run could not have gone on longer anyway).
    quiet_since = time.monotonic()
    ended = False
    while True:
        try:
            batches = await keeper.store.run_events(run, after, 0 if ended else wait)
        except ThreadStoreError as exc:  # its follower is told (follow_response)
            logger.warning("run %s: following it stopped: %s", run_id, exc.message)
            raise
        for batch in batches:
            frames = list(batch.frames[max(after - batch.first + 1, 0) :])
            if frames:
                quiet_since = time.monotonic()
                yield after + 1, frames
                after = batch.last
            if batch.frames and ends_run(batch.frames[-1]):
                return
        if ended:  # that was the look after the run's end: nothing more comes
            return
        if not batches:
            info = await keeper.store.run_info(run)
            if info is not None and info.ended:
                ended = True  # its end may have come since the read: one more look
                continue
            if info is None:
                raise RunLostError(f"the events of the run {run_id!r} are no longer kept")
            if time.monotonic() - quiet_since > keeper.config.run_timeout:
                logger.warning("run %s: nothing new of it in --run-timeout; let go", run_id)
                raise RunLostError(
                    f"nothing new of the run {run_id!r} in --run-timeout "
                    f"({keeper.config.run_timeout:g} s): the process that ran it stopped"
                )


def follow_response(
    bridge: Bridge,
    run_id: str,
    source: Callable[[Callable[[], None]], Frames],
    after_first: Callable[[], str] | None = None,
    slot: Slot | None = None,
) -> EventStreamResponse:
    """The SSE response of a client following a run: ``source`` gives its frames, given what
    cuts the response (a follower too slow, ``LiveRun.follow``). ``after_first``: frames sent
    after the run's first (a hydrate's snapshot of the thread the run goes on in), whose place
    among the runs (``slot``) is given back once they are sent. A follower of another
    process's run whose store goes ends with RUN_ERROR ``thread_store_unavailable``, one whose
    frames were let go (past ``--max-thread-bytes``) with ``run_not_kept``, one whose run
    stopped being written (its process died) with ``run_lost``: without an id, not
    being one of the run's frames, so a later ``Last-Event-ID`` resumes after the last that
    was."""

    prefix = id_prefix(run_id)
    held = slot

    async def produce(sink: FrameSink) -> None:
        nonlocal held
        try:
            async for first, frames in source(lambda: response.cut(CUT_FRAME)):
                if first == 1 and after_first is not None:  # after RUN_STARTED, without ids
                    sink.add(with_ids(prefix, 1, frames[:1]) + after_first())
                    if len(frames) > 1:
                        sink.add(with_ids(prefix, 2, frames[1:]))
                else:
                    sink.add(with_ids(prefix, first, frames))
                await sink.flush()
                if held is not None:  # the hydrate's work is done: following is not a run
                    held.release()
                    held = None
        except (ThreadStoreError, RunGoneError, RunLostError) as exc:
            sink.add(_lost(bridge, exc))

    response = bridge.follow_stream(produce, slot.hand_over() if slot is not None else None)
    return response


def carry_response(bridge: Bridge, live: LiveRun, after: int = 0) -> EventStreamResponse:
    """The SSE response of a client following a run of this process from frame ``after``:
    once it has every frame, the run's own task writes the next as they come
    (``LiveRun.carry``), with no task switch per frame. Frames let go end it as
    ``follow_response``'s do."""

    async def produce(sink: FrameSink) -> None:
        try:
            await live.carry(sink.add, sink.flush, after, lambda: response.cut(CUT_FRAME))
        except RunGoneError as exc:
            sink.add(_lost(bridge, exc))

    response = bridge.follow_stream(produce)
    return response


def _lost(bridge: Bridge, exc: BridgeError) -> str:
    """The RUN_ERROR that ends a follower's stream whose frames could not all be given."""
    return bridge.redactor.redact(encode_event(RunErrorEvent(message=exc.message, code=exc.code)))


def timed_out(config_timeout: float) -> BaseEvent:
    return RunErrorEvent(
        message=f"the run went on longer than --run-timeout ({config_timeout:g} s)",
        code="run_timeout",
    )
