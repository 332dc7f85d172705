"""Resilience with real servers and real sockets: a client that leaves cancels the upstream at
once, hundreds of aborted runs leave nothing behind, a slow reader slows the upstream down
instead of filling the bridge's memory, and long silences are bridged with keep-alives.

The figures are printed (``pytest -s``) for the closing note.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
import uvicorn

from agui_rules import check_frames, parse_body
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from faulty_upstream import (
    TEXT,
    FaultyUpstream,
    UpstreamRequest,
    fault_model,
    faulty_upstream,
    frame_ends,
)
from servers import LoopProbe, scripted_config, serve

T = TypeVar("T")

SLOW = fault_model("ok", n=100_000, delay=0.05)  # a chunk every 50 ms, for an hour and more
QUICK = fault_model("ok", n=60, delay=0.001)  # about a tenth of a second per run
FLOOD_CHUNKS = 60_000  # more than kernel buffers take in the 3 s of slow reading
FLOOD = fault_model("ok", n=FLOOD_CHUNKS, sndbuf=16384)  # as fast as the socket takes it
SILENT_FIRST = fault_model("ok", wait=1)


@dataclass
class Stack:
    upstream: FaultyUpstream
    url: str
    probe: LoopProbe
    config: BridgeConfig


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with faulty_upstream() as upstream:
        config = BridgeConfig(
            upstream_url=upstream.url,
            model=QUICK,
            models=(SLOW, FLOOD, SILENT_FIRST),
            idle_timeout=5.0,
            retry_backoff=0.01,
        )
        probe = LoopProbe(create_app(config))
        with serve(probe) as url:
            yield Stack(upstream, url, probe, config)


def run_input(model: str) -> dict[str, Any]:
    return {
        "threadId": "thread-resilience",
        "runId": f"run-{time.monotonic_ns()}",
        "messages": [{"id": "u1", "role": "user", "content": "Tell me a long story."}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {"model": model},
    }


class RawClient:
    """An HTTP/1.0 client on a bare socket (so the body is not chunked): it reads as slowly as
    told, counts frames without keeping them, and closes when told."""

    def __init__(self, url: str, model: str, *, rcvbuf: int | None = None) -> None:
        where = urlsplit(url)
        self.sock = socket.socket()
        if rcvbuf:  # before connect: a small window the kernel will not grow
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect((where.hostname, where.port))
        body = json.dumps(run_input(model)).encode()
        head = (
            f"POST / HTTP/1.0\r\nHost: {where.netloc}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        self.port = self.sock.getsockname()[1]
        self.body_bytes = 0
        self.frames: dict[str, int] = {}  # how many of each type
        self.text_frame_sizes: dict[str, int] = {}  # a text event's size on the wire, by delta
        self.last_frame = b""
        self._head = b""
        self._pending = b""
        self._in_body = False
        self._chunked = False  # uvicorn's httptools protocol chunks even an HTTP/1.0 answer
        self._raw = b""

    def read(self, size: int = 65536) -> bool:
        """Read once; ``False`` at the end of the body."""
        data = self.sock.recv(size)
        if not data:
            return False
        if not self._in_body:
            self._head += data
            if b"\r\n\r\n" not in self._head:
                return True
            self._in_body = True
            head, data = self._head.split(b"\r\n\r\n", 1)
            self._chunked = b"transfer-encoding: chunked" in head.lower()
        if self._chunked:
            data = self._dechunk(data)
        self.body_bytes += len(data)
        *complete, self._pending = (self._pending + data).split(b"\n\n")
        for frame in complete:
            if frame.startswith(b"data: "):
                event = json.loads(frame[6:])
                kind = event["type"]
                self.frames[kind] = self.frames.get(kind, 0) + 1
                if kind == "TEXT_MESSAGE_CONTENT":
                    self.text_frame_sizes[event["delta"]] = len(frame) + 2
                self.last_frame = frame
        return True

    def _dechunk(self, data: bytes) -> bytes:
        self._raw += data
        out = b""
        while b"\r\n" in self._raw:
            size_line, rest = self._raw.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                break
            out += rest[:size]
            self._raw = rest[size + 2 :]
        return out

    @property
    def pending(self) -> int:
        """Bytes read but not yet a whole frame."""
        return len(self._pending)

    def read_frames(self, count: int) -> None:
        while sum(self.frames.values()) < count:
            assert self.read(), "the body ended early"

    def close(self) -> None:
        self.sock.close()


def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def closed_by_peer(request: UpstreamRequest) -> bool:
    return request.peer_closed_at is not None


def test_client_disconnect_closes_the_upstream_connection_at_once(stack: Stack) -> None:
    delays = []
    for frames_first in (1, 3, 9, 15, 25):  # RUN_STARTED only, reasoning, text…
        stack.upstream.reset()
        client = RawClient(stack.url, SLOW)
        client.read_frames(frames_first)
        assert wait_for(lambda: bool(stack.upstream.requests_for(SLOW)), 5)
        request = stack.upstream.requests_for(SLOW)[0]
        left_at = time.monotonic()
        client.close()
        assert wait_for(functools.partial(closed_by_peer, request), 5), "upstream still open"
        assert request.peer_closed_at is not None
        delays.append(request.peer_closed_at - left_at)
        assert not request.finished
    assert wait_for(lambda: stack.probe.call(lambda: stack.probe.bridge.active_runs) == 0, 2)
    print(
        f"\nclient disconnect -> upstream connection closed: max {max(delays) * 1000:.1f} ms, "
        f"median {statistics.median(delays) * 1000:.1f} ms over {len(delays)} disconnects"
    )
    assert max(delays) < 1.0


@dataclass(frozen=True)
class Resources:
    bridge_tasks: int
    fds: int
    pooled: int
    pooled_busy: int
    pool_waiting: int
    active_runs: int
    upstream_connections: int

    def __str__(self) -> str:
        return (
            f"bridge loop tasks {self.bridge_tasks}, fds {self.fds}, pooled upstream "
            f"connections {self.pooled} ({self.pooled_busy} busy, {self.pool_waiting} waiting), "
            f"active runs {self.active_runs}, upstream connections {self.upstream_connections}"
        )


def resources(stack: Stack) -> Resources:
    def in_bridge_loop() -> tuple[int, int, int, int, int]:
        transport = stack.probe.bridge.upstream._client._transport.inner  # under _Yielding
        tasks, active = len(asyncio.all_tasks()), stack.probe.bridge.active_runs
        if hasattr(transport, "_pool"):  # httpx's own transport (httpcore's pool)
            connections = transport._pool.connections
            busy = sum(not c.is_idle() for c in connections)
            return tasks, len(connections), busy, len(transport._pool._requests), active
        # aiohttp's connector (the default): idle keep-alive connections, acquired ones, waiters
        connector = transport.client.connector
        idle = sum(len(conns) for conns in connector._conns.values())
        busy = len(connector._acquired)
        waiting = sum(len(waiters) for waiters in connector._waiters.values())
        return tasks, idle + busy, busy, waiting, active

    tasks, pooled, busy, waiting, active = stack.probe.call(in_bridge_loop)
    return Resources(
        bridge_tasks=tasks,
        fds=len(os.listdir("/proc/self/fd")),
        pooled=pooled,
        pooled_busy=busy,
        pool_waiting=waiting,
        active_runs=active,
        upstream_connections=stack.upstream.call(lambda: stack.upstream.connections_open),
    )


async def aborted_runs(url: str, runs: int, *, seed: int) -> dict[str, int]:
    """``runs`` runs, 20 at a time, each abandoned at a random point: after a random number of
    bytes (some read to the end), or after a random time (some before the headers came)."""
    rng = random.Random(seed)
    limiter = anyio.CapacityLimiter(20)
    ends = {"bytes": 0, "time": 0, "complete": 0}
    full = 12_000  # about the size of a whole QUICK answer, so some runs are read to the end

    async def one(client: httpx.AsyncClient, how: str, limit: float) -> None:
        async with limiter:
            with anyio.move_on_after(limit if how == "time" else 30):
                async with client.stream("POST", f"{url}/", json=run_input(QUICK)) as response:
                    read = 0
                    async for piece in response.aiter_raw():
                        read += len(piece)
                        if how == "bytes" and read >= limit:
                            ends["bytes"] += 1
                            return  # leaving the block closes the response mid-stream
                    ends["complete"] += 1
                    return
            ends["time"] += 1

    async with httpx.AsyncClient(timeout=30) as client, anyio.create_task_group() as tasks:
        for _ in range(runs):
            how = rng.choice(["bytes", "time"])
            limit = rng.uniform(0, full * 1.1) if how == "bytes" else rng.uniform(0, 0.4)
            tasks.start_soon(one, client, how, limit)
    return ends


def test_500_aborted_runs_leave_no_task_connection_or_fd_behind(stack: Stack) -> None:
    anyio.run(functools.partial(aborted_runs, stack.url, 40, seed=1))  # warm up: lazy state
    assert wait_for(lambda: resources(stack).active_runs == 0, 5)
    before = resources(stack)
    started = time.monotonic()
    ends = anyio.run(functools.partial(aborted_runs, stack.url, 500, seed=2))
    took = time.monotonic() - started

    def settled() -> bool:
        now = resources(stack)
        return (
            now.active_runs == 0
            and now.pooled_busy == 0
            and now.bridge_tasks <= before.bridge_tasks
            and now.upstream_connections <= now.pooled
        )

    wait_for(settled, 5)
    after = resources(stack)
    print(
        f"\n500 aborted runs in {took:.1f} s ({ends}):\n  before: {before}\n  after:  {after}\n"
        f"  difference: {after.bridge_tasks - before.bridge_tasks:+d} tasks, "
        f"{after.fds - before.fds:+d} fds, {after.pooled - before.pooled:+d} idle pooled "
        f"keep-alive connections (2 fds each: both ends are in this process), "
        f"{after.pooled_busy} busy pooled connections"
    )
    assert sum(ends.values()) == 500 and min(ends.values()) > 20
    assert after.active_runs == 0
    assert after.bridge_tasks <= before.bridge_tasks
    assert after.pooled_busy == 0 and after.pool_waiting == 0
    # Every upstream connection still open is an idle one in the pool, kept for reuse.
    assert after.upstream_connections <= after.pooled <= 20
    assert after.fds - before.fds <= 2 * max(0, after.pooled - before.pooled) + 4


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tcp_queues() -> dict[tuple[int, int], tuple[int, int]]:
    """The kernel's send and receive queues (bytes) of every IPv4 TCP socket, by (local port,
    remote port): all of this test's sockets are on 127.0.0.1."""
    queues = {}
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local, remote = (int(end.split(":")[1], 16) for end in fields[1:3])
            tx, rx = fields[4].split(":")
            queues[local, remote] = (int(tx, 16), int(rx, 16))
    return queues


@dataclass(frozen=True)
class Flow:
    """One moment of a flood read by a slow client."""

    sent: int  # chunks the upstream handed to its kernel
    delivered: int  # chunks whose content event the client has read
    toward_bridge: int  # bytes in the kernel's queues between upstream and bridge
    toward_client: int  # bytes in the kernel's queues between bridge and client
    rss: int  # resident memory of the whole process (upstream, bridge and client)

    @property
    def lead(self) -> int:
        """How far, in chunks, the upstream is ahead of the client."""
        return self.sent - self.delivered


def measure_flow(
    upstream: FaultyUpstream, probe: LoopProbe, bridge_port: int, client: RawClient
) -> Flow:
    """A consistent picture: taken while the upstream's and the bridge's loops both wait (and
    the client too: it is this thread). Queues are Send-Q + Recv-Q, as ``ss`` shows them (a byte
    not yet acknowledged may be in both)."""
    request = upstream.requests_for(FLOOD)[0]

    def in_upstream_loop() -> tuple[int, dict[tuple[int, int], tuple[int, int]]]:
        return request.chunks_sent, tcp_queues()

    sent, queues = probe.call(lambda: upstream.call(in_upstream_loop))
    up, door, me = upstream.port, request.peer_port, client.port
    delivered = client.frames.get("REASONING_MESSAGE_CONTENT", 0)
    delivered += client.frames.get("TEXT_MESSAGE_CONTENT", 0)
    return Flow(
        sent=sent,
        delivered=delivered,
        toward_bridge=queues[up, door][0] + queues[door, up][1],
        toward_client=queues[bridge_port, me][0] + queues[me, bridge_port][1],
        rss=rss_bytes(),
    )


SMALL_BUFFER = 16384


@contextmanager
def bridge_with_fixed_socket_buffers(config: BridgeConfig) -> Iterator[tuple[str, LoopProbe]]:
    """The bridge on sockets whose kernel buffers are small and fixed (no autotuning), toward the
    upstream and toward the client, so that what the kernel holds does not hide what it does."""
    transport = httpx.AsyncHTTPTransport(
        socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)]
    )
    probe = LoopProbe(create_app(config, transport=transport))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)  # accepted: inherited
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(probe, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: server.started, 15), "uvicorn did not start"
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", probe
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        listener.close()


@pytest.mark.parametrize("kernel_buffers", ["autotuned", "fixed"])
def test_slow_reader_slows_the_upstream_instead_of_filling_memory(
    stack: Stack, kernel_buffers: str
) -> None:
    stack.upstream.reset()
    with contextlib.ExitStack() as running:
        url, probe = stack.url, stack.probe
        if kernel_buffers == "fixed":
            url, probe = running.enter_context(bridge_with_fixed_socket_buffers(stack.config))
        bridge_port = urlsplit(url).port
        assert bridge_port is not None
        client = RawClient(url, FLOOD, rcvbuf=4096)
        running.callback(client.close)
        client.read_frames(20)
        samples = [measure_flow(stack.upstream, probe, bridge_port, client)]
        started = time.monotonic()
        while time.monotonic() - started < 3.0:  # a reader at a few KB/s: far behind
            client.read(1024)
            time.sleep(0.02)
            if time.monotonic() - started >= 0.25 * len(samples):
                samples.append(measure_flow(stack.upstream, probe, bridge_port, client))
        middle, last = samples[len(samples) // 2], samples[-1]
        rss_growth = max(s.rss for s in samples) - samples[0].rss
        print(
            f"\nslow reader ({client.body_bytes / 3 / 1024:.0f} KB/s for 3 s), {kernel_buffers} "
            f"kernel socket buffers, flood of {FLOOD_CHUNKS} chunks; after 1.5 s / 3 s: upstream "
            f"sent {middle.sent} / {last.sent} chunks, client read {middle.delivered} / "
            f"{last.delivered}, upstream ahead by {middle.lead} / {last.lead}; kernel queues "
            f"upstream->bridge {middle.toward_bridge // 1024} / {last.toward_bridge // 1024} KB, "
            f"bridge->client {middle.toward_client // 1024} / {last.toward_client // 1024} KB; "
            f"process RSS growth {rss_growth / 1e6:.1f} MB"
        )
        # Whatever the kernel holds, the bridge's memory stays flat.
        assert rss_growth < 10e6
        if kernel_buffers == "fixed":
            # With no kernel buffer to absorb it, the upstream itself is held back: however long
            # the client dawdles, it is ahead by the buffers along the way only (a few hundred
            # chunks each), not by the thousands it could send in the meantime.
            assert max(s.lead for s in samples) < 2000
            return
        # Autotuned buffers grow (up to tcp_wmem/tcp_rmem max) and let the upstream get further
        # ahead, but into the kernel: beyond what its queues hold, the bridge holds no more
        # than its own read and write buffers (64 KiB each, a few hundred chunks).
        chunk_bytes = frame_ends(FLOOD_CHUNKS)[-1] / FLOOD_CHUNKS
        text_frame_bytes = statistics.mean(client.text_frame_sizes.values())
        for moment in (middle, last):
            in_kernel = moment.toward_bridge / chunk_bytes + moment.toward_client / text_frame_bytes
            assert moment.lead < in_kernel + 1500
        # Then read at full speed: the whole answer arrives, nothing lost on the way.
        started = time.monotonic()
        while client.read():
            pass
        print(f"rest of the stream read in {time.monotonic() - started:.1f} s")
        assert client.frames["TEXT_MESSAGE_CONTENT"] == FLOOD_CHUNKS
        assert json.loads(client.last_frame[6:])["type"] == "RUN_FINISHED"


def test_keepalives_fill_a_long_upstream_silence(stack: Stack) -> None:
    config = replace(stack.config, keepalive_interval=0.2, idle_timeout=5.0)
    with serve(create_app(config)) as url:
        response = httpx.post(f"{url}/", json=run_input(SILENT_FIRST), timeout=10)
    body = response.text
    first_content = body.index("REASONING_START")
    keepalives = body[:first_content].count(": keep-alive\n\n")
    print(f"\n{keepalives} keep-alive comments during 1 s of upstream silence (every 0.2 s)")
    assert body.startswith('data: {"type":"RUN_STARTED"')
    assert keepalives >= 3
    frames = check_frames(parse_body(body))
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT") == "".join(
        TEXT
    )


def test_a_response_that_fails_before_its_first_frame_ends_its_run() -> None:
    """The run count is given back however the response ends: here the client's connection
    breaks at the status line, before the run's generator ever started."""
    app = create_app(scripted_config("http://127.0.0.1:9"))
    body = json.dumps(run_input("scripted-plain")).encode()

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start" and message["status"] == 200:
            raise OSError("the client went away")

    async def call() -> None:
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json")],
            "http_version": "1.1",
            "scheme": "http",
            "server": ("127.0.0.1", 80),
            "client": ("127.0.0.1", 1),
        }
        with contextlib.suppress(OSError):
            await app(scope, receive, send)

    anyio.run(call)
    assert app.state.bridge.active_runs == 0
