"""What the thread stores (``--threads``, issue 42) cost the process that uses them: per run
batch appended (CPU and wall time in this process, the store's client side, which is what the
bridge pays), a follower's delay (from a batch's append by one store instance to its arrival at
a follower waiting on another instance of the same URL: what another process sees), and a save
and a load of a thread.

Stores: ``memory``, ``file`` (a temporary folder) and ``redis`` (a ``redis-server`` started
here on a free port, when one is installed). Batches of 8 frames of about 100 bytes (a batch
is one upstream read's frames); the follower's batches are appended every 10 ms.

    python benchmarks/thread_stores.py            # 2,000 batches, 300 followed, 200 saves
    python benchmarks/thread_stores.py --smoke    # 100 batches, 30 followed, 20 saves
    PYTHONPATH=/tmp/before python benchmarks/thread_stores.py   # another checkout's stores

The output is checked (every batch arrives, in order, once; what is loaded is what was saved);
timing never fails a run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import free_port

from bridge.serve.threads.store import Batch, RunKey, ThreadSummary
from bridge.serve.threads.stores import thread_store

OWNER = "0" * 64
FRAME = 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"%06d tokens go by"}\n\n'


@contextmanager
def redis_server(folder: Path) -> Iterator[str | None]:
    """A ``redis-server`` on loopback (no persistence), its URL; ``None`` if none is installed."""
    program = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.path.exists(program):
        yield None
        return
    port = free_port()
    command = [program, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    process = subprocess.Popen(
        [*command, "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def batch(first: int, size: int = 8) -> Batch:
    return Batch(first, tuple(FRAME % n for n in range(first, first + size)))


async def appends(url: str, count: int) -> dict[str, float]:
    kept = thread_store(url, ttl=600)
    try:
        await kept.run_begin(RunKey(OWNER, "bench-append"), "t1")
        cpu, wall = time.process_time(), time.perf_counter()
        for index in range(count):
            await kept.run_append(
                RunKey(OWNER, "bench-append"), batch(1 + 8 * index), ended=index == count - 1
            )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        got = await kept.run_events(RunKey(OWNER, "bench-append"), 0, 0)
        frames = [frame for b in got for frame in b.frames]
        if kept.shared and frames != [FRAME % n for n in range(1, 1 + 8 * count)]:
            raise SystemExit(f"{url}: the batches read back are not the batches appended")
    finally:
        await kept.aclose()
    return {"cpu_us_per_batch": cpu / count * 1e6, "wall_us_per_batch": wall / count * 1e6}


async def follows(url: str, count: int) -> dict[str, float]:
    writer, reader = thread_store(url, ttl=600), thread_store(url, ttl=600)
    appended: dict[int, float] = {}
    delays: list[float] = []
    try:
        await writer.run_begin(RunKey(OWNER, "bench-follow"), "t1")

        async def follow() -> None:
            seen = 0
            while seen < 8 * count:
                for got in await reader.run_events(RunKey(OWNER, "bench-follow"), seen, 5):
                    if got.first != seen + 1:
                        raise SystemExit(f"{url}: batch {got.first} after frame {seen}")
                    delays.append(time.perf_counter() - appended[got.first])
                    seen = got.last

        follower = asyncio.ensure_future(follow())
        for index in range(count):
            first = 1 + 8 * index
            appended[first] = time.perf_counter()
            await writer.run_append(
                RunKey(OWNER, "bench-follow"), batch(first), ended=index == count - 1
            )
            await asyncio.sleep(0.01)
        await asyncio.wait_for(follower, 30)
    finally:
        await writer.aclose()
        await reader.aclose()
    return {
        "follow_p50_ms": statistics.median(delays) * 1000,
        "follow_p99_ms": sorted(delays)[int(len(delays) * 0.99) - 1] * 1000,
    }


async def saves(url: str, count: int, size: int = 200_000) -> dict[str, float]:
    kept = thread_store(url, ttl=600)
    document = os.urandom(size // 2).hex().encode()
    try:
        started = time.perf_counter()
        for index in range(count):
            summary = ThreadSummary(id=f"t{index % 10}", title="a thread", updated=time.time())
            await kept.save(OWNER, f"t{index % 10}", document, summary)
        saved = time.perf_counter() - started
        started = time.perf_counter()
        for index in range(count):
            if await kept.load(OWNER, f"t{index % 10}") != document:
                raise SystemExit(f"{url}: a thread loaded is not the thread saved")
        loaded = time.perf_counter() - started
    finally:
        await kept.aclose()
    return {"save_ms": saved / count * 1000, "load_ms": loaded / count * 1000}


async def measure(url: str, smoke: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    figures.update(await appends(url, 100 if smoke else 2000))
    if url != "memory":  # the memory store keeps no events: nobody else follows from it
        figures.update(await follows(url, 30 if smoke else 300))
    figures.update(await saves(url, 20 if smoke else 200))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, redis_server(Path(folder)) as redis_url:
        stores = {"memory": "memory", "file": (Path(folder) / "files").as_uri()}
        (Path(folder) / "files").mkdir()
        if redis_url:
            stores["redis"] = redis_url
        print(f"thread stores{' (smoke run)' if args.smoke else ''}: 8 frames a batch")
        header = "store", "append CPU µs", "append wall µs", "follow p50/p99 ms", "save/load ms"
        print("{:<8} {:>14} {:>15} {:>18} {:>14}".format(*header))
        for name, url in stores.items():
            got = asyncio.run(measure(url, args.smoke))
            follow = (
                f"{got['follow_p50_ms']:.2f} / {got['follow_p99_ms']:.2f}"
                if "follow_p50_ms" in got
                else "-"
            )
            print(
                f"{name:<8} {got['cpu_us_per_batch']:>14.1f} {got['wall_us_per_batch']:>15.1f} "
                f"{follow:>18} {got['save_ms']:>6.2f} / {got['load_ms']:.2f}"
            )


if __name__ == "__main__":
    main()
