"""How soon a run starts: from sending the POST to the RUN_STARTED frame, and to the first content.

Sequential requests (``--requests``, default 200) on one keep-alive connection, each a short
answer (``--chunks`` upstream chunks of content, default 100) from the fast upstream. Times are
taken by the client (httpx) when the response headers arrive, when the bytes holding the
``RUN_STARTED`` frame arrive and when the first ``TEXT_MESSAGE_CONTENT`` does. The same
request through the pass-through proxy and straight to the upstream gives the floor for the
headers and the first content (neither has a RUN_STARTED).

    python benchmarks/run_started.py          # full run: benchmarks/results/run_started.json
    python benchmarks/run_started.py --smoke  # 20 requests each, writes nothing

Every answer must be complete (RUN_FINISHED, or [DONE]); otherwise the run exits non-zero.
Timing never fails the run.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import apps
import e2e
import harness
import httpx
from harness import Outcome, Row, ServerStack, Spec

FULL_REQUESTS = 200
SMOKE_REQUESTS = 20
CHUNKS = 100
WARMUP_REQUESTS = 5
PATHS = ("bridge", "proxy", "direct")

# From the performance issue; printed next to the figure, never asserted.
TARGET_RUN_STARTED_MS = 5.0

_MARKS = {
    "bridge": {
        "started": re.compile(rb"RUN_STARTED"),
        "content": re.compile(rb"TEXT_MESSAGE_CONTENT"),
    },
    # The role chunk has an empty content; the first token's is not.
    "proxy": {"content": re.compile(rb'"content": ?"[^"]')},
    "direct": {"content": re.compile(rb'"content": ?"[^"]')},
}
_ENDS = {"bridge": b"RUN_FINISHED", "proxy": b"[DONE]", "direct": b"[DONE]"}


async def _one(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], path: str
) -> dict[str, float]:
    """Milliseconds from the POST to the headers, each mark and the end of the answer
    (``incomplete`` when a mark or the end is missing)."""
    marks = _MARKS[path]
    times: dict[str, float] = {}
    received = bytearray()
    start = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        times["headers"] = (time.perf_counter() - start) * 1000
        response.raise_for_status()
        async for data in response.aiter_raw():
            now = (time.perf_counter() - start) * 1000
            received += data
            for name, pattern in marks.items():
                if name not in times and pattern.search(received):
                    times[name] = now
    times["end"] = (time.perf_counter() - start) * 1000
    if _ENDS[path] not in received or len(times) != len(marks) + 2:
        times["incomplete"] = 1.0
    return times


async def _measure(
    urls: dict[str, str], requests: int, chunks: int
) -> dict[str, list[dict[str, float]]]:
    orders = {"variant": "content", "chunks": chunks, "block": apps.WRITE_BLOCK}
    samples: dict[str, list[dict[str, float]]] = {path: [] for path in PATHS}
    async with e2e.new_client() as client:
        for path in PATHS:
            url, body = e2e.request_for(path, urls[path], orders)
            for _ in range(WARMUP_REQUESTS):  # connections, lazy imports, the upstream's cache
                await _one(client, url, body, path)
        for _ in range(requests):  # the paths take turns, so that noise hits them alike
            for path in PATHS:
                url, body = e2e.request_for(path, urls[path], orders)
                samples[path].append(await _one(client, url, body, path))
    return samples


def measure(
    *,
    smoke: bool,
    requests: int | None = None,
    chunks: int = CHUNKS,
    stack: ServerStack | None = None,
) -> Outcome:
    requests = requests or (SMOKE_REQUESTS if smoke else FULL_REQUESTS)
    stack = stack or harness.default_stack()
    upstream = Spec(factory="upstream")
    env = {apps.UPSTREAM_URL_ENV: upstream.url}
    specs = (upstream, Spec(factory="bridge", env=env), Spec(factory="proxy", env=env))
    with harness.serve(*specs, stack=stack) as (direct, bridge, proxy):
        urls = {"bridge": bridge.url, "proxy": proxy.url, "direct": direct.url}
        samples = harness.run_client(_measure(urls, requests, chunks))
    results = {
        path: {
            mark: {
                "p50_ms": harness.percentile([s[mark] for s in runs], 0.50),
                "p99_ms": harness.percentile([s[mark] for s in runs], 0.99),
            }
            for mark in ("headers", *_MARKS[path], "end")
            if all(mark in s for s in runs)
        }
        for path, runs in samples.items()
    }
    config = {"requests": requests, "chunks": chunks, "stack": stack.name}
    incomplete = {path: sum("incomplete" in s for s in runs) for path, runs in samples.items()}
    return Outcome(
        name="run_started",
        config=config,
        results=results,
        rows=rows(results, smoke=smoke),
        problems=[f"{path}: {n} incomplete answers" for path, n in incomplete.items() if n],
    )


def rows(results: dict[str, Any], *, smoke: bool) -> list[Row]:
    out: list[Row] = []
    for path, figures in results.items():
        for mark in ("headers", "started", "content"):
            if mark not in figures:
                continue
            p50, p99 = figures[mark]["p50_ms"], figures[mark]["p99_ms"]
            judged = path == "bridge" and mark == "started"
            out.append(
                Row(
                    benchmark="run_started",
                    case=path,
                    figure={
                        "headers": "to headers",
                        "started": "to RUN_STARTED",
                        "content": "to first content",
                    }[mark],
                    value=f"{p50:.2f} / {p99:.2f} ms",
                    target=f"p99 ≤ {TARGET_RUN_STARTED_MS:g} ms" if judged else "",
                    verdict=harness.verdict(p99 <= TARGET_RUN_STARTED_MS, smoke=smoke)
                    if judged
                    else "",
                )
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help=f"{SMOKE_REQUESTS} requests each; writes nothing"
    )
    parser.add_argument(
        "--requests", type=int, help=f"sequential requests per path ({FULL_REQUESTS})"
    )
    parser.add_argument(
        "--chunks", type=int, default=CHUNKS, help=f"upstream chunks per answer ({CHUNKS})"
    )
    parser.add_argument(
        "--stack", help="asyncio+h11 or uvloop+httptools (default: the fastest installed)"
    )
    args = parser.parse_args(argv)
    harness.print_header("time to RUN_STARTED (p50 / p99)")
    outcome = measure(
        smoke=args.smoke,
        requests=args.requests,
        chunks=args.chunks,
        stack=harness.stack_named(args.stack),
    )
    return harness.finish(outcome, smoke=args.smoke)


if __name__ == "__main__":
    sys.exit(main())
