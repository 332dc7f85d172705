"""The thread stores (``--threads memory | file:///DIR | redis://…``) against one contract:
threads kept per owner, bounded in time and number, listed the most recently saved first; a
run's events as numbered batches, read after any frame and waited for, by another instance on
the same URL (what another process sees); a cancel seen across instances; a store that is down
or mute is a ``ThreadStoreError`` that names it without its password.

The Redis is a real ``redis-server`` (one per module, and one of its own for the test that
stops it); the mute Redis is a socket peer written here, which takes a connection and never
answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from bridge.serve.threads import file_runs, file_store, store
from bridge.serve.threads.budget import THREAD_OVERHEAD
from bridge.serve.threads.file_store import FileThreads
from bridge.serve.threads.memory_store import MemoryThreads
from bridge.serve.threads.records import digest
from bridge.serve.threads.redis_store import RedisThreads
from bridge.serve.threads.store import (
    Batch,
    RunKey,
    ThreadStore,
    ThreadStoreError,
    ThreadSummary,
)
from bridge.serve.threads.stores import thread_store
from bridge.serve.tools.claims import REDIS_TIMEOUT
from redis_server import RedisServer

pytestmark = pytest.mark.anyio

T = TypeVar("T")
OWNER, OTHER = digest("Bearer alice-token"), digest("Bearer mallory-token")
KINDS = ["memory", "file", "redis"]
SHARED = ["file", "redis"]
#: Ids a client may choose: separators, dots, newlines, Unicode, a lone surrogate, very long.
ODD_IDS = [
    "a/b",
    "../../../etc/passwd",
    "line\nbreak\r\n",
    "ünïcødé 🧵 スレッド",
    "\ud800 lone",
    "x" * 20_000,
    "",
    "agui-bridge:thread:*",
    "%2F..%00",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """The ``--threads`` URL of a store of each kind (Redis: the module's server, emptied)."""

    def url(kind: str) -> str:
        if kind == "file":
            return tmp_path.as_uri()
        if kind == "redis":
            server: RedisServer = request.getfixturevalue("redis")
            from redis import Redis

            with contextlib.closing(Redis.from_url(server.url)) as admin:
                admin.flushdb()
            return server.url
        return "memory"

    return url


@contextlib.asynccontextmanager
async def opened(
    url: str, *, ttl: float = 600.0, max_threads: int = 1000, max_bytes: int = 1 << 62
) -> AsyncIterator[Any]:
    kept = thread_store(url, ttl=ttl, max_threads=max_threads, max_bytes=max_bytes)
    try:
        yield kept
    finally:
        await kept.aclose()


def summary(thread_id: str, title: str = "", updated: float = 1.0) -> ThreadSummary:
    return ThreadSummary(id=thread_id, title=title or f"about {thread_id[:20]}", updated=updated)


async def keep(kept: ThreadStore, thread_id: str, document: bytes, owner: str = OWNER) -> None:
    await kept.save(owner, thread_id, document, summary(thread_id))


def run(run_id: str, owner: str = OWNER) -> RunKey:
    return RunKey(owner, run_id)


def runs(*run_ids: str) -> list[RunKey]:
    return [run(run_id) for run_id in run_ids]


def frames(first: int, last: int) -> list[str]:
    return [
        f'data: {{"type":"TEXT_MESSAGE_CONTENT","delta":"{n}"}}\n\n' for n in range(first, last + 1)
    ]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- threads --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_thread_saved_is_loaded_and_a_save_replaces_it(
    kind: str, url_of: Callable[[str], str]
) -> None:
    async with opened(url_of(kind)) as kept:
        assert await kept.load(OWNER, "t1") is None
        await keep(kept, "t1", b'{"messages": [1]}')
        first = await kept.load(OWNER, "t1")
        await kept.save(OWNER, "t1", b'{"messages": [1, 2]}', summary("t1", "second"))
        assert await kept.load(OWNER, "t1") == b'{"messages": [1, 2]}'
        assert [s.title for s in await kept.threads(OWNER)] == ["second"]
    assert first == b'{"messages": [1]}'


@pytest.mark.parametrize("kind", KINDS)
async def test_saves_made_at_once_are_each_kept(kind: str, url_of: Callable[[str], str]) -> None:
    """Saves made at once are each kept, a thread saved again keeps its later save, and Redis's
    scripts, once the server forgot them (``SCRIPT FLUSH``), are loaded again."""
    url = url_of(kind)
    async with opened(url) as kept:
        if kind == "redis":
            from redis.asyncio import Redis

            async with Redis.from_url(url) as admin:
                await admin.script_flush()
        await asyncio.gather(*(keep(kept, f"t{n}", f'{{"n": {n}}}'.encode()) for n in range(8)))
        await keep(kept, "t0", b'{"n": "again"}')
        assert await kept.load(OWNER, "t0") == b'{"n": "again"}'
        for n in range(1, 8):
            assert await kept.load(OWNER, f"t{n}") == f'{{"n": {n}}}'.encode()
        assert len(await kept.threads(OWNER)) == 8


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_begun_with_its_thread_saves_the_thread_too(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """``run_begin(…, saving=…)``: the run is known (a shared store) and the thread saved as it
    begins, by one command to Redis (``INFO commandstats``: one ``EVALSHA`` more)."""
    url = url_of(kind)
    async with opened(url) as kept:
        if kind == "redis":
            from redis.asyncio import Redis

            admin = Redis.from_url(url)

            async def evalshas() -> int:
                stats = await admin.info("commandstats")
                return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))

            await kept.run_begin(run("warm", OWNER), "tw", saving=(b"{}", summary("tw")))
            before = await evalshas()
        await kept.run_begin(run("r1", OWNER), "t1", "p", saving=(b'{"n": 1}', summary("t1")))
        assert await kept.load(OWNER, "t1") == b'{"n": 1}'
        if kind == "redis":
            assert await evalshas() == before + 1
            await admin.aclose()
        if kept.shared:
            info = await kept.run_info(run("r1"))
            assert info is not None and (info.owner, info.thread_id, info.ended) == (
                OWNER,
                "t1",
                False,
            )


@pytest.mark.parametrize("kind", KINDS)
async def test_another_owner_finds_nothing_of_a_thread(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """A thread id is no secret: under another owner it reads as unknown, is not listed, and
    cannot be forgotten; the owner's stays."""
    async with opened(url_of(kind)) as kept:
        await keep(kept, "shared-id", b"alice's")
        assert await kept.load(OTHER, "shared-id") is None
        assert await kept.threads(OTHER) == []
        assert await kept.forget(OTHER, "shared-id") is None
        await keep(kept, "shared-id", b"mallory's", owner=OTHER)
        assert await kept.load(OWNER, "shared-id") == b"alice's"
        assert await kept.load(OTHER, "shared-id") == b"mallory's"


@pytest.mark.parametrize("kind", KINDS)
async def test_threads_are_listed_most_recently_saved_first_with_their_summaries(
    kind: str, url_of: Callable[[str], str]
) -> None:
    async with opened(url_of(kind)) as kept:
        for index, thread_id in enumerate(["a", "b", "c", "a"]):
            await kept.save(
                OWNER, thread_id, b"{}", summary(thread_id, f"{thread_id}{index}", index)
            )
        running = ThreadSummary(id="d", title="going", updated=9.5, running="run-1")
        await kept.save(OWNER, "d", b"{}", running)
        listed = await kept.threads(OWNER)
    assert listed == [
        running,
        ThreadSummary(id="a", title="a3", updated=3.0),
        ThreadSummary(id="c", title="c2", updated=2.0),
        ThreadSummary(id="b", title="b1", updated=1.0),
    ]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_forgotten_thread_is_gone(kind: str, url_of: Callable[[str], str]) -> None:
    async with opened(url_of(kind)) as kept:
        await keep(kept, "t1", b"one")
        await keep(kept, "t2", b"two")
        assert await kept.forget(OWNER, "t1") == summary("t1")
        assert await kept.forget(OWNER, "t1") is None
        assert await kept.load(OWNER, "t1") is None
        assert [s.id for s in await kept.threads(OWNER)] == ["t2"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_thread_expires_ttl_after_its_last_save(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """Idle threads go: ``ttl`` after its last save a thread reads as unknown and is not
    listed (the waits here let the time pass; nothing is timed)."""
    async with opened(url_of(kind), ttl=1.0) as kept:
        await keep(kept, "old", b"old")
        await keep(kept, "renewed", b"renewed")
        await anyio.sleep(0.6)
        await keep(kept, "renewed", b"renewed again")
        await anyio.sleep(0.6)
        old = await kept.load(OWNER, "old")
        listed = [s.id for s in await kept.threads(OWNER)]
        renewed = await kept.load(OWNER, "renewed")
        await anyio.sleep(1.1)
        assert await kept.load(OWNER, "renewed") is None
        assert await kept.threads(OWNER) == []
        assert await kept.forget(OWNER, "renewed") is None
    assert (old, listed, renewed) == (None, ["renewed"], b"renewed again")


async def test_the_file_store_removes_what_expired_from_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What expires leaves the disk at the next sweep (at most once a minute; here at every
    operation): threads, owners' folders left empty (their ``.since`` with them), ended runs
    and cancels."""
    monkeypatch.setattr(file_store, "SWEEP_EVERY", 0.0)
    monkeypatch.setattr(store, "RUN_KEPT", 0.5)
    monkeypatch.setattr(file_runs, "CANCEL_KEPT", 0.5)
    async with opened(tmp_path.as_uri(), ttl=0.5) as kept:
        await keep(kept, "t1", b"x" * 1000)
        await keep(kept, "t2", b"y", owner=OTHER)
        await kept.run_begin(run("r1", OWNER), "t1")
        await kept.run_append(run("r1"), Batch(1, frames(1, 2)), ended=True)
        await kept.cancel(run("r1"))
        before = files_under(tmp_path)
        await anyio.sleep(1.0)
        await kept.threads(OWNER)  # any operation sweeps (SWEEP_EVERY = 0)
        after = files_under(tmp_path)
        folders = sorted(path.name for path in tmp_path.iterdir())  # noqa: ASYNC240
    assert len(before) == 7  # two threads, two owners' .since, a run's two files, a cancel
    assert after == []
    assert folders == ["cancels", "runs", "threads"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_save_beyond_max_threads_forgets_the_least_recently_saved(
    kind: str, url_of: Callable[[str], str]
) -> None:
    async with opened(url_of(kind), max_threads=3) as kept:
        for thread_id in ["t1", "t2", "t3"]:
            await keep(kept, thread_id, thread_id.encode())
        await keep(kept, "t1", b"t1 again")  # saved again: now the most recent
        await keep(kept, "t4", b"t4")
        listed = [s.id for s in await kept.threads(OWNER)]
        loaded = [await kept.load(OWNER, t) for t in ["t1", "t2", "t3", "t4"]]
    assert listed == ["t4", "t1", "t3"]
    assert loaded == [b"t1 again", None, b"t3", b"t4"]


async def test_redis_forgets_what_went_from_the_owners_list_and_summaries(
    redis: RedisServer,
) -> None:
    """The owner's list and summaries hold the threads kept, no more: a thread beyond the bound
    and one expired leave both (and their documents) at the next save, so an owner who saves
    new threads for ever keeps a bounded hash."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis.url)
    owner = digest(OWNER)
    try:
        async with opened(redis.url, ttl=1.0, max_threads=3) as kept:
            for thread_id in ["t1", "t2", "t3", "t4"]:
                await keep(kept, thread_id, b"{}")
            beyond = (
                await admin.hlen(f"agui-bridge:summaries:{owner}"),
                await admin.zcard(f"agui-bridge:threads:{owner}"),
            )
            await anyio.sleep(1.2)
            await keep(kept, "t5", b"{}")
            after_expiry = await admin.hkeys(f"agui-bridge:summaries:{owner}")
            documents = await admin.keys(f"agui-bridge:thread:{owner}:*")
    finally:
        await admin.aclose()
    assert beyond == (3, 3)
    assert after_expiry == [digest("t5").encode()]
    assert documents == [f"agui-bridge:thread:{owner}:{digest('t5')}".encode()]


async def test_stray_files_and_folders_in_the_file_store_stop_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder or a file that is none of the store's among its threads, runs and cancels (an
    operator's, a backup tool's) is left alone: listing, saving, bounding and sweeping go on."""
    monkeypatch.setattr(file_store, "SWEEP_EVERY", 0.0)
    owner_folder = tmp_path / "threads" / digest(OWNER)
    for folder in [
        owner_folder / "a-folder",
        tmp_path / "runs" / "x.ended",
        tmp_path / "cancels" / "y",
    ]:
        folder.mkdir(parents=True)
    (tmp_path / "threads" / "stray-file").write_text("not an owner")
    async with opened(tmp_path.as_uri(), max_threads=1) as kept:
        await keep(kept, "t1", b"one")
        await keep(kept, "t2", b"two")
        listed = [s.id for s in await kept.threads(OWNER)]
        loaded = await kept.load(OWNER, "t2")
    assert listed == ["t2"] and loaded == b"two"
    assert (owner_folder / "a-folder").is_dir()


BUDGETED = ["memory", "file"]
#: A thread of ``SIZE`` bytes costs that and ``THREAD_OVERHEAD`` of a store's budget.
SIZE = 1000


async def _kept_of(kept: Any, owner: str, *thread_ids: str) -> list[str]:
    return [t for t in thread_ids if await kept.load(owner, t) is not None]


@pytest.mark.parametrize("kind", BUDGETED)
async def test_the_owner_holding_the_most_gives_way_first(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """Over the budget, the owner holding most bytes among those with more than one thread
    loses its least recently saved; the others keep theirs."""
    cost = SIZE + THREAD_OVERHEAD
    # Room for five threads and their summaries (the file store counts a thread's file).
    async with opened(url_of(kind), max_bytes=5 * (cost + 100)) as kept:
        await keep(kept, "b1", b"b" * SIZE, owner=OTHER)
        for thread_id in ["a1", "a2", "a3"]:
            await keep(kept, thread_id, b"a" * SIZE)
        await keep(kept, "b2", b"b" * SIZE, owner=OTHER)
        await keep(kept, "b3", b"b" * SIZE, owner=OTHER)  # six: one too many
        alice = await _kept_of(kept, OWNER, "a1", "a2", "a3")
        bob = await _kept_of(kept, OTHER, "b1", "b2", "b3")
    assert (alice, bob) == (["a2", "a3"], ["b1", "b2", "b3"])  # Alice held most: 3 to 2


@pytest.mark.parametrize("kind", BUDGETED)
async def test_a_flood_of_new_owners_cannot_push_out_an_owners_one_thread(
    kind: str, url_of: Callable[[str], str]
) -> None:
    cost = SIZE + THREAD_OVERHEAD
    async with opened(url_of(kind), max_bytes=20 * (cost + 100)) as kept:
        await keep(kept, "mine", b"m" * SIZE)
        for index in range(200):
            await keep(kept, "t", b"f" * SIZE, owner=f"made-up-{index}")
        mine = await kept.load(OWNER, "mine")
        flood = [index for index in range(200) if await kept.load(f"made-up-{index}", "t")]
    assert mine == b"m" * SIZE
    assert len(flood) >= 18 and flood == list(range(len(flood)))  # the newest owners' went


@pytest.mark.parametrize("kind", BUDGETED)
async def test_a_thread_over_the_whole_budget_is_not_kept(
    kind: str, url_of: Callable[[str], str]
) -> None:
    async with opened(url_of(kind), max_bytes=4 * SIZE) as kept:
        await keep(kept, "small", b"s" * SIZE)
        await keep(kept, "big", b"small before" * 10)
        await keep(kept, "big", b"b" * (4 * SIZE))  # saved again, too big: gone, old and new
        assert await _kept_of(kept, OWNER, "small", "big") == ["small"]


@pytest.mark.parametrize("kind", KINDS)
async def test_ids_of_any_characters_are_kept_apart_and_never_name_a_path_or_key(
    kind: str, url_of: Callable[[str], str], tmp_path: Path
) -> None:
    """Thread and run ids are the client's strings: each is kept under its own name (a
    digest), whatever it holds, and comes back as it was in its summary."""
    url = url_of(kind)
    async with opened(url) as kept:
        for index, thread_id in enumerate(ODD_IDS):
            await kept.save(OWNER, thread_id, f"doc {index}".encode(), summary(thread_id, "t"))
        loaded = [await kept.load(OWNER, thread_id) for thread_id in ODD_IDS]
        listed = {s.id for s in await kept.threads(OWNER)}
        for run_id in ODD_IDS[:3]:
            await kept.cancel(run(run_id))
        cancelled = await kept.cancelled(runs(*ODD_IDS, "never"))
        if kind != "memory":
            for run_id in ODD_IDS:
                await kept.run_begin(run(run_id, OWNER), run_id)
                await kept.run_append(run(run_id), Batch(1, [f"data: {run_id!r}\n\n"]), ended=True)
            for run_id in ODD_IDS:
                info = await kept.run_info(run(run_id))
                assert (info.owner, info.thread_id, info.ended) == (OWNER, run_id, True)
                [read] = await kept.run_events(run(run_id), 0, wait=0)
                assert read.frames == (f"data: {run_id!r}\n\n",)
    assert loaded == [f"doc {index}".encode() for index in range(len(ODD_IDS))]
    assert listed == set(ODD_IDS)
    assert cancelled == runs(*ODD_IDS[:3])
    hex_name = re.compile(r"[0-9a-f]{64}(\.events|\.ended)?|\.since")
    if kind == "file":
        names = [name.rpartition("/")[2] for name in files_under(tmp_path)]
        assert names and all(hex_name.fullmatch(name) for name in names), names
    if kind == "redis":
        from redis.asyncio import Redis

        admin = Redis.from_url(url)
        try:
            keys = [key.decode() for key in await admin.keys("*")]
        finally:
            await admin.aclose()
        shape = re.compile(
            r"agui-bridge:(thread:\w{64}:|threads:|summaries:|run:|events:|cancel:)\w{64}"
        )
        assert keys and all(shape.fullmatch(key) for key in keys), keys


# --- runs' events ---------------------------------------------------------------------------


async def begun(kept: ThreadStore, run_id: str, ended: bool = True) -> list[str]:
    """A run of seven frames in three batches (``[1-3] [4] [5-7]``), ended or going; its
    frames."""
    await kept.run_begin(run(run_id, OWNER), "t1")
    await kept.run_append(run(run_id), Batch(1, frames(1, 3)))
    await kept.run_append(run(run_id), Batch(4, frames(4, 4)))
    await kept.run_append(run(run_id), Batch(5, frames(5, 7)), ended=ended)
    return frames(1, 7)


def after(batches: list[Batch], seen: int) -> list[str]:
    """The frames of ``batches`` after number ``seen``, each once."""
    return [f for b in batches for n, f in enumerate(b.frames, b.first) if n > seen]


@pytest.mark.parametrize("kind", SHARED)
async def test_a_runs_events_are_read_after_every_frame_number(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """A client that had frame ``n`` gets the batches holding frames after it (the first may
    begin before it), at every ``n``, from this instance or another on the same URL."""
    url = url_of(kind)
    async with opened(url) as kept, opened(url) as other:
        going = await begun(kept, "run-1", ended=False)
        info_going = await other.run_info(run("run-1"))
        await kept.run_append(run("run-1"), Batch(8, frames(8, 8)), ended=True)
        sent = [*going, *frames(8, 8)]
        for reader in (kept, other):
            for seen in range(len(sent) + 1):
                batches = await reader.run_events(run("run-1"), seen, 0)
                assert after(batches, seen) == sent[seen:], seen
                assert all(batch.last > seen for batch in batches)
        info_ended = await other.run_info(run("run-1"))
        unknown = await other.run_info(run("no-such-run"))
    assert info_going is not None and info_going.ended is False
    assert info_ended is not None and info_ended.ended is True
    assert (info_ended.owner, info_ended.thread_id) == (OWNER, "t1")
    assert unknown is None


async def test_the_memory_store_keeps_no_run_events() -> None:
    """The process keeps its own runs' events; the memory store, which no other process reads,
    keeps none and does not wait."""
    async with opened("memory") as kept:
        await begun(kept, "run-1")
        assert await kept.run_info(run("run-1")) is None
        assert await kept.run_events(run("run-1"), 0, wait=3600) == []


@pytest.mark.parametrize("kind", SHARED)
@pytest.mark.parametrize("writer", ["same", "another"])
async def test_a_follower_waiting_receives_the_batch_appended_meanwhile(
    kind: str, writer: str, url_of: Callable[[str], str]
) -> None:
    """``run_events`` waits for the next batch when there is none yet, and returns it when
    another task appends it, through this store instance or another on the same URL (another
    process). For Redis, a wait longer than the client's timeout (``REDIS_TIMEOUT``) ends with the
    batch, not an error: the blocking read has a connection of its own."""
    url = url_of(kind)
    async with opened(url) as kept, opened(url) as other:
        await kept.run_begin(run("run-w", OWNER), "t1")
        await kept.run_append(run("run-w"), Batch(1, frames(1, 2)))
        follower = asyncio.ensure_future(kept.run_events(run("run-w"), 2, wait=REDIS_TIMEOUT + 30))
        await anyio.sleep(REDIS_TIMEOUT + 0.5 if kind == "redis" else 0.5)
        waiting = not follower.done()
        appender = kept if writer == "same" else other
        await appender.run_append(run("run-w"), Batch(3, frames(3, 4)), ended=True)
        received = await follower
    assert waiting
    assert received == [Batch(3, tuple(frames(3, 4)))]


@pytest.mark.parametrize("kind", SHARED)
async def test_a_follower_of_a_run_with_no_batch_yet_waits_for_its_first(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """Before a run's first batch (Redis: only the entry of no frames its begin made),
    ``run_events`` waits for it: it returned nothing at once, and its follower asked again and
    again (a spin) until the run's end."""
    url = url_of(kind)
    async with opened(url) as kept, opened(url) as other:
        await kept.run_begin(run("run-first", OWNER), "t1")
        follower = asyncio.ensure_future(other.run_events(run("run-first"), 0, wait=30))
        await anyio.sleep(0.5)
        waiting = not follower.done()
        await kept.run_append(run("run-first"), Batch(1, frames(1, 2)))
        received = await follower
    assert waiting
    assert received == [Batch(1, tuple(frames(1, 2)))]


@pytest.mark.parametrize("kind", SHARED)
async def test_an_ended_run_is_not_waited_for_and_an_unknown_run_has_no_events(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """After the last frame of an ended run there is nothing to wait for: the read ends at
    once with nothing, however long the caller would wait (the follow ends; order, not time:
    it is done before a task that waits one second is)."""
    async with opened(url_of(kind)) as kept:
        await begun(kept, "run-e")
        read = asyncio.ensure_future(kept.run_events(run("run-e"), 7, wait=30))
        sleeper = asyncio.ensure_future(anyio.sleep(1))
        done, _ = await asyncio.wait({read, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {read} and read.result() == []
        await sleeper


@pytest.mark.parametrize("kind", SHARED)
@pytest.mark.parametrize("frames_before", [0, 2])
async def test_a_run_ended_by_a_batch_of_no_frames_ends_its_followers_wait(
    kind: str, frames_before: int, url_of: Callable[[str], str]
) -> None:
    """A run whose terminal batch holds no frames (the end said apart from the last frames, or
    a run that ended before its first): a follower waiting on another instance stops waiting
    with nothing, and the run reads as ended (order, not time: the follower is done before a
    task that waits two seconds is, though it would have waited thirty)."""
    url = url_of(kind)
    async with opened(url) as kept, opened(url) as other:
        await kept.run_begin(run("run-0", OWNER), "t1")
        if frames_before:
            await kept.run_append(run("run-0"), Batch(1, frames(1, frames_before)))
        follower = asyncio.ensure_future(other.run_events(run("run-0"), frames_before, wait=30))
        await anyio.sleep(0.3)
        await kept.run_append(run("run-0"), Batch(frames_before + 1, []), ended=True)
        sleeper = asyncio.ensure_future(anyio.sleep(2))
        done, _ = await asyncio.wait({follower, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {follower} and follower.result() == []
        info = await other.run_info(run("run-0"))
        everything = await other.run_events(run("run-0"), 0, wait=0)
        await sleeper
    assert info is not None and info.ended
    assert after(everything, 0) == frames(1, frames_before)


@pytest.mark.parametrize("kind", SHARED)
async def test_a_runs_events_are_kept_RUN_KEPT_after_its_end(
    kind: str, url_of: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "RUN_KEPT", 1.0)
    async with opened(url_of(kind)) as kept:
        await begun(kept, "ended")
        await begun(kept, "going", ended=False)
        kept_at_end = await kept.run_info(run("ended"))
        await anyio.sleep(1.5)
        assert await kept.run_info(run("ended")) is None
        assert await kept.run_events(run("ended"), 0, wait=0) == []
        going = await kept.run_info(run("going"))
    assert kept_at_end is not None and kept_at_end.ended
    assert going is not None and not going.ended


async def test_redis_keeps_a_going_run_an_hour_from_its_last_batch_and_an_ended_one_RUN_KEPT(
    redis: RedisServer,
) -> None:
    from redis.asyncio import Redis

    admin = Redis.from_url(redis.url)
    try:
        async with opened(redis.url, ttl=600) as kept:
            await keep(kept, "t1", b"{}")
            await begun(kept, "going", ended=False)
            await begun(kept, "ended")
            ttls = {
                name: await admin.pttl(f"agui-bridge:{name}") / 1000
                for name in [
                    f"thread:{digest(OWNER)}:{digest('t1')}",
                    f"threads:{digest(OWNER)}",
                    f"summaries:{digest(OWNER)}",
                    f"run:{run('going').name}",
                    f"events:{run('going').name}",
                    f"run:{run('ended').name}",
                    f"events:{run('ended').name}",
                ]
            }
    finally:
        await admin.aclose()
    expected = [600, 600, 600, 3600, 3600, store.RUN_KEPT, store.RUN_KEPT]
    assert all(
        want - 5 <= ttl <= want for ttl, want in zip(ttls.values(), expected, strict=True)
    ), ttls


# --- cancels --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancel_asked_of_one_instance_is_seen_by_another_on_the_same_url(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """A cancel reaches the process that runs the run (for the memory store: this one)."""
    url = url_of(kind)
    async with opened(url) as asker, opened(url) as runner:
        seer = asker if kind == "memory" else runner
        assert await seer.cancelled(runs("run-1", "run-2")) == []
        await asker.cancel(run("run-2"))
        seen = await seer.cancelled(runs("run-1", "run-2", "run-3"))
        assert await seer.cancelled(runs()) == []
    assert seen == runs("run-2")


@pytest.mark.parametrize("kind", ["file", "redis"])
async def test_a_want_reaches_the_process_named_once_and_no_other(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """A follower on another process asks for a run's events (``want``): the process that runs
    it, named as its run's info names it, takes the ask once; another process sees none."""
    url = url_of(kind)
    async with opened(url) as follower, opened(url) as runner:
        await runner.run_begin(run("run-é\ud800", OWNER), "t1", "proc-a")
        info = await follower.run_info(run("run-é\ud800"))
        assert info is not None and info.process == "proc-a"
        assert await runner.wanted("proc-a", runs("run-é\ud800", "run-2")) == []
        await follower.want(run("run-é\ud800"), info.process)
        assert await runner.wanted("proc-b", runs("run-é\ud800")) == []
        assert await runner.wanted("proc-a", runs("run-2", "run-é\ud800")) == runs("run-é\ud800")
        assert await runner.wanted("proc-a", runs("run-é\ud800")) == []  # taken


async def test_the_memory_store_has_no_other_process_to_ask() -> None:
    async with opened("memory") as kept:
        await kept.run_begin(run("run-1", OWNER), "t1", "proc-a")
        await kept.want(run("run-1"), "proc-a")
        assert await kept.run_info(run("run-1")) is None
        assert await kept.wanted("proc-a", runs("run-1")) == []


# --- stores that fail -----------------------------------------------------------------------


async def test_redis_stopped_mid_use_is_a_thread_store_error_and_comes_back(tmp_path: Path) -> None:
    """Redis goes away: every operation raises ``ThreadStoreError`` naming the store without
    its password (not a hang, not another exception), and ``available`` says so; back, the
    store works again (empty: nothing is saved)."""
    server = RedisServer(tmp_path, password="Pw5Zr8Lq2Xv")
    server.start()
    try:
        async with opened(server.url) as kept:
            await keep(kept, "t1", b"before")
            await begun(kept, "run-1", ended=False)
            server.stop()
            failures = []
            operations: list[Callable[[], Any]] = [
                lambda: kept.load(OWNER, "t1"),
                lambda: keep(kept, "t1", b"during"),
                lambda: kept.threads(OWNER),
                lambda: kept.forget(OWNER, "t1"),
                lambda: kept.run_begin(run("run-2", OWNER), "t1"),
                lambda: kept.run_append(run("run-1"), Batch(8, frames(8, 8))),
                lambda: kept.run_info(run("run-1")),
                lambda: kept.run_events(run("run-1"), 7, wait=5),
                lambda: kept.cancel(run("run-1")),
                lambda: kept.cancelled(runs("run-1")),
                lambda: kept.want(run("run-1"), "proc-a"),
                lambda: kept.wanted("proc-a", runs("run-1")),
            ]
            for operation in operations:
                with pytest.raises(ThreadStoreError) as raised:
                    await operation()
                failures.append(raised.value)
            down = await kept.available()
            server.start()
            up = await kept.available()
            await keep(kept, "t1", b"after")
            after_restart = await kept.load(OWNER, "t1")
    finally:
        server.stop()
    where = f"redis://127.0.0.1:{server.port}/0"
    assert all(
        where in failure.message and "Pw5Zr8Lq2Xv" not in failure.message for failure in failures
    )
    assert all(failure.code == "thread_store_unavailable" for failure in failures)
    assert (down, up, after_restart) == (False, True, b"after")


async def test_a_file_store_whose_folder_is_gone_is_a_thread_store_error(tmp_path: Path) -> None:
    folder = tmp_path / "not-there"
    async with opened(folder.as_uri()) as kept:
        assert await kept.available() is False
        with pytest.raises(ThreadStoreError) as raised:
            await keep(kept, "t1", b"{}")
        assert await kept.load(OWNER, "t1") is None  # nothing kept reads as unknown
    assert f"file://{folder}" in raised.value.message


async def test_a_redis_that_never_answers_is_a_thread_store_error(tmp_path: Path) -> None:
    """A Redis that takes the connection and never answers (blocked, or not a Redis): each
    operation ends with ``ThreadStoreError`` after the client's timeout (``REDIS_TIMEOUT``,
    and its one retry), a follower's wait too, and ``available`` is False: nothing hangs."""
    received: list[bytes] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                received.append(data)
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with opened(f"redis://:Mq4Tz7Wp1@127.0.0.1:{port}/0") as kept:
            with pytest.raises(ThreadStoreError) as loading:
                await kept.load(OWNER, "t1")
            with pytest.raises(ThreadStoreError):
                await kept.run_events(run("run-1"), 0, wait=60)
            available = await kept.available()
    finally:
        server.close()
        await server.wait_closed()
    assert received  # it was asked
    assert f"redis://127.0.0.1:{port}/0" in loading.value.message
    assert "Mq4Tz7Wp1" not in loading.value.message
    assert available is False


# --- big documents --------------------------------------------------------------------------


def off_the_loop(
    work: Callable[..., T], loop: asyncio.AbstractEventLoop, seen: list[str]
) -> Callable[..., T]:
    """``work``, which first has the event loop answer: on the loop's own thread that would
    wait forever (a timeout error here), in a worker thread the loop answers at once."""

    def asking_the_loop(*args: Any) -> T:
        seen.append(asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "answered"), loop).result(30))
        seen.append(
            "worker" if threading.current_thread() is not threading.main_thread() else "main"
        )
        return work(*args)

    return asking_the_loop


@pytest.mark.parametrize("kind", SHARED)
async def test_a_document_of_several_megabytes_is_kept_without_holding_the_loop(
    kind: str, url_of: Callable[[str], str]
) -> None:
    """A thread of 8 MB is saved and loaded whole; the file store writes and reads it in a
    worker thread, while the event loop answers (the Redis client is asynchronous)."""
    document = os.urandom(4 * 1024 * 1024).hex().encode()
    seen: list[str] = []
    async with opened(url_of(kind)) as kept:
        if isinstance(kept, FileThreads):
            loop = asyncio.get_running_loop()
            kept._save = off_the_loop(kept._save, loop, seen)  # type: ignore[method-assign]
            kept._load = off_the_loop(kept._load, loop, seen)  # type: ignore[method-assign]
        await keep(kept, "big", document)
        loaded = await kept.load(OWNER, "big")
    assert loaded == document
    assert seen == (["answered", "worker"] * 2 if kind == "file" else [])


# --- the URL --------------------------------------------------------------------------------


def test_the_url_names_the_store() -> None:
    assert isinstance(thread_store("memory", ttl=1), MemoryThreads)
    assert isinstance(thread_store("MEMORY", ttl=1), MemoryThreads)
    assert isinstance(thread_store("file:///var/lib/agui", ttl=1), FileThreads)
    for url in [
        "redis://h:6379/0",
        "rediss://h/0",
        "unix:///run/redis.sock",
        "valkey://h/0",
        "valkeys://h/0",
    ]:
        made = thread_store(url, ttl=1)
        assert isinstance(made, RedisThreads) and made.shared
    assert thread_store("memory", ttl=1).shared is False
    assert thread_store("file:///x", ttl=1).shared is True
    assert thread_store("redis://:Pw3Xq9@h:6379/0", ttl=1).shown == "redis://h:6379/0"


@pytest.mark.parametrize("url", ["ftp://:Pw3Xq9@h/x", "file://:Pw3Xq9@host/x", "mem", "file:"])
def test_a_url_that_names_no_store_is_refused_naming_the_flag(url: str) -> None:
    with pytest.raises(ValueError, match="--threads") as raised:
        thread_store(url, ttl=1)
    assert "Pw3Xq9" not in str(raised.value)
