"""A kept run's client written by the run's own task (``LiveRun.carry``): once the client has
every frame, each new one is written as the run flushes, with no task switch per frame; a
second client follows as ``follow``'s do; each gets every frame once, whatever the run and the
clients do (a cancel while the socket is full, a client gone mid-write, a response over)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from ag_ui.core import BaseEvent, RunFinishedEvent

from bridge.core.encode import encode_event
from bridge.serve.threads.live import LiveRun

pytestmark = pytest.mark.anyio

END = encode_event(RunFinishedEvent(thread_id="t", run_id="r"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def frame(n: int) -> str:
    return f'data: {{"type":"CUSTOM","name":"{n}","value":{n}}}\n\n'


class Client:
    """A client's response as ``FrameSink`` and the server make it: frames written are held,
    and sent by the flush, which takes them first, then can wait (a full socket: a cancel
    there loses them, as the server writes after it waits) or fail (a response over).
    ``frames``: those sent, each with its number; ``writers``: the tasks that wrote them."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, str]] = []
        self.pending: list[tuple[int, str]] = []
        self.writers: list[asyncio.Task[object] | None] = []
        self.blocked: asyncio.Future[None] | None = None
        self.fail = False
        self.flushing = asyncio.Event()

    def add(self, text: str) -> None:
        """Frames each with its ``id:`` line (``id: r:N``)."""
        for block in text.split("\n\n")[:-1]:
            ident, data = block.split("\n", 1)
            assert ident.startswith("id: r:")
            self.pending.append((int(ident.removeprefix("id: r:")), data + "\n\n"))
        self.writers.append(asyncio.current_task())

    async def flush(self) -> None:
        taken, self.pending = self.pending, []
        if self.fail:
            raise RuntimeError("the response is over")
        if self.blocked is not None:
            self.flushing.set()
            await self.blocked
        self.frames += taken


async def tick() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def started(
    live: LiveRun, body: Callable[[], Awaitable[None]], ends: list[BaseEvent] | None = None
) -> None:
    async def cancel_ends(_: LiveRun) -> list[BaseEvent]:
        return ends or [RunFinishedEvent(thread_id="t", run_id="r")]

    live.start(
        body,
        timeout=60,
        end_with=lambda events: live.add("".join(encode_event(e) for e in events)),
        cancel_ends=cancel_ends,
        timed_out=lambda: RunFinishedEvent(thread_id="t", run_id="r"),
    )


def stepped(live: LiveRun, numbers: range, step: asyncio.Event) -> Callable[[], Awaitable[None]]:
    """A run writing frame ``n`` for each of ``numbers`` once ``step`` is set, then its end."""

    async def body() -> None:
        for n in numbers:
            await step.wait()
            step.clear()
            live.add(frame(n))
            await live.flush()
        live.add(END)
        await live.flush()

    return body


def blocked_at_the_second(
    live: LiveRun, client: Client, wrote: asyncio.Event, full: asyncio.Future[None]
) -> Callable[[], Awaitable[None]]:
    """A run writing frame 1, then, once ``wrote`` is set, frame 2 into a full socket (the
    client's flush waits on ``full``), then its end."""

    async def body() -> None:
        live.add(frame(1))
        await live.flush()
        await wrote.wait()
        client.blocked = full
        live.add(frame(2))
        await live.flush()
        live.add(END)
        await live.flush()

    return body


def new_run() -> LiveRun:
    return LiveRun("r", "owner", "t", max_bytes=1 << 20, grace=30)


async def test_the_run_writes_its_client_once_it_has_every_frame() -> None:
    live, client, step = new_run(), Client(), asyncio.Event()
    live.add(frame(1))  # written before the client came: it takes it itself
    started(live, stepped(live, range(2, 6), step))
    follower = asyncio.create_task(live.carry(client.add, client.flush))
    await tick()
    for _ in range(4):
        step.set()
        await tick()
    await asyncio.wait_for(follower, 5)
    assert client.frames == [(1, frame(1)), *[(n, frame(n)) for n in range(2, 6)], (6, END)]
    assert client.writers[0] is follower
    assert all(writer is live._task for writer in client.writers[1:])
    assert not live.followed


async def test_a_second_client_follows_while_the_first_rides_and_each_gets_every_frame() -> None:
    live, first, second, step = new_run(), Client(), Client(), asyncio.Event()
    started(live, stepped(live, range(1, 8), step))
    riding = asyncio.create_task(live.carry(first.add, first.flush))
    following = asyncio.create_task(live.carry(second.add, second.flush))
    for _ in range(7):
        await tick()
        step.set()
    await asyncio.wait_for(asyncio.gather(riding, following), 5)
    expected = [*[(n, frame(n)) for n in range(1, 8)], (8, END)]
    assert first.frames == expected and second.frames == expected
    assert all(writer is following for writer in second.writers)


async def test_a_run_cancelled_while_its_clients_socket_is_full_gives_each_frame_once() -> None:
    live, client, wrote = new_run(), Client(), asyncio.Event()
    full: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started(live, blocked_at_the_second(live, client, wrote, full))  # cancelled in frame 2
    follower = asyncio.create_task(live.carry(client.add, client.flush))
    await tick()
    wrote.set()
    await asyncio.wait_for(client.flushing.wait(), 5)
    client.blocked = None  # the client reads again
    assert live.cancel()
    await asyncio.wait_for(follower, 5)
    numbers = [n for n, _ in client.frames]
    assert numbers == [1, 2, 3]  # frame 2 written again by the follower, once it was not sent
    assert [f for _, f in client.frames][:2] == [frame(1), frame(2)]
    assert client.frames[-1][1].startswith('data: {"type":"RUN_FINISHED"')


@pytest.mark.parametrize("then", ["written", "cancelled"])
async def test_a_client_gone_mid_write_leaves_no_follower_behind(then: str) -> None:
    """The client goes while the run writes to it; the write then ends, or the run is
    cancelled in it: either way the run has no follower left, and its grace runs."""
    live, client, wrote = new_run(), Client(), asyncio.Event()
    release: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    started(live, blocked_at_the_second(live, client, wrote, release))
    follower = asyncio.create_task(live.carry(client.add, client.flush))
    await tick()
    wrote.set()
    await asyncio.wait_for(client.flushing.wait(), 5)
    follower.cancel()  # the client went away while the run wrote to it
    await tick()
    assert not live.followed and live._followers.in_grace  # the grace runs
    if then == "written":
        release.set_result(None)
    else:
        live.cancel()
    await asyncio.wait_for(live.done, 5)
    assert not live.followed


async def test_a_response_that_is_over_lets_the_run_go_on() -> None:
    live, client, other, wrote = new_run(), Client(), Client(), asyncio.Event()

    async def body() -> None:
        live.add(frame(1))
        await live.flush()
        await wrote.wait()
        client.fail = True
        for n in (2, 3):
            live.add(frame(n))
            await live.flush()
        live.add(END)
        await live.flush()

    started(live, body)
    follower = asyncio.create_task(live.carry(client.add, client.flush))
    await tick()
    wrote.set()  # the run writes frame 2 for its one follower, whose response is over
    await asyncio.wait_for(follower, 5)
    assert [n for n, _ in client.frames] == [1]  # its flush of frame 2 failed: it ended
    watcher = asyncio.create_task(live.carry(other.add, other.flush))
    await asyncio.wait_for(asyncio.gather(watcher, live.done), 5)
    assert [n for n, _ in other.frames] == [1, 2, 3, 4]
