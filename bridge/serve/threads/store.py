"""Where threads and runs' events are kept: the ``ThreadStore`` interface and ``thread_store``,
which makes the one ``--threads`` names (``memory``, ``file:///DIR``, ``redis://…``).

A store knows nothing of AG-UI: a thread is an opaque document (its JSON, made and read by
``bridge.serve.threads.thread``) with a summary for the list, kept per owner (a digest,
``bridge.serve.threads.owner``) and thread id, and forgotten ``ttl`` seconds after its last
save. A run is its owner's and its id's (``RunKey``), never a client's id alone. A run's
events are batches of frames (the ``data:`` frames as sent, each numbered from 1 in the run),
kept while the run goes and ``RUN_KEPT`` seconds after its end, so that a client
on another process (a shared store) can follow the run; the process that runs it also keeps
them itself (``bridge.serve.threads.live``), so the memory store keeps no events.

A store that cannot be reached raises ``ThreadStoreError``: the run goes on without it (its
thread is not saved, and the log says so), and a hydrate or a reconnect that needs it is a 503.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bridge.core.errors import BridgeError

#: Seconds a finished run's events are kept after its end: a client that reloads as the run
#: ends still finds them.
RUN_KEPT = 300.0


class ThreadStoreError(BridgeError):
    """The thread store cannot be reached."""

    code = "thread_store_unavailable"


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """A thread as a sidebar lists it: its id, a title (the first user message's start), when
    it was last saved (Unix seconds), and the run going on in it, if any."""

    id: str
    title: str
    updated: float
    running: str | None = None


@dataclass(frozen=True, slots=True)
class RunKey:
    """A run as every store and process knows it: its owner's and its id together. A run id
    is the client's choice and no secret, so another owner's run of the same id is another
    run, and no store names a run by its id alone (``name``: a digest of both, what a path or
    a key holds)."""

    owner: str
    run_id: str
    name: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        whose = f"agui-bridge run\0{self.owner}\0{self.run_id}".encode("utf-8", "surrogatepass")
        object.__setattr__(self, "name", hashlib.sha256(whose).hexdigest())


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run a store keeps events of: whose it is, in which thread, and whether it has ended
    (its terminal event is in its last batch)."""

    owner: str
    thread_id: str
    ended: bool
    #: The process that runs it (``Mirror.process``): where a follower asks for its frames.
    process: str = ""


@dataclass(frozen=True, slots=True)
class Batch:
    """Frames of a run, numbered ``first``, ``first + 1``, … (one upstream read's, or what
    gathered while the store was busy): each a ``data: …\\n\\n`` frame without its ``id:``."""

    first: int
    frames: Sequence[str]

    @property
    def last(self) -> int:
        return self.first + len(self.frames) - 1


class ThreadStore(Protocol):
    """The threads of every owner, and the events of the runs going on in them."""

    #: The store as logs and errors show it (no password).
    shown: str
    #: Whether other processes see what this one keeps (``serve --workers`` needs it).
    shared: bool

    async def load(self, owner: str, thread_id: str) -> bytes | None:
        """The thread's document, or ``None`` when the owner has no such thread (another
        owner's, expired, forgotten, never kept: all alike)."""
        ...

    async def save(
        self,
        owner: str,
        thread_id: str,
        document: bytes,
        summary: ThreadSummary,
        *,
        generation: str | None = None,
    ) -> bool:
        """Keep the thread (replacing what was kept) for ``ttl`` seconds from now. With
        ``generation`` (what ``run_begin`` answered for the run saving it), only while the
        thread was not forgotten since: ``False`` then, and nothing is kept (a thread deleted
        while its run goes on stays deleted)."""
        ...

    async def threads(self, owner: str) -> list[ThreadSummary]:
        """The owner's threads, the most recently saved first."""
        ...

    async def forget(self, owner: str, thread_id: str) -> ThreadSummary | None:
        """Forget the thread, and make every save of a run begun before it come to nothing;
        the summary of the thread forgotten (its run going on, if any), ``None`` when the
        owner had none of that id."""
        ...

    async def run_begin(
        self,
        run: RunKey,
        thread_id: str,
        process: str = "",
        *,
        saving: tuple[bytes, ThreadSummary] | None = None,
    ) -> str:
        """A run begins in ``process``: its events will follow (a shared store keeps them for
        others), all at its end, and as they come once a follower elsewhere ``want``s them.
        ``saving``: the thread's document and summary as the run begins, saved with it (one
        command to Redis). The thread's generation, for the run's later ``save``."""
        ...

    async def want(self, run: RunKey, process: str) -> None:
        """Ask ``process`` (the run's) for the run's events as they come."""
        ...

    async def wanted(self, process: str, runs: Sequence[RunKey]) -> list[RunKey]:
        """Which of these runs of ``process`` were asked for since it last looked."""
        ...

    async def run_append(self, run: RunKey, batch: Batch, *, ended: bool = False) -> None:
        """The run's next frames; ``ended``: the last (the run's terminal event among them)."""
        ...

    async def run_append_many(self, batches: Sequence[tuple[RunKey, Batch, bool]]) -> None:
        """``run_append`` for several runs at once: ``(run, batch, ended)`` each."""
        ...

    async def run_info(self, run: RunKey) -> RunInfo | None:
        """Whose the run is and whether it ended, or ``None`` when the store has no events of
        it (never kept here, kept past ``RUN_KEPT``, or its record names another owner)."""
        ...

    async def run_events(self, run: RunKey, after: int, wait: float) -> list[Batch]:
        """The run's batches holding frames after number ``after`` (the first may begin
        before it), waiting up to ``wait`` seconds for one when there is none yet (``[]``
        then)."""
        ...

    async def cancel(self, run: RunKey) -> None:
        """Ask the process that runs ``run`` to stop it (``cancelled``)."""
        ...

    async def cancelled(self, runs: Sequence[RunKey]) -> list[RunKey]:
        """Which of these runs (this process's) were asked to stop."""
        ...

    async def available(self) -> bool:
        """Whether the store answers now (``/health``)."""
        ...

    async def aclose(self) -> None: ...
