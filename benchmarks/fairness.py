"""Fairness: paced streams keep their pace while a firehose stream runs in the same process.

One bridge process (``agui-bridge serve``) in front of ``tests/firehose_upstream.py``. S paced
streams (``--streams``, default 50) of a chunk every 50 ms (the ``paced-50`` model: 20 tokens/s)
run at once, first alone, then while one client (``curl``, in its own process, so that reading
as fast as it can costs the measuring client nothing) reads a firehose run: reasoning chunks
written back to back, forever, so that the bridge's reads always find data buffered. For each
paced stream the client notes when each ``TEXT_MESSAGE_CONTENT`` frame arrives; the figure is the
gap between consecutive frames beyond the paced interval (p50 / p99 / max over every gap of every
stream), with and without the firehose, and how many bytes the firehose delivered meanwhile.

    python benchmarks/fairness.py          # 50 streams of 100 chunks: results/fairness.json
    python benchmarks/fairness.py --smoke  # 5 streams of 20 chunks, writes nothing

Every paced stream must deliver all its chunks and end, and the firehose must stream;
otherwise the run exits non-zero. Timing never fails the run (the target is printed beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import harness
import raw_http
from firehose import FIREHOSE, _process

PACE_MS = 50.0
TARGET_P99_EXCESS_MS = 50.0


def _body(model: str, run: int) -> dict[str, Any]:
    return {
        "threadId": "fairness",
        "runId": f"run-{run}",
        "messages": [{"id": "u", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {"model": model},
        "protocolVersion": "1.0",
    }


class _Arrivals:
    """When each content frame of one stream arrived (frames of one read share its time)."""

    def __init__(self) -> None:
        self.times: list[int] = []
        self.ended = False
        self._tail = b""

    def feed(self, data: bytes, now: int) -> None:
        text = self._tail + data
        self.times.extend([now] * text.count(b'"TEXT_MESSAGE_CONTENT"'))
        self.ended = self.ended or b"RUN_FINISHED" in text
        self._tail = text[-32:]  # a type name split by a read is counted once, in the next


async def _paced(url: str, streams: int, chunks: int) -> tuple[list[float], list[str]]:
    """Every gap beyond the pace (ms) of ``streams`` paced runs at once; the problems."""
    model = f"paced-{PACE_MS:g}-{chunks}"
    arrivals = [_Arrivals() for _ in range(streams)]
    oks = await asyncio.gather(
        *(
            raw_http.post_raw(url, _body(model, i), arrival.feed, within=chunks * 2)
            for i, arrival in enumerate(arrivals)
        )
    )
    excess = [
        (later - earlier) / 1e6 - PACE_MS
        for arrival in arrivals
        for earlier, later in zip(arrival.times, arrival.times[1:], strict=False)
    ]
    problems = [
        f"paced stream {i}: {len(a.times)} of {chunks} chunks, ended={a.ended and ok}"
        for i, (a, ok) in enumerate(zip(arrivals, oks, strict=True))
        if len(a.times) != chunks or not (a.ended and ok)
    ]
    return excess, problems


def _summary(excess: list[float]) -> dict[str, float]:
    return {
        "p50": harness.percentile(excess, 0.50),
        "p99": harness.percentile(excess, 0.99),
        "max": max(excess),
    }


def measure(streams: int, chunks: int) -> dict[str, Any]:
    with (
        _process([sys.executable, str(FIREHOSE)], r"port (\d+)") as (_, port),
        _process(
            [
                sys.executable, "-m", "bridge", "serve", "--upstream-url",
                f"http://127.0.0.1:{port}/v1", "--model", "firehose", "--models",
                f"paced-{PACE_MS:g}-{chunks}", "--port", "0", "--log-level", "warning",
                "--max-concurrent-runs", str(streams + 8),
            ],
            r"open (http://127\.0\.0\.1:\d+)/ ",
        ) as (bridge, url),
    ):  # fmt: skip
        agent = f"{url}/agent"
        alone, problems = asyncio.run(_paced(agent, streams, chunks))
        # Long enough to outlast the paced streams; then curl stops and says what it read.
        seconds = f"{chunks * PACE_MS / 1000 * 2 + 3:.0f}"
        firehose = subprocess.Popen(
            ["curl", "-sN", "--max-time", seconds, "-o", "/dev/null", "-w", "%{size_download}",
             "-H", "content-type: application/json", "-d", json.dumps(_body("firehose", -1)),
             agent],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            time.sleep(0.5)  # the firehose streams
            cpu_before, started = harness.cpu_seconds(bridge.pid), time.perf_counter()
            beside, more = asyncio.run(_paced(agent, streams, chunks))
            cpu = 100 * (harness.cpu_seconds(bridge.pid) - cpu_before)
            cpu /= time.perf_counter() - started
            out, _ = firehose.communicate(timeout=float(seconds) + 30)
        finally:
            firehose.kill()
            firehose.wait()
        delivered = int(out or 0)
        problems += more
        if delivered < 1_000_000:
            problems.append(f"the firehose delivered only {delivered} bytes")
    return {
        "streams": streams,
        "chunks": chunks,
        "pace_ms": PACE_MS,
        "excess_ms_alone": _summary(alone),
        "excess_ms_beside_firehose": _summary(beside),
        "firehose_bytes": delivered,
        "bridge_cpu_percent": round(cpu, 1),
        "problems": problems,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="5 streams of 20 chunks; no file")
    parser.add_argument("--streams", type=int, default=50, help="paced streams (default 50)")
    parser.add_argument("--chunks", type=int, default=100, help="chunks per stream (default 100)")
    args = parser.parse_args()
    streams, chunks = (5, 20) if args.smoke else (args.streams, args.chunks)
    result = measure(streams, chunks)
    print(f"fairness: {streams} paced streams, a chunk every {PACE_MS:g} ms, {chunks} chunks each")
    for case in ("alone", "beside_firehose"):
        gap = result[f"excess_ms_{case}"]
        print(
            f"  {case.replace('_', ' '):16} gap beyond the pace p50 / p99 / max "
            f"{gap['p50']:6.1f} / {gap['p99']:6.1f} / {gap['max']:6.1f} ms"
            + (f"   (target p99 ≤ {TARGET_P99_EXCESS_MS:g} ms)" if case != "alone" else "")
        )
    mib = result["firehose_bytes"] / 2**20
    print(
        f"  firehose meanwhile: {mib:.0f} MiB delivered; bridge CPU {result['bridge_cpu_percent']}%"
    )
    for problem in result["problems"]:
        print(f"PROBLEM: {problem}")
    if not args.smoke and not result["problems"]:
        out = harness.RESULTS_DIR / "fairness.json"
        out.write_text(json.dumps({"machine": harness.machine(), **result}, indent=2) + "\n")
        print(f"wrote {os.path.relpath(out)}")
    print("output checked: ok" if not result["problems"] else "output checked: FAILED")
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
