"""Scale-out: aggregate throughput of K concurrent streams against ``uvicorn --workers W``.

The bridge is served by ``uvicorn apps:bridge --factory --workers W`` (the factory builds the app
from environment variables, as every worker process starts afresh), in front of the fast
upstream. The client (``raw_http.post_raw``, cheap enough to leave the cores to the servers)
opens K streams at once (``--streams``, default 8) of N ``mixed`` chunks each (``--chunks``,
default 5,000) and waits for all; aggregate chunks/s = K * N / wall time, the best of
``--repeat`` rounds. The CPU% of each worker shows how the kernel spread the connections.

    python benchmarks/workers.py          # full run: benchmarks/results/workers.json
    python benchmarks/workers.py --smoke  # 4 streams of 300 chunks, writes nothing

Every stream must bring exactly the events of a checked answer (the first answer is checked
as in e2e.py); otherwise the run exits non-zero. Timing never fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

import apps
import e2e
import harness
import raw_http
from harness import Outcome, Row, ServerStack, Spec

FULL_STREAMS = 8
FULL_CHUNKS = 5_000
FULL_REPEAT = 3
SMOKE_STREAMS = 4
SMOKE_CHUNKS = 300
SMOKE_REPEAT = 1
WORKERS = (1, 2)
ROUND_LIMIT_S = 300.0
# Workers share one listening socket and a worker woken by a burst accepts all it can: streams
# opened at the same instant mostly land on one worker. Opened a little apart, they spread.
OPEN_EVERY_S = 0.02


class _FrameCounter:
    """Counts SSE frames (``\\n\\n``) in raw reads; HTTP chunk framing uses ``\\r\\n`` only."""

    def __init__(self) -> None:
        self.frames = 0
        self._last = b""

    def feed(self, data: bytes, now: int) -> None:
        self.frames += (self._last + data).count(b"\n\n")
        self._last = data[-1:]


async def _open_later(delay: float, url: str, body: dict[str, Any], counter: _FrameCounter) -> bool:
    await asyncio.sleep(delay)
    return await raw_http.post_raw(url, body, counter.feed, within=ROUND_LIMIT_S)


async def _round(url: str, orders: dict[str, Any], streams: int) -> tuple[float, list[int]]:
    counters = [_FrameCounter() for _ in range(streams)]
    body = apps.run_input(orders)
    start = time.perf_counter()
    statuses = await asyncio.gather(
        *(_open_later(i * OPEN_EVERY_S, url, body, c) for i, c in enumerate(counters))
    )
    elapsed = time.perf_counter() - start
    return elapsed, [c.frames if ok else -1 for c, ok in zip(counters, statuses, strict=True)]


async def _measure(
    url: str, pids: list[int], streams: int, chunks: int, repeat: int
) -> tuple[dict[str, Any], list[str]]:
    orders = {"variant": "mixed", "chunks": chunks, "block": apps.WRITE_BLOCK}
    async with e2e.new_client() as client:  # one answer read and checked in full
        _, body = await e2e.fetch(client, *e2e.request_for("bridge", url, orders))
    problems = e2e.check_bridge(apps.fast_stream("mixed", chunks), body)
    expected = body.count(b"\n\n")
    await _round(url, orders, streams)  # every worker's connections and lazy imports
    times: list[float] = []
    cpu_before = [harness.cpu_seconds(pid) for pid in pids]
    for _ in range(repeat):
        elapsed, frames = await _round(url, orders, streams)
        times.append(elapsed)
        if any(count != expected for count in frames):
            problems.append(f"frames per stream {sorted(set(frames))}, expected {expected}")
    busy = [harness.cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
    return {
        "times_s": times,
        "chunks_per_s": round(streams * chunks / min(times), 1),
        "cpu_percent_per_worker": [round(100 * b / sum(times), 1) for b in busy],
    }, problems


def measure(
    *,
    smoke: bool,
    streams: int | None = None,
    chunks: int | None = None,
    repeat: int | None = None,
    workers: Sequence[int] = WORKERS,
    stack: ServerStack | None = None,
) -> Outcome:
    streams = streams or (SMOKE_STREAMS if smoke else FULL_STREAMS)
    chunks = chunks or (SMOKE_CHUNKS if smoke else FULL_CHUNKS)
    repeat = repeat or (SMOKE_REPEAT if smoke else FULL_REPEAT)
    stack = stack or harness.default_stack()
    results: list[dict[str, Any]] = []
    problems: list[str] = []
    upstream = Spec(factory="upstream")
    env = {apps.UPSTREAM_URL_ENV: upstream.url}
    bridges = [Spec(factory="bridge", env=env, workers=count) for count in workers]
    with harness.serve(upstream, *bridges, stack=stack) as (_, *servers):  # idle ones cost nothing
        for count, server in zip(workers, servers, strict=True):
            pids = harness.worker_pids(server.pid) if count > 1 else [server.pid]
            result, wrong = harness.run_client(_measure(server.url, pids, streams, chunks, repeat))
            results.append({"workers": count, **result})
            problems += [f"{count} workers: {problem}" for problem in wrong]
    config = {"streams": streams, "chunks": chunks, "repeat": repeat, "stack": stack.name}
    return Outcome(
        name="workers",
        config=config,
        results=results,
        rows=rows(results, streams),
        problems=problems,
    )


def rows(results: Sequence[dict[str, Any]], streams: int) -> list[Row]:
    out: list[Row] = []
    for result in results:
        cpu = " + ".join(f"{value:.0f}%" for value in result["cpu_percent_per_worker"])
        out.append(
            Row(
                benchmark="workers",
                case=f"{result['workers']} worker(s), {streams} streams",
                figure="aggregate chunks/s",
                value=f"{result['chunks_per_s']:,.0f} (CPU {cpu})",
            )
        )
    if len(results) > 1:
        base = results[0]
        for result in results[1:]:
            out.append(
                Row(
                    benchmark="workers",
                    case=f"{result['workers']} vs {base['workers']} worker(s)",
                    figure="speed-up",
                    value=f"{result['chunks_per_s'] / base['chunks_per_s']:.2f}x",
                )
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"{SMOKE_STREAMS} streams of {SMOKE_CHUNKS} chunks; writes nothing",
    )
    parser.add_argument("--streams", type=int, help=f"concurrent streams ({FULL_STREAMS})")
    parser.add_argument("--chunks", type=int, help=f"chunks per stream ({FULL_CHUNKS:,})")
    parser.add_argument("--repeat", type=int, help=f"rounds, best kept ({FULL_REPEAT})")
    parser.add_argument(
        "--workers", type=int, action="append", help=f"a worker count (default {WORKERS})"
    )
    parser.add_argument(
        "--stack", help="asyncio+h11 or uvloop+httptools (default: the fastest installed)"
    )
    args = parser.parse_args(argv)
    if args.chunks is not None and args.chunks < 100:
        parser.error("--chunks must be at least 100")
    harness.print_header("scale-out with uvicorn --workers")
    outcome = measure(
        smoke=args.smoke,
        streams=args.streams,
        chunks=args.chunks,
        repeat=args.repeat,
        workers=args.workers or WORKERS,
        stack=harness.stack_named(args.stack),
    )
    return harness.finish(outcome, smoke=args.smoke)


if __name__ == "__main__":
    sys.exit(main())
