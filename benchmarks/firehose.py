"""A firehose upstream (``tests/firehose_upstream.py``: reasoning chunks written back to back,
forever) against the bridge, on each upstream transport: what the process's other users see.

While one client reads a firehose run as fast as it can:
- ``paced gap``: a second run from a paced model (a text chunk every 10 ms): the gaps between its
  ``TEXT_MESSAGE_CONTENT`` frames at the client, p50 / p99 / max (10 ms is the pace itself);
- ``health``: ``GET /agent/health`` latency, p50 / p99 / max over 40 requests.
Then the firehose client leaves:
- ``cancelled``: the time until the upstream sees its connection closed;
- ``idle CPU``: the bridge's CPU in the second after that (% of a core).

    python benchmarks/firehose.py           # both transports
    python benchmarks/firehose.py --smoke   # the same, fewer samples

Every run must deliver its text and end; the firehose connection must close. Timing never fails.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
FIREHOSE = ROOT / "tests" / "firehose_upstream.py"
PACE_MS = 10.0


@contextmanager
def _process(command: list[str], pattern: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        found = re.search(pattern, process.stdout.readline())
        if not found:
            raise SystemExit(f"{command[:4]} did not start")
        threading.Thread(target=process.stdout.read, daemon=True).start()
        yield process, found.group(1)
    finally:
        process.kill()
        process.wait(timeout=15)


def _run_input(model: str) -> dict[str, object]:
    return {
        "threadId": "t",
        "runId": f"r-{time.monotonic_ns()}",
        "messages": [{"id": "u", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"model": model},
        "protocolVersion": "1.0",
    }


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered):6.1f} / {p99:6.1f} / {ordered[-1]:6.1f} ms"


def measure(transport: str, health_samples: int) -> dict[str, str]:
    with (
        _process([sys.executable, str(FIREHOSE)], r"port (\d+)") as (_, port),
        _process(
            [
                sys.executable, "-m", "bridge", "serve", "--upstream-url",
                f"http://127.0.0.1:{port}/v1", "--model", "firehose", "--models", "paced",
                "--upstream-transport", transport, "--port", "0", "--log-level", "warning",
            ],
            r"open (http://127\.0\.0\.1:\d+)/ ",
        ) as (bridge, url),
    ):  # fmt: skip
        agent, upstream = f"{url}/agent", f"http://127.0.0.1:{port}"
        streaming, stop = threading.Event(), threading.Event()

        def firehose() -> None:
            with httpx.stream("POST", agent, json=_run_input("firehose"), timeout=60) as response:
                for count, _ in enumerate(response.iter_bytes()):
                    if count > 20:
                        streaming.set()
                    if stop.is_set():
                        return

        reader = threading.Thread(target=firehose)
        reader.start()
        if not streaming.wait(10):
            raise SystemExit("the firehose run did not stream")
        health = []
        for _ in range(health_samples):
            start = time.perf_counter()
            httpx.get(f"{agent}/health", timeout=30).raise_for_status()
            health.append((time.perf_counter() - start) * 1000)
        arrivals = []
        with httpx.stream("POST", agent, json=_run_input("paced"), timeout=60) as response:
            for line in response.iter_lines():
                if "TEXT_MESSAGE_CONTENT" in line:
                    arrivals.append(time.perf_counter() * 1000)
                if "RUN_FINISHED" in line:
                    break
        if len(arrivals) != 100:
            raise SystemExit(f"the paced run delivered {len(arrivals)} of 100 chunks")
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        stop.set()
        left = time.perf_counter()
        reader.join(30)
        while httpx.get(f"{upstream}/status", timeout=5).json()["open"]:
            if time.perf_counter() - left > 30:
                raise SystemExit("the firehose connection stayed open 30 s after its client left")
            time.sleep(0.005)
        cancelled = (time.perf_counter() - left) * 1000
        before = _cpu(bridge.pid)
        time.sleep(1.0)
        idle = (_cpu(bridge.pid) - before) * 100
    return {
        "paced gap p50/p99/max": _ms(gaps),
        "health p50/p99/max": _ms(health),
        "cancelled after": f"{cancelled:6.1f} ms",
        "idle CPU after": f"{idle:5.1f} %",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="fewer samples")
    args = parser.parse_args()
    print(f"firehose upstream; the paced model writes a chunk every {PACE_MS:g} ms")
    for transport in ("aiohttp", "httpx"):
        for name, value in measure(transport, 10 if args.smoke else 40).items():
            print(f"  {transport:8} {name:22} {value}")
    print("output checked: ok")


if __name__ == "__main__":
    main()
