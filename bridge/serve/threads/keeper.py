"""The threads of a bridge started with ``--threads``: whose each request is, the runs going on
in this process, and what is kept of each thread in the store.

A run's thread is saved twice: as it begins (the client's messages, and the run going on in
it, so that a hydrate on another process finds the run to follow) and as it ends (the messages
as the client holds them after the run's events, its state, the interrupts it waits on). Both
are made off the event loop when big (a thread of megabytes is folded and written in a worker
thread; one no bigger than a body parsed on the loop is made there, which costs less than the
hand-over) and redacted of the bridge's secrets. A store that fails costs the thread, never the
run: the log says so, and the run goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import suppress
from typing import Any, TypeVar

import anyio.to_thread
from ag_ui.core import (
    BaseEvent,
    Message,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
)
from starlette.requests import Request

from bridge.config import BridgeConfig
from bridge.core.errors import InvalidRunInputError
from bridge.serve.threads.ended import EndedRun, LiveRuns
from bridge.serve.threads.fold import ThreadFold
from bridge.serve.threads.live import LiveRun
from bridge.serve.threads.mirror import Mirror
from bridge.serve.threads.owner import OwnerOf, Owners
from bridge.serve.threads.store import RunKey, ThreadStore, ThreadStoreError, ThreadSummary
from bridge.serve.threads.thread import Digests, Thread, dumped, read_document
from bridge.serve.tools.claims import StoreWatch

logger = logging.getLogger("agui_bridge")

T = TypeVar("T")

SHUTTING_DOWN = "the bridge is shutting down; try again"
#: The bytes of input (and of frames, each) up to which a thread is made on the event loop: as
#: much as a request body parsed there (``bridge.serve.http.run_input.OFF_LOOP_BYTES``).
OFF_LOOP_BYTES = 64 * 1024
#: Documents this process saved whose digests it keeps (``Thread.clean``): 32 bytes each.
MAX_CLEAN = 4096
#: Seconds between two looks for cancels asked on other processes (a shared store).
CANCEL_POLL = 1.0


class ThreadKeeper:
    """Threads kept, runs followed: one per app with ``--threads``."""

    def __init__(
        self,
        config: BridgeConfig,
        store: ThreadStore,
        redact: Callable[[str], str],
        owner: OwnerOf | None = None,
        *,
        redact_bytes: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._redact = redact
        #: The same for a document's bytes (``Redactor.redact_sliced_bytes``: no copy when no
        #: secret is configured).
        self._redact_bytes = redact_bytes or (lambda data: redact(data.decode()).encode())
        #: Digests of the documents this process saved, redacted (``Thread.clean``).
        self._clean = Digests(MAX_CLEAN)
        self.owners = Owners(header=config.thread_owner_header, owner=owner)
        self.live = LiveRuns()
        self._watch = StoreWatch(store)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._poller: asyncio.Task[None] | None = None
        #: What a shared store gets of this process's runs, for followers on other processes.
        self._mirror = Mirror(store) if store.shared else None
        #: Hydrates' work in worker threads, one at a time (``off_loop``).
        self._snapshots: anyio.CapacityLimiter | None = None

    def owner(self, request: Request) -> str:
        return self.owners.of(request)

    async def down(self) -> bool:
        """Whether the store does not answer (``/health``)."""
        return not await self._watch.available()

    async def thread(self, owner: str, thread_id: str) -> Thread | None:
        """The owner's thread, ``None`` when unknown; ``ThreadStoreError`` when the store
        cannot say."""
        last = self.live.last_of_thread(owner, thread_id)
        if last is not None and last.ended:  # its end is being saved: read what it saves
            await asyncio.shield(last.saved)
        document = await self.store.load(owner, thread_id)
        if document is None:
            return None
        thread = await self.off_loop(self._read, document)
        if thread is None:
            logger.warning(
                "thread %s: its document (%d bytes) is damaged or of another version; "
                "answered as an unknown thread",
                thread_id,
                len(document),
            )
        return thread

    async def off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """A hydrate's work (a thread read, its snapshot made): in a worker thread, one at a
        time in the process. Each step of it holds the GIL (a JSON parse, a scan), and so the
        event loop, while it runs; the loop takes its turn between steps, but forty threads
        wanting the GIL at once made each of its turns wait for them all (``/health`` took
        up to a second). One at a time costs no speed: they could not run at once anyway."""
        if self._snapshots is None:
            self._snapshots = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(work, *args, limiter=self._snapshots)

    async def threads(self, owner: str) -> list[ThreadSummary]:
        """The owner's threads, each with the owner's run going on in it, if any (never
        another owner's: a thread id is no secret)."""
        listed = await self.store.threads(owner)
        running = {live.thread_id: live.run_id for live in self.live.running(owner)}

        def going(summary: ThreadSummary) -> str | None:
            if summary.id in running:
                return running[summary.id]
            live = None
            if summary.running is not None:
                live = self.live.get(RunKey(owner, summary.running))
            # A run of this process that ended, its thread saved (the store's summary may be
            # the one saved as it began, when the two saves crossed).
            saved = isinstance(live, EndedRun) or (live is not None and live.saved.done())
            return None if saved else summary.running

        return [ThreadSummary(s.id, s.title, s.updated, going(s)) for s in listed]

    # -- a run ---------------------------------------------------------------------------

    def begin(
        self, run_input: RunAgentInput, owner: str, input_bytes: int | None = None
    ) -> LiveRun:
        """A run of ``owner``'s, kept as it goes (409 when a run of the owner's of that id goes
        on; another owner's run of the same id is another run, and not told of; 400 for an id
        no URL path can carry).
        ``input_bytes``: the size of the body it came in, when known."""
        if run_input.run_id in (".", "..") or "/" in run_input.run_id:
            raise InvalidRunInputError(
                f"the run id {run_input.run_id[:80]!r} cannot be followed at "
                "/runs/{runId}/events (no URL path holds it): with threads kept, a run id is "
                "not '.' nor '..' and holds no '/'",
                status=400,
                code="invalid_input",
            )
        going = self.live.get(RunKey(owner, run_input.run_id))
        if going is not None and not going.ended:
            raise InvalidRunInputError(
                f"a run with the id {run_input.run_id!r} is going on; "
                "each run needs an id of its own",
                status=409,
                code="run_exists",
            )
        store = self.store
        live = LiveRun(
            run_input.run_id,
            owner,
            run_input.thread_id,
            max_bytes=self.config.max_thread_bytes,
            grace=self.config.run_grace,
            mirror=self._mirror,
        )
        self.live.add(live)
        if self._mirror is not None:
            self._mirror.track(live)
        inline = input_bytes is not None and input_bytes <= OFF_LOOP_BYTES
        started = self._spawn(self._save_start(live, run_input, inline))
        live.done.add_done_callback(
            lambda _: self._spawn(self._save_end(live, run_input, started, inline))
        )
        if store.shared and (self._poller is None or self._poller.done()):
            self._poller = asyncio.get_running_loop().create_task(self._poll_cancels())
        return live

    def give_way(self) -> bool:
        """Every place among the runs going on is taken: the run nobody has followed for the
        longest ends as it would after its grace, and gives its place back now; ``False``
        when every run has its client."""
        alone = [
            live
            for live in self.live.running()
            if live.alone_since is not None and live.cancel_reason is None
        ]
        if not alone:
            return False
        min(alone, key=lambda live: live.alone_since or 0.0).give_way()
        return True

    async def cancel_ends(self, live: LiveRun, run_input: RunAgentInput) -> list[BaseEvent]:
        """What ends a cancelled run: the ends of what it left open, then RUN_FINISHED with
        outcome ``cancelled``; RUN_ERROR ``cancelled`` when its early frames were let go (what
        is open is not known)."""
        if live.cancel_reason == "shutting_down":
            return [RunErrorEvent(message=SHUTTING_DOWN, code="shutting_down")]
        if not live.kept:
            return [RunErrorEvent(message="the run was cancelled", code="cancelled")]
        frames = live.frames()

        def fold() -> list[BaseEvent]:
            folded = ThreadFold([], None)
            folded.apply_frames(frames)
            return list(folded.open_ends())

        ends = await anyio.to_thread.run_sync(fold)
        finished = RunFinishedEvent(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            result={"cancelled": True, "reason": live.cancel_reason or "cancelled"},
            outcome=RunFinishedCancelledOutcome(),
        )
        return [*ends, finished]

    async def _save_start(self, live: LiveRun, run_input: RunAgentInput, inline: bool) -> None:
        try:
            made = await self._made(live, run_input, [], live.run_id, inline)
            process = self._mirror.process if self._mirror is not None else ""
            # The run told of (a shared store) and its thread saved: one command to Redis.
            live.generation = await self.store.run_begin(
                live.key, live.thread_id, process, saving=made
            )
            live.begun.set_result(self.store.shared)  # not shared: its events stay here
        except ThreadStoreError as exc:
            logger.warning("run %s: its thread was not kept: %s", live.run_id, exc.message)
        finally:
            if not live.begun.done():  # the store was not told: its events stay here
                live.begun.set_result(False)

    async def _save_end(
        self, live: LiveRun, run_input: RunAgentInput, started: asyncio.Task[Any], inline: bool
    ) -> None:
        with suppress(Exception):  # its failure was logged; the end is saved anyway
            await started
        try:
            if live.kept:
                small = inline and live.size <= OFF_LOOP_BYTES
                made = await self._made(live, run_input, live.frames(), None, small)
            else:  # the thread stays as it was before the run
                logger.warning(
                    "run %s: its thread passed --max-thread-bytes (%d); the run was not kept",
                    live.run_id,
                    self.config.max_thread_bytes,
                )
                made = await self._made(live, run_input, [], None, inline)
            if made is not None and not await self.store.save(
                live.owner, live.thread_id, *made, generation=live.generation
            ):
                logger.info("run %s: its thread was deleted as it ran; not kept", live.run_id)
        except ThreadStoreError as exc:
            logger.warning("run %s: its thread was not kept: %s", live.run_id, exc.message)
        finally:
            if not live.saved.done():
                live.saved.set_result(None)
            self.live.settle(live)

    async def _made(
        self,
        live: LiveRun,
        run_input: RunAgentInput,
        frames: Sequence[str],
        running: str | None,
        inline: bool,
    ) -> tuple[bytes, ThreadSummary] | None:
        """The thread's document and summary after ``frames``; ``None`` past
        ``max_thread_bytes`` (said in the log). ``inline``: the input and the frames are small
        enough to be made on the loop."""
        messages, state = run_input.messages, run_input.state
        if inline:
            made = self._document(messages, state, frames, running)
        else:
            made = await anyio.to_thread.run_sync(self._document, messages, state, frames, running)
        if made is None:
            logger.warning(
                "run %s: its thread passed --max-thread-bytes (%d) and was not kept",
                live.run_id,
                self.config.max_thread_bytes,
            )
            return None
        document, title = made
        return document, ThreadSummary(live.thread_id, title, time.time(), running)

    def _document(
        self,
        messages: Sequence[Message],
        state: Any,
        frames: Sequence[str],
        running: str | None,
    ) -> tuple[bytes, str] | None:
        """The thread's document after ``frames`` (in a worker thread), redacted; ``None``
        past ``max_thread_bytes``."""
        folded = ThreadFold(dumped(messages), state)
        folded.apply_frames(frames)
        thread = Thread(folded.messages, folded.state, folded.interrupts, running)
        document = thread.document(self._redact_bytes)
        if len(document) > self.config.max_thread_bytes:
            return None
        self._clean.add(hashlib.sha256(document).digest())
        return document, self._redact(folded.title())

    def _read(self, document: bytes) -> Thread | None:
        """The thread a document holds (in a worker thread), ``clean`` when this process
        saved that very document."""
        clean = hashlib.sha256(document).digest() in self._clean
        thread = read_document(document, intact=clean)
        if thread is not None:
            thread.clean = clean
        return thread

    # -- cancels from other processes ------------------------------------------------------

    async def _poll_cancels(self) -> None:
        while running := self.live.running():
            await asyncio.sleep(CANCEL_POLL)
            try:
                asked = set(await self.store.cancelled([live.key for live in running]))
            except ThreadStoreError:
                continue  # the store is down: a cancel asked meanwhile waits for it
            for live in running:
                if live.key in asked:  # the owner's cancel: a cancel is keyed by both
                    live.cancel()

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        for live in self.live.running():
            live.cancel("shutting_down")
        pending = [live.done for live in self.live.running()]
        if pending:
            await asyncio.wait(pending, timeout=5)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if self._poller is not None:
            self._poller.cancel()
        if self._mirror is not None:
            await self._mirror.aclose()
        await self._watch.aclose()
        await self.store.aclose()
