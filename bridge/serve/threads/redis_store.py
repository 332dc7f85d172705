"""The Redis thread store (``--threads redis://HOST:PORT/DB``, ``rediss://``, ``unix://``,
``valkey://``, ``valkeys://``): one store for replicas and workers, by the official ``redis``
client's asyncio API (the ``redis`` extra), with the approval store's timeouts and retry.

Keys (``<owner>``, ``<thread>``: digests; ``<run>``: a digest of the run's owner and id
(``RunKey.name``), never of a client's id alone; the raw ids are inside the values):

- ``agui-bridge:thread:<owner>:<thread>``: a thread's document, expiring ``ttl`` after its save;
- ``agui-bridge:threads:<owner>``: the owner's threads, a sorted set scored by the time of their
  save, and ``agui-bridge:summaries:<owner>``: their summaries, a hash; both expire ``ttl``
  after the owner's last save, so a list is one round trip;
- ``agui-bridge:forgotten:<owner>:<thread>``: how many times the thread was forgotten (its
  generation), kept ``run_alive``: the save of a run begun before a forget comes to nothing;
- ``agui-bridge:run:<run>``: a run's owner and thread (JSON) and whether it ended, a hash, and
  ``agui-bridge:events:<run>``: its events, a Stream with an entry per batch whose id is the
  batch's last frame number (``<last>-0``; the end with no frames ``<last>-2``, and the entry
  of no frames that begins it ``0-1``), so "the batches after frame ``n``" is a read after id
  ``n-0``; both kept ``run_alive`` while the run goes (refreshed once a minute when it writes),
  ``RUN_KEPT`` after its end;
- ``agui-bridge:cancel:<run>``: a cancel asked, ``CANCEL_KEPT``;
- ``agui-bridge:wants:<process>``: the runs (``<run>``) of that process a follower elsewhere
  asked for, a set the process takes from (``SPOP``), kept ``run_alive`` after the last ask.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from bridge.core.upstream_url import shown_url
from bridge.serve.threads import store
from bridge.serve.threads.records import (
    CANCEL_KEPT,
    RUN_ALIVE,
    digest,
    frames_from_json,
    frames_json,
    summary_from_json,
    summary_json,
)
from bridge.serve.threads.redis_scripts import BEGIN, BEGIN_SAVE, END, FORGET, SAVE
from bridge.serve.threads.store import Batch, RunInfo, RunKey, ThreadStoreError, ThreadSummary
from bridge.serve.tools.claims import REDIS_TIMEOUT, redis_client

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.typing import EncodableT, FieldT

_PREFIX = "agui-bridge:"
#: What ``available`` writes (no owner's or run's key: those end in hex digests), and for how
#: long (ms).
_HEALTH_KEY = _PREFIX + "health:threads"
_HEALTH_TTL_MS = 60_000
#: The longest ``run_events`` waits for a batch (seconds); a longer wait is cut to it. The
#: blocking read's connection waits this long for an answer, plus ``REDIS_TIMEOUT``.
LONGEST_WAIT = 30.0


#: Seconds between two refreshes of a going run's expiry (``RUN_ALIVE``, an hour ahead).
_REFRESH_EVERY = 60.0
#: The characters of frames encoded on the event loop at most (more: in a worker thread).
_ENCODED_ON_LOOP = 64 * 1024
#: The asks a process takes at one look (more wait for the next, 0.1 s later).
_MAX_WANTS = 10_000
#: Going runs whose last refresh is remembered (one forgotten is refreshed at its next batch).
_REFRESHES = 10_000


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


def _bytes(value: bytes | str) -> bytes:
    """A value as stored (the client decodes no answers: always bytes; its types say either)."""
    return value if isinstance(value, bytes) else value.encode()


class RedisThreads:
    """Threads and runs' events in Redis or Valkey (module docstring). An owner keeps at most
    ``max_threads`` threads: a save beyond it forgets the owner's least recently saved."""

    shared = True

    def __init__(
        self, url: str, *, ttl: float, max_threads: int = 1000, run_alive: float = RUN_ALIVE
    ) -> None:
        self.shown = shown_url(url)
        self._ttl = ttl
        self._run_alive = run_alive
        self._max_threads = max_threads
        self._client: Redis = redis_client(url)
        self._save = self._client.register_script(SAVE)
        self._begin = self._client.register_script(BEGIN)
        self._begin_save = self._client.register_script(BEGIN_SAVE)
        self._end = self._client.register_script(END)
        self._forget = self._client.register_script(FORGET)
        # A blocking XREAD holds its connection for the whole block: a pool of its own, whose
        # connections wait for an answer longer than the longest block.
        self._blocking: Redis = redis_client(url, socket_timeout=LONGEST_WAIT + REDIS_TIMEOUT)
        # run → when its keys' expiry was last refreshed (time.monotonic()), runs of this
        # process going on
        self._refreshes: OrderedDict[RunKey, float] = OrderedDict()

    @contextmanager
    def _asked(self) -> Iterator[None]:
        """What the store or its connection raises becomes ``ThreadStoreError``."""
        try:
            yield
        except ThreadStoreError:
            raise
        except Exception as exc:  # redis-py's errors, the socket's under them, what it sent
            raise ThreadStoreError(
                f"the thread store at {self.shown} cannot be reached ({type(exc).__name__})"
            ) from exc

    # --- threads ------------------------------------------------------------------------------

    def _document_key(self, owner: str, thread: str) -> str:
        return f"{_PREFIX}thread:{owner}:{thread}"

    async def load(self, owner: str, thread_id: str) -> bytes | None:
        with self._asked():
            document = await self._client.get(self._document_key(digest(owner), digest(thread_id)))
        return None if document is None else _bytes(document)

    def _generation_key(self, owner: str, thread: str) -> str:
        return f"{_PREFIX}forgotten:{owner}:{thread}"

    async def save(
        self,
        owner: str,
        thread_id: str,
        document: bytes,
        summary: ThreadSummary,
        *,
        generation: str | None = None,
    ) -> bool:
        keys, args = self._saving(owner, thread_id, document, summary)
        keys.append(self._generation_key(digest(owner), digest(thread_id)))
        args.append("" if generation is None else generation)
        with self._asked():
            gone = await self._save(keys=keys, args=args)
        return bool(gone != -1)

    def _saving(
        self, owner: str, thread_id: str, document: bytes, summary: ThreadSummary
    ) -> tuple[list[Any], list[Any]]:
        """``SAVE``'s keys and arguments."""
        owner, thread, ttl = digest(owner), digest(thread_id), _ms(self._ttl)
        listed, summaries = f"{_PREFIX}threads:{owner}", f"{_PREFIX}summaries:{owner}"
        keys = [self._document_key(owner, thread), listed, summaries]
        now = time.time()
        args = [
            document,
            ttl,
            thread,
            repr(now),
            summary_json(summary),
            repr(now - self._ttl),
            self._max_threads,
            self._document_key(owner, ""),
        ]
        return keys, args

    async def threads(self, owner: str) -> list[ThreadSummary]:
        owner = digest(owner)
        with self._asked():
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.zrevrangebyscore(f"{_PREFIX}threads:{owner}", "+inf", time.time() - self._ttl)
                pipe.hgetall(f"{_PREFIX}summaries:{owner}")
                listed, summaries = await pipe.execute()
            return [summary_from_json(summaries[m]) for m in listed if m in summaries]

    async def forget(self, owner: str, thread_id: str) -> ThreadSummary | None:
        owner, thread = digest(owner), digest(thread_id)
        keys = [
            self._document_key(owner, thread),
            f"{_PREFIX}threads:{owner}",
            f"{_PREFIX}summaries:{owner}",
            self._generation_key(owner, thread),
        ]
        with self._asked():
            summary = await self._forget(keys=keys, args=[thread, _ms(self._run_alive)])
        if summary is None:
            return None
        try:
            return summary_from_json(summary)
        except (ValueError, KeyError, TypeError):  # kept without a summary: none to tell
            return ThreadSummary(thread_id, "", 0.0)

    # --- runs ---------------------------------------------------------------------------------

    async def run_begin(
        self,
        run: RunKey,
        thread_id: str,
        process: str = "",
        *,
        saving: tuple[bytes, ThreadSummary] | None = None,
    ) -> str:
        events, info = f"{_PREFIX}events:{run.name}", f"{_PREFIX}run:{run.name}"
        owner = run.owner
        # The client's ids as ASCII JSON: any string, a lone surrogate too, is stored as it came.
        whose = json.dumps(
            {"run": run.run_id, "owner": owner, "thread": thread_id, "process": process}
        )
        keys: list[Any] = [events, info, self._generation_key(digest(owner), digest(thread_id))]
        args: list[Any] = [whose, _ms(self._run_alive)]
        script = self._begin
        if saving is not None:
            saved_keys, saved_args = self._saving(owner, thread_id, *saving)
            keys, args, script = keys + saved_keys, args + saved_args, self._begin_save
        with self._asked():
            generation = await script(keys=keys, args=args)
        self._refreshed(run, time.monotonic())
        return _bytes(generation).decode()

    async def run_append(self, run: RunKey, batch: Batch, *, ended: bool = False) -> None:
        await self.run_append_many([(run, batch, ended)])

    async def run_append_many(self, batches: Sequence[tuple[RunKey, Batch, bool]]) -> None:
        """One pipeline for them all, one command per batch (each costs the client's CPU; in
        one pipeline a fifth of what they cost sent apart): a run's expiry is refreshed once
        a minute, and at its end."""
        batches = [item for item in batches if item[1].frames or item[2]]
        if not batches:
            return
        encoded = await _encoded([batch for _, batch, _ in batches])
        now = time.monotonic()
        refreshed: list[tuple[RunKey, bool]] = []
        with self._asked():
            async with self._client.pipeline(transaction=False) as pipe:
                adds = []
                for (run, batch, ended), frames in zip(batches, encoded, strict=True):
                    events, info = f"{_PREFIX}events:{run.name}", f"{_PREFIX}run:{run.name}"
                    entry = f"{batch.last}-{0 if batch.frames else 2}"
                    adds.append(len(pipe))
                    if ended:
                        ends: list[EncodableT] = [entry, batch.first, frames, _ms(store.RUN_KEPT)]
                        await self._end(keys=[events, info], args=ends, client=pipe)
                        refreshed.append((run, True))
                        continue
                    fields: dict[FieldT, EncodableT] = {"first": batch.first, "frames": frames}
                    pipe.xadd(events, fields, id=entry)
                    last_refresh = self._refreshes.get(run)
                    if last_refresh is None or now - last_refresh >= _REFRESH_EVERY:
                        pipe.pexpire(events, _ms(self._run_alive))
                        pipe.pexpire(info, _ms(self._run_alive))
                        refreshed.append((run, False))
                results = await pipe.execute(raise_on_error=False)
            for index, result in enumerate(results):
                # The one retry after a lost answer finds the batch in: it was added.
                if index in adds and "equal or smaller" in str(result):
                    continue
                if isinstance(result, Exception):
                    raise result
        for run, ended in refreshed:
            if ended:
                self._refreshes.pop(run, None)
            else:
                self._refreshed(run, now)

    def _refreshed(self, run: RunKey, now: float) -> None:
        self._refreshes[run] = now
        self._refreshes.move_to_end(run)
        while len(self._refreshes) > _REFRESHES:  # a run forgotten here is refreshed at once
            self._refreshes.popitem(last=False)

    async def run_info(self, run: RunKey) -> RunInfo | None:
        with self._asked():
            info = await self._client.hgetall(f"{_PREFIX}run:{run.name}")
            if not info:
                return None
            whose = json.loads(info[b"whose"])
            if whose.get("owner") != run.owner or whose.get("run") != run.run_id:
                return None  # the store's own record says whose it is
            ended = _bytes(info[b"ended"]) == b"1"
            return RunInfo(
                owner=whose["owner"],
                thread_id=whose["thread"],
                ended=ended,
                process=str(whose.get("process", "")),
            )

    async def run_events(self, run: RunKey, after: int, wait: float) -> list[Batch]:
        """One round trip for what is there and whether the run ended; then, with nothing
        there and the run going, a blocking read (on its own connection) for up to ``wait``
        seconds (at most ``LONGEST_WAIT``)."""
        events, since = f"{_PREFIX}events:{run.name}", f"{after}-0"
        with self._asked():
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.xread({events: since})
                pipe.hget(f"{_PREFIX}run:{run.name}", "ended")
                read, ended = await pipe.execute()
            batches = _batches(read)
            if not batches and ended != b"1" and wait > 0:
                # After what was read (the run's first entry has no frames): a batch added
                # since is returned at once, and none makes it wait, not spin.
                block = _ms(min(wait, LONGEST_WAIT))
                last = read[-1][1][-1][0] if read and read[-1][1] else since
                batches = _batches(await self._blocking.xread({events: last}, block=block))
            return batches

    async def want(self, run: RunKey, process: str) -> None:
        wants = f"{_PREFIX}wants:{digest(process)}"
        with self._asked():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.sadd(wants, run.name)
                pipe.pexpire(wants, _ms(self._run_alive))
                await pipe.execute()

    async def wanted(self, process: str, runs: Sequence[RunKey]) -> list[RunKey]:
        """One ``SPOP`` of the process's asks, whatever the number of its runs."""
        if not runs:
            return []
        with self._asked():
            taken = await self._client.spop(f"{_PREFIX}wants:{digest(process)}", _MAX_WANTS)
        if not taken:  # most looks: nobody elsewhere asked
            return []
        asked = {_bytes(m) for m in taken if isinstance(m, bytes | str)}
        return [run for run in runs if run.name.encode() in asked]

    # --- cancels ------------------------------------------------------------------------------

    async def cancel(self, run: RunKey) -> None:
        with self._asked():
            await self._client.set(f"{_PREFIX}cancel:{run.name}", b"1", px=_ms(CANCEL_KEPT))

    async def cancelled(self, runs: Sequence[RunKey]) -> list[RunKey]:
        if not runs:
            return []
        with self._asked():
            asked = await self._client.mget([f"{_PREFIX}cancel:{run.name}" for run in runs])
        return [run for run, value in zip(runs, asked, strict=True) if value is not None]

    async def available(self) -> bool:
        # A write, as a save is: a Redis may answer PING and refuse writes (a read-only
        # replica, full memory with noeviction, an ACL).
        try:
            return bool(await self._client.set(_HEALTH_KEY, b"1", px=_HEALTH_TTL_MS))
        except Exception:
            return False

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._blocking.aclose()


async def _encoded(batches: Sequence[Batch]) -> list[str]:
    """The batches' frames as JSON: in a worker thread when they are many (a whole run handed
    over at its end), so that the event loop is not held."""

    def encode() -> list[str]:
        return [frames_json(batch) for batch in batches]

    size = sum(len(frame) for batch in batches for frame in batch.frames)
    return await anyio.to_thread.run_sync(encode) if size > _ENCODED_ON_LOOP else encode()


def _batches(read: Any) -> list[Batch]:
    """The batches of an ``XREAD`` of one stream (its end with no frames left out)."""
    batches = []
    for _, entries in read or ():
        for _, fields in entries:
            frames = frames_from_json(fields[b"frames"])
            if frames:
                batches.append(Batch(int(fields[b"first"]), frames))
    return batches
