"""Many slow streams at once: the latency the bridge adds to each token, its CPU and memory.

S streams (``--streams``, default 50, 200, 500 and 1000) at ``--rate`` tokens/s each (default
20) from a paced upstream (``apps.upstream``) that writes its send time, ``time.time_ns()``,
into every token's text. The client (one process, ``raw_http.post_raw``) notes when each token
arrives: receive time minus send time is the token's latency (one machine, one clock), through
the bridge (``bridge``: its default aiohttp transport; ``bridge-httpx``: ``--upstream-transport
httpx``, the transport before issue 15; ``bridge-key``: with an upstream key configured, so
every delta is redacted of it on its way out) and, as the baseline, through the pass-through proxy
(Starlette over httpx ``aiter_raw``, nothing parsed); ``relay``, aiohttp's buffer handed to the
server's send as raw ASGI (what any Python relay on this stack pays); ``direct`` reads the upstream
itself (the floor of this setup: two processes and the machine's scheduling). Streams open
spread over ``--ramp`` seconds and all end together; latencies count for tokens sent in the
steady window (every stream open, ``--duration`` seconds less a settling second), when the
server's CPU% (of one core) and RSS are read from ``/proc``. RSS per open stream = (peak RSS in
the window - idle RSS before the level) / S. Fresh servers for every level.

    python benchmarks/concurrency.py          # full run: benchmarks/results/concurrency.json
    python benchmarks/concurrency.py --smoke  # 5 streams for 0.6 s, writes nothing

Every stream must deliver each of its tokens and end (RUN_FINISHED, or [DONE] through the proxy);
otherwise the run exits non-zero. Timing never fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apps
import e2e
import harness
import raw_http
from harness import Outcome, Row, Server, ServerStack, Spec

FULL_LEVELS = (50, 200, 500, 1000)
FULL_DURATION = 10.0
FULL_RAMP = 3.0
SMOKE_LEVELS = (5,)
SMOKE_DURATION = 0.6
SMOKE_RAMP = 0.1
RATE = 20.0
SETTLE_S = 1.0  # after the last stream opened, before the window: let the ramp's queues drain
IDLE_S = 0.5  # after the warm-up run, before the idle RSS is read (less in short runs)
RSS_EVERY_S = 0.25
STREAM_GRACE_S = 120.0  # beyond its own length, how long a stream may lag before it fails

# From the performance issues; printed next to the figures, never asserted.
TARGET_LEVEL = 500
#: The key ``bridge-key`` holds: the model's every delta is redacted of it on the way out.
BENCH_KEY = "sk-proj-Zq8vT2mW9xL4nB7cR1pK6hY3jD5fG0sA"

TARGET_P99_MS = 50.0
#: Issue 44: the p99 at 1,000 streams on one worker too, where the relay carries them.
P99_LEVELS = (TARGET_LEVEL, 1000)
TARGET_KIB_PER_STREAM = 32  # issue 44 (issue 34's was 64)
TARGET_US_PER_TOKEN = 100.0
TARGET_PROXY_RATIO = 0.75  # issue 34
TARGET_RELAY_RATIO = 1.4  # issue 44, at these levels
RELAY_RATIO_LEVELS = (200, 500)

_TIMESTAMP = re.compile(re.escape(apps.TIMESTAMP_PREFIX) + rb"(\d{19})")
_KEEP = len(apps.TIMESTAMP_PREFIX) + 18  # a tail that may hold the start of a split timestamp


#: Every server this benchmark can measure: the bridge (aiohttp under httpx, the default;
#: httpx's own transport; with a key to redact), the bridge with two workers (uvicorn's, on the
#: app factory, as ``serve --workers 2`` runs it), the pass-through proxy, pydantic-ai's AG-UI
#: adapter (the peer; an optional install), the upstream read directly (the floor of this setup)
#: and ``relay``: aiohttp's buffer to the server's send, the floor of a Python relay on this stack.
PATHS = (
    "bridge",
    "bridge-httpx",
    "bridge-key",
    "bridge-workers2",
    "proxy",
    "pydantic-ai",
    "direct",
    "relay",
)
DEFAULT_PATHS = ("bridge", "bridge-httpx", "bridge-key", "proxy", "relay", "direct")


def _spec(path: str, env: dict[str, str]) -> Spec:
    if path == "bridge-httpx":
        return Spec(factory="bridge", env={**env, apps.TRANSPORT_ENV: "httpx"})
    if path == "bridge-key":
        return Spec(factory="bridge", env={**env, apps.API_KEY_ENV: BENCH_KEY})
    if path == "bridge-workers2":
        return Spec(factory="bridge", env=env, workers=2)
    if path == "pydantic-ai":
        return Spec(factory="pydantic_ai", env=env)
    if path in ("bridge", "proxy", "relay"):
        return Spec(factory=path, env=env)
    raise SystemExit(f"unknown path {path!r}; choose from {', '.join(PATHS)}")


def _available(path: str) -> bool:
    if path == "pydantic-ai" and importlib.util.find_spec("pydantic_ai") is None:
        print("concurrency: pydantic-ai is not installed, its row is left out "
              "(pip install 'pydantic-ai-slim[ag-ui,openai]')")  # fmt: skip
        return False
    return True


def _end_of(path: str) -> bytes:
    """What ends an answer: RUN_FINISHED from an AG-UI server (``bridge``, ``bridge-…``,
    ``pydantic-ai``), else the upstream's [DONE] (the proxy, the relay, direct)."""
    return b"RUN_FINISHED" if path.startswith("bridge") or path == "pydantic-ai" else b"[DONE]"


@dataclass(kw_only=True)
class Window:
    """The steady window (``time.time_ns()``) and what was read from /proc in it."""

    start_ns: int
    end_ns: int
    latencies_ns: list[int] = field(default_factory=list)  # of the tokens sent in the window
    cpu: dict[str, float] = field(default_factory=dict)  # process → CPU% of one core
    peak_rss: int = 0


# -- the client ------------------------------------------------------------------------------
class _TokenClock:
    """Notes the latency of each token of one answer, read by ``raw_http.post_raw``."""

    def __init__(self, end: bytes, window: Window) -> None:
        self.end = end
        self.window = window
        self.received = 0
        self.ended = False
        self._buffer = b""

    def feed(self, data: bytes, now: int) -> None:
        buffer = self._buffer + data
        last = 0
        for match in _TIMESTAMP.finditer(buffer):
            sent = int(match[1])
            self.received += 1
            if self.window.start_ns <= sent <= self.window.end_ns:
                self.window.latencies_ns.append(now - sent)
            last = match.end()
        self.ended = self.ended or self.end in buffer
        self._buffer = buffer[max(last, len(buffer) - _KEEP) :]  # a timestamp split by a read


@dataclass(kw_only=True)
class StreamOutcome:
    expected: int
    received: int
    ended: bool
    runs: int = 1


async def stream(
    path: str,
    url: str,
    *,
    start_at: float,
    orders: dict[str, Any],
    window: Window,
) -> StreamOutcome:
    await asyncio.sleep(max(0.0, start_at - time.time()))
    clock = _TokenClock(_end_of(path), window)
    within = orders["tokens"] / orders["rate"] + STREAM_GRACE_S
    ok = await raw_http.post_raw(*e2e.request_for(path, url, orders), clock.feed, within=within)
    return StreamOutcome(
        expected=orders["tokens"], received=clock.received, ended=clock.ended and ok
    )


async def runs(
    path: str,
    url: str,
    *,
    start_at: float,
    until: float,
    rate: float,
    run_tokens: int,
    window: Window,
    first_tokens: int = 0,
) -> StreamOutcome:
    """One client's runs back to back from ``start_at`` to ``until``, each ``run_tokens``
    tokens long (the first ``first_tokens`` long when above 0, the last one shorter), a new
    request each: so that runs begin and end in the steady window, and what a run costs at its
    start and end is counted with its tokens."""
    await asyncio.sleep(max(0.0, start_at - time.time()))
    total = StreamOutcome(expected=0, received=0, ended=True, runs=0)
    length = first_tokens or run_tokens
    while (tokens := min(length, round((until - time.time()) * rate))) > 0:
        length = run_tokens
        orders = {"rate": rate, "tokens": tokens}
        outcome = await stream(path, url, start_at=0, orders=orders, window=window)
        total.expected += outcome.expected
        total.received += outcome.received
        total.ended = total.ended and outcome.ended
        total.runs += 1
    return total


async def _watch(window: Window, pids: dict[str, list[int]]) -> None:
    """CPU time over the window (a server of several processes: their sum), RSS of the server
    under test sampled through it."""
    await asyncio.sleep(max(0.0, window.start_ns / 1e9 - time.time()))
    began = time.perf_counter()

    def cpu(group: list[int]) -> float:
        return sum(map(harness.cpu_seconds, group))

    cpu_before = {name: cpu(group) for name, group in pids.items()}
    while time.time_ns() < window.end_ns:
        rss = sum(map(harness.rss_bytes, pids["server"]))
        window.peak_rss = max(window.peak_rss, rss)
        await asyncio.sleep(RSS_EVERY_S)
    elapsed = time.perf_counter() - began
    window.cpu = {
        name: 100 * (cpu(group) - cpu_before[name]) / elapsed for name, group in pids.items()
    }


async def _level(
    path: str,
    server: Server,
    upstream: Server,
    streams: int,
    rate: float,
    duration: float,
    ramp: float,
    run_tokens: int | None = None,
) -> dict[str, Any]:
    """One level: ``streams`` paced streams, each one run from its start to the end
    (``run_tokens`` None), or runs of ``run_tokens`` tokens back to back (``runs``)."""
    # Not measured: the first run pays for connections and lazy imports.
    warm = Window(start_ns=0, end_ns=0)
    await stream(path, server.url, start_at=0, orders={"rate": 100, "tokens": 5}, window=warm)
    await asyncio.sleep(min(IDLE_S, duration / 5))
    # A server of several processes (--workers): the parent and its workers together.
    server_pids = [server.pid, *harness.worker_pids(server.pid)]
    idle_rss = sum(map(harness.rss_bytes, server_pids))
    t0 = time.time() + 0.1
    until = t0 + ramp + duration
    settle = min(SETTLE_S, duration / 3)
    window = Window(start_ns=int((t0 + ramp + settle) * 1e9), end_ns=int(until * 1e9))
    starts = [t0 + ramp * i / streams for i in range(streams)]
    # Runs back to back: each stream's first run is cut so that the runs' boundaries fall
    # evenly over a run's time, not in waves as the ramp would have them (a window could hold
    # a wave of starts and ends more than another).
    period = (run_tokens or 1) / rate
    firsts = [round(((period - ramp) * i / streams) % period * rate) for i in range(streams)]
    tasks = [
        stream(
            path,
            server.url,
            start_at=start,
            orders={"rate": rate, "tokens": round((until - start) * rate)},
            window=window,
        )
        if run_tokens is None
        else runs(
            path,
            server.url,
            start_at=start,
            until=until,
            rate=rate,
            run_tokens=run_tokens,
            window=window,
            first_tokens=first,
        )
        for start, first in zip(starts, firsts, strict=True)
    ]
    pids = {"server": server_pids, "upstream": [upstream.pid], "client": [os.getpid()]}
    watcher = asyncio.ensure_future(_watch(window, pids))
    outcomes = await asyncio.gather(*tasks)
    await watcher
    latencies = window.latencies_ns
    short = [o for o in outcomes if o.received != o.expected or not o.ended]
    latencies_ms = [ns / 1e6 for ns in latencies]
    return {
        "path": path,
        "streams": streams,
        "rate": rate,
        "run_tokens": run_tokens,
        "runs": 1 + sum(outcome.runs for outcome in outcomes),  # with the warm-up's
        "window_s": (window.end_ns - window.start_ns) / 1e9,
        "tokens_in_window": len(latencies_ms),
        "latency_ms": {
            "p50": harness.percentile(latencies_ms, 0.50),
            "p99": harness.percentile(latencies_ms, 0.99),
            "max": max(latencies_ms),
        }
        if latencies_ms
        else None,
        "cpu_percent": {name: round(value, 1) for name, value in window.cpu.items()},
        # The serving process's CPU per token it delivered: streams x rate tokens a second.
        "cpu_us_per_token": round(window.cpu.get("server", 0) / 100 / (streams * rate) * 1e6, 1),
        "idle_rss_bytes": idle_rss,
        "peak_rss_bytes": window.peak_rss,
        "rss_per_stream_bytes": (window.peak_rss - idle_rss) / streams,
        "problems": [
            f"{path}, {streams} streams: {len(short)} streams short or unfinished "
            f"(first: {short[0].received} of {short[0].expected} tokens, ended={short[0].ended})"
        ]
        if short
        else [],
    }


def measure(
    *,
    smoke: bool,
    levels: Sequence[int] | None = None,
    rate: float = RATE,
    duration: float | None = None,
    ramp: float | None = None,
    stack: ServerStack | None = None,
    paths: Sequence[str] | None = None,
    pin: bool = False,
) -> Outcome:
    """``paths``: the servers measured, of ``PATHS`` (default ``DEFAULT_PATHS``); ``pin``: the
    servers measured on a CPU of their own, the upstream and this client on the others."""
    levels = levels or (SMOKE_LEVELS if smoke else FULL_LEVELS)
    duration = duration or (SMOKE_DURATION if smoke else FULL_DURATION)
    ramp = ramp if ramp is not None else (SMOKE_RAMP if smoke else FULL_RAMP)
    stack = stack or harness.default_stack()
    paths = [path for path in (paths or DEFAULT_PATHS) if _available(path)]
    results: list[dict[str, Any]] = []
    for streams in levels:
        upstream = Spec(factory="upstream")
        env = {apps.UPSTREAM_URL_ENV: upstream.url, apps.MAX_RUNS_ENV: str(streams + 16)}
        served = [path for path in paths if path != "direct"]
        specs = [upstream, *(_spec(path, env) for path in served)]
        with harness.serve(*specs, stack=stack) as (upstream_server, *servers):
            if pin:
                _pin(upstream_server, servers)
            by_path = {**dict(zip(served, servers, strict=True)), "direct": upstream_server}
            for path in paths:
                level = _level(path, by_path[path], upstream_server, streams, rate, duration, ramp)
                results.append(harness.run_client(level))
    config = {
        "levels": list(levels),
        "rate": rate,
        "duration_s": duration,
        "ramp_s": ramp,
        "stack": stack.name,
        "paths": paths,
        "pinned": pin,
    }
    return Outcome(
        name="concurrency",
        config=config,
        results=results,
        rows=rows(results, smoke=smoke),
        problems=[problem for result in results for problem in result.pop("problems")],
    )


def _pin(upstream: harness.Server, servers: Sequence[harness.Server]) -> None:
    """The measured servers (and their workers) on the last CPU this process may use; the
    upstream and this client on the others: the client and the upstream then take nothing
    from the server's core (on 2 cores they share one)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    own, rest = {cpus[-1]}, set(cpus[:-1])
    for server in servers:
        for pid in [server.pid, *harness.worker_pids(server.pid)]:
            os.sched_setaffinity(pid, own)
    os.sched_setaffinity(upstream.pid, rest)
    os.sched_setaffinity(0, rest)


def rows(results: Sequence[dict[str, Any]], *, smoke: bool) -> list[Row]:
    out: list[Row] = []
    for result in results:
        path, streams = result["path"], result["streams"]
        case = f"{path}, {streams} streams x {result['rate']:g}/s"
        latency = result["latency_ms"]
        p99 = latency["p99"] if latency else float("inf")
        kib = result["rss_per_stream_bytes"] / 1024
        value = f"{latency['p50']:.2f} / {p99:.2f} / {latency['max']:.1f} ms" if latency else "none"
        p99_target, p99_verdict = "", ""
        if path == "bridge" and streams in P99_LEVELS:
            p99_target = f"p99 ≤ {TARGET_P99_MS:g} ms"
            relay = _same_level(results, "relay", streams)
            if streams != TARGET_LEVEL and relay is not None and not _carried(relay):
                p99_verdict = "not claimed: the relay itself did not carry them"
            else:
                p99_verdict = harness.verdict(p99 <= TARGET_P99_MS, smoke=smoke)
        out += [
            Row(
                benchmark="concurrency",
                case=case,
                figure="latency p50/p99/max",
                value=value,
                target=p99_target,
                verdict=p99_verdict,
            ),
            _cpu_row(result, results, case, smoke=smoke),
            Row(
                benchmark="concurrency",
                case=case,
                figure="CPU % of a core",
                value=f"{result['cpu_percent'].get('server', 0):.0f}%"
                + f" (client {result['cpu_percent'].get('client', 0):.0f}%)",
            ),
            Row(
                benchmark="concurrency",
                case=case,
                figure="RSS per open stream",
                value=f"{kib:.1f} KiB",
                target=f"≤ {TARGET_KIB_PER_STREAM} KiB" if path == "bridge" else "",
                verdict=harness.verdict(kib <= TARGET_KIB_PER_STREAM, smoke=smoke)
                if path == "bridge"
                else "",
            ),
        ]
    return out


def _same_level(
    results: Sequence[dict[str, Any]], path: str, streams: int
) -> dict[str, Any] | None:
    return next((r for r in results if r["path"] == path and r["streams"] == streams), None)


def _carried(result: dict[str, Any]) -> bool:
    """Whether a server carried its level: its p99 within the target (every token is checked
    by the run itself)."""
    latency = result["latency_ms"]
    return bool(latency) and latency["p99"] <= TARGET_P99_MS


def _cpu_row(
    result: dict[str, Any], results: Sequence[dict[str, Any]], case: str, *, smoke: bool
) -> Row:
    """CPU µs per delivered token; for the bridge, also against the proxy (issue 34) and the
    relay (issue 44) of the same level."""
    us = result["cpu_us_per_token"]
    ratios: list[str] = []
    targets: list[str] = []
    met = True
    for baseline in ("proxy", "relay") if result["path"].startswith("bridge") else ():
        other = _same_level(results, baseline, result["streams"])
        if not other or not other["cpu_us_per_token"]:
            continue
        ratio = us / other["cpu_us_per_token"]
        ratios.append(f"{ratio:.2f}x the {baseline}")
        if baseline == "proxy":
            targets.append(f"≤ {TARGET_US_PER_TOKEN:g} µs, ≤ {TARGET_PROXY_RATIO:g}x the proxy")
            met = met and us <= TARGET_US_PER_TOKEN and ratio <= TARGET_PROXY_RATIO
        elif result["path"] == "bridge" and result["streams"] in RELAY_RATIO_LEVELS:
            targets.append(f"≤ {TARGET_RELAY_RATIO:g}x the relay")
            met = met and ratio <= TARGET_RELAY_RATIO
    value = f"{us:.0f} µs" + (f" ({', '.join(ratios)})" if ratios else "")
    return Row(
        benchmark="concurrency",
        case=case,
        figure="CPU per token",
        value=value,
        target="; ".join(targets),
        verdict=harness.verdict(met, smoke=smoke) if targets else "",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="5 streams for 0.6 s; writes nothing")
    parser.add_argument(
        "--streams", type=int, action="append", help=f"a level (default {FULL_LEVELS})"
    )
    parser.add_argument("--rate", type=float, default=RATE, help=f"tokens/s per stream ({RATE:g})")
    parser.add_argument(
        "--duration", type=float, help=f"seconds of steady state ({FULL_DURATION:g})"
    )
    parser.add_argument(
        "--ramp", type=float, help=f"seconds over which streams open ({FULL_RAMP:g})"
    )
    parser.add_argument(
        "--stack", help="asyncio+h11 or uvloop+httptools (default: the fastest installed)"
    )
    parser.add_argument(
        "--path",
        action="append",
        choices=PATHS,
        help=f"a server to measure (repeatable; default {', '.join(DEFAULT_PATHS)})",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="each measured server on a CPU of its own; the upstream and the client on the rest",
    )
    args = parser.parse_args(argv)
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be positive")
    harness.print_header("concurrent paced streams")
    outcome = measure(
        smoke=args.smoke,
        levels=args.streams,
        rate=args.rate,
        duration=args.duration,
        ramp=args.ramp,
        stack=harness.stack_named(args.stack),
        paths=args.path,
        pin=args.pin,
    )
    return harness.finish(outcome, smoke=args.smoke)


if __name__ == "__main__":
    sys.exit(main())
