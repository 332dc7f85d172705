"""What metrics and tracing cost: concurrency.py's capacity benchmark through three bridges.

``bridge``: metrics and tracing off (the default); ``bridge-metrics``: ``--metrics``, with
``GET /metrics`` scraped once a second through the level, as Prometheus would (the scrape's
cost counts); ``bridge-otel``: ``--metrics --otel``, scraped too, its spans exported over
OTLP/HTTP (protobuf, the SDK's batch processor with its defaults) to a sink process
(``apps.otlp_sink``) that counts them. All three write the run line (logger
``agui_bridge.runs``, INFO), as ``agui-bridge serve`` always does.

S paced streams at 20 tokens/s (concurrency.py's ``_level``: its window, its latency clock, the
server's CPU from ``/proc``), in two shapes: ``one run`` (each stream is one run from its start
to the end: the capacity benchmark as it is; spans begin in the ramp and end after the window,
so this counts the per-token cost only) and ``runs of N`` (``--run-tokens``, default 100: each
client starts a new run when its last one ends, so runs begin and end in the window and what a
run costs at its start and end, spans and their export among it, is counted with its tokens).
Every repeat (``--repeats``, default 3) starts fresh servers and runs the variants in a rotated
order; the table gives each figure's median over the repeats, the CPU per token against the
``bridge`` row of its shape and level.

    python benchmarks/observability.py --streams 200 --duration 15   # results/observability.json
    python benchmarks/observability.py --smoke   # runs of 10 tokens, 1 s a variant; writes nothing

Output checks, beside concurrency.py's (every token of every run arrives, every run ends): every
scrape answers 200 with the exposition, whose ``agui_bridge_runs_started_total`` at the end
is the number of runs; the sink receives two spans a run (``invoke_agent``, ``chat``) once the
traced bridge has stopped (its shutdown flushes the exporter's queue).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import apps
import concurrency
import harness
import httpx
from harness import Outcome, Row, Server, Spec

VARIANTS = ("bridge", "bridge-metrics", "bridge-otel")
SCRAPED = ("bridge-metrics", "bridge-otel")
SPANS_PER_RUN = 2  # invoke_agent and its chat
SCRAPE_EVERY_S = 1.0
#: What Prometheus 3 asks for: OpenMetrics first (prometheus-client answers with it).
SCRAPE_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
    "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1"
)
FULL_LEVELS = (200,)
FULL_DURATION = 15.0
FULL_REPEATS = 3
FULL_SHAPES = ("one", "runs")
RUN_TOKENS = 100
SMOKE_LEVELS = (5,)
SMOKE_DURATION = 1.0
SMOKE_SHAPES = ("runs",)  # runs begin and end, the metrics are scraped, spans exported
SMOKE_RAMP = 0.1
SMOKE_RUN_TOKENS = 10
TARGET_METRICS_COST = 0.05  # metrics on: ≤ 5% more CPU per token than off (printed, not asserted)
_RUNS_STARTED = re.compile(rb"^agui_bridge_runs_started_total\{[^}]*\} (\S+)$", re.MULTILINE)


def _env(variant: str, common: Mapping[str, str], sink: Spec) -> dict[str, str]:
    env = {**common, apps.RUN_LOG_ENV: "1"}
    if variant in SCRAPED:
        env[apps.METRICS_ENV] = "1"
    if variant == "bridge-otel":
        env |= {
            apps.OTEL_ENV: "1",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url,  # the exporter posts to <it>/v1/traces
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }
    return env


async def _scrape(url: str, until: asyncio.Event, scrapes: list[dict[str, Any]]) -> None:
    """GET /metrics every SCRAPE_EVERY_S until ``until`` is set, and once more after."""
    async with httpx.AsyncClient(timeout=10) as client:
        while True:
            stop = until.is_set()
            began = time.perf_counter()
            response = await client.get(f"{url}/metrics", headers={"accept": SCRAPE_ACCEPT})
            scrapes.append(
                {
                    "status": response.status_code,
                    "ms": (time.perf_counter() - began) * 1000,
                    "bytes": len(response.content),
                    "runs_started": _runs_started(response.content),
                }
            )
            if stop:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), SCRAPE_EVERY_S)


def _runs_started(exposition: bytes) -> float | None:
    match = _RUNS_STARTED.search(exposition)
    return float(match[1]) if match else None


async def _variant(
    variant: str,
    server: Server,
    upstream: Server,
    *,
    streams: int,
    rate: float,
    duration: float,
    ramp: float,
    run_tokens: int | None,
) -> dict[str, Any]:
    level = concurrency._level(
        variant, server, upstream, streams, rate, duration, ramp, run_tokens=run_tokens
    )
    if variant not in SCRAPED:
        return await level
    done = asyncio.Event()
    scrapes: list[dict[str, Any]] = []
    scraper = asyncio.ensure_future(_scrape(server.url, done, scrapes))
    try:
        result = await level
    finally:
        done.set()
        await scraper
    result["scrapes"] = len(scrapes)
    result["scrape_ms"] = {
        "p50": harness.percentile([s["ms"] for s in scrapes], 0.5),
        "max": max(s["ms"] for s in scrapes),
    }
    result["scrape_bytes"] = scrapes[-1]["bytes"]
    bad = [s for s in scrapes if s["status"] != 200 or s["runs_started"] is None]
    if bad:
        result["problems"].append(f"{variant}: {len(bad)} scrapes failed (first: {bad[0]})")
    elif scrapes[-1]["runs_started"] != result["runs"]:
        result["problems"].append(
            f"{variant}: /metrics counts {scrapes[-1]['runs_started']:g} runs started, "
            f"the client made {result['runs']}"
        )
    return result


def _shape(run_tokens: int | None) -> str:
    return "one run" if run_tokens is None else f"runs of {run_tokens}"


def measure(
    *,
    smoke: bool,
    levels: Sequence[int] | None = None,
    rate: float = concurrency.RATE,
    duration: float | None = None,
    ramp: float | None = None,
    repeats: int | None = None,
    run_tokens: int | None = None,
    shapes: Sequence[str] | None = None,
    stack: harness.ServerStack | None = None,
) -> Outcome:
    levels = levels or (SMOKE_LEVELS if smoke else FULL_LEVELS)
    duration = duration or (SMOKE_DURATION if smoke else FULL_DURATION)
    ramp = ramp if ramp is not None else (SMOKE_RAMP if smoke else concurrency.FULL_RAMP)
    repeats = repeats or (1 if smoke else FULL_REPEATS)
    run_tokens = run_tokens or (SMOKE_RUN_TOKENS if smoke else RUN_TOKENS)
    shapes = shapes or (SMOKE_SHAPES if smoke else FULL_SHAPES)
    stack = stack or harness.default_stack()
    modes = [None if shape == "one" else run_tokens for shape in shapes]
    results: list[dict[str, Any]] = []
    problems: list[str] = []
    for streams in levels:
        for mode in modes:
            for repeat in range(repeats):
                order = [VARIANTS[(repeat + i) % len(VARIANTS)] for i in range(len(VARIANTS))]
                load = _load()
                print(
                    f"-- {streams} streams, {_shape(mode)}, repeat {repeat + 1}/{repeats}: "
                    f"{', '.join(order)}; load {load}",
                    flush=True,
                )
                measured = _repeat(
                    order, streams, rate, duration, ramp, mode, stack=stack, smoke=smoke
                )
                for result in measured:
                    result["repeat"] = repeat
                    result["load_before"] = load
                    problems += result.pop("problems")
                results += measured
    config = {
        "levels": list(levels),
        "rate": rate,
        "duration_s": duration,
        "ramp_s": ramp,
        "repeats": repeats,
        "run_tokens": run_tokens,
        "shapes": list(shapes),
        "scrape_every_s": SCRAPE_EVERY_S,
        "stack": stack.name,
    }
    return Outcome(
        name="observability",
        config=config,
        results=results,
        rows=rows(results, smoke=smoke),
        problems=problems,
    )


def _load() -> str:
    try:
        with open("/proc/loadavg") as file:
            return " ".join(file.read().split()[:3])
    except OSError:
        return "?"


def _repeat(
    order: Sequence[str],
    streams: int,
    rate: float,
    duration: float,
    ramp: float,
    run_tokens: int | None,
    *,
    stack: harness.ServerStack,
    smoke: bool,
) -> list[dict[str, Any]]:
    """Fresh servers: the upstream and the sink, around the three bridges; the sink is read
    once the bridges have stopped (the traced one's shutdown flushes its spans)."""
    upstream, sink = Spec(factory="upstream"), Spec(factory="otlp_sink")
    common = {apps.UPSTREAM_URL_ENV: upstream.url, apps.MAX_RUNS_ENV: str(streams + 16)}
    specs = [Spec(factory="bridge", env=_env(variant, common, sink)) for variant in VARIANTS]
    results: dict[str, dict[str, Any]] = {}
    with harness.serve(upstream, sink, stack=stack) as (upstream_server, _):
        with harness.serve(*specs, stack=stack) as bridges:
            servers = dict(zip(VARIANTS, bridges, strict=True))
            for variant in order:
                run = _variant(
                    variant,
                    servers[variant],
                    upstream_server,
                    streams=streams,
                    rate=rate,
                    duration=duration,
                    ramp=ramp,
                    run_tokens=run_tokens,
                )
                results[variant] = harness.run_client(run)
                results[variant]["load_after"] = _load()
        counts = httpx.get(f"{sink.url}/count", timeout=10).json()
    traced = results["bridge-otel"]
    traced["spans_received"], traced["exports"] = counts["spans"], counts["exports"]
    expected = SPANS_PER_RUN * traced["runs"]
    if counts["spans"] != expected:
        traced["problems"].append(
            f"bridge-otel: the sink received {counts['spans']} spans, {expected} expected "
            f"({SPANS_PER_RUN} for each of {traced['runs']} runs)"
        )
    for result in results.values():
        # CPU per token the clients received in the window (runs leave small gaps between them,
        # so this is not quite streams x rate).
        cpu_s = result["cpu_percent"].get("server", 0) / 100 * result["window_s"]
        tokens = result["tokens_in_window"]
        result["cpu_us_per_token_received"] = round(cpu_s / tokens * 1e6, 1) if tokens else None
    return [results[variant] for variant in order]


# -- the table -------------------------------------------------------------------------------
def summary(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians over the repeats, per level, shape and variant, with the cost against ``bridge``."""
    groups: dict[tuple[int, int | None, str], list[dict[str, Any]]] = {}
    for result in results:
        key = (result["streams"], result["run_tokens"], result["path"])
        groups.setdefault(key, []).append(result)
    out: list[dict[str, Any]] = []
    for (streams, run_tokens, variant), group in groups.items():
        us = [r["cpu_us_per_token_received"] or 0.0 for r in group]
        latencies = [r["latency_ms"] for r in group if r["latency_ms"]]
        out.append(
            {
                "streams": streams,
                "run_tokens": run_tokens,
                "variant": variant,
                "repeats": len(group),
                "cpu_us_per_token": statistics.median(us),
                "cpu_us_per_token_each": us,
                "cpu_percent": statistics.median(r["cpu_percent"]["server"] for r in group),
                "p50_ms": statistics.median(lat["p50"] for lat in latencies),
                "p99_ms": statistics.median(lat["p99"] for lat in latencies),
                "peak_rss_mib": statistics.median(r["peak_rss_bytes"] for r in group) / 2**20,
                "runs": statistics.median(r["runs"] for r in group),
                "scrapes": sum(r.get("scrapes", 0) for r in group),
                "spans": sum(r.get("spans_received", 0) for r in group),
            }
        )
    for row in out:
        base = next(
            r
            for r in out
            if r["variant"] == "bridge"
            and (r["streams"], r["run_tokens"]) == (row["streams"], row["run_tokens"])
        )
        row["cost"] = row["cpu_us_per_token"] / base["cpu_us_per_token"] - 1
    return out


def rows(results: Sequence[dict[str, Any]], *, smoke: bool) -> list[Row]:
    out: list[Row] = []
    for line in summary(results):
        case = f"{line['variant']}, {line['streams']} streams, {_shape(line['run_tokens'])}"
        each = " ".join(f"{us:.0f}" for us in line["cpu_us_per_token_each"])
        judged = line["variant"] == "bridge-metrics"
        cost = f" ({line['cost']:+.1%})" if line["variant"] != "bridge" else ""
        extra = []
        if line["scrapes"]:
            extra.append(f"{line['scrapes']} scrapes")
        if line["spans"]:
            extra.append(f"{line['spans']} spans")
        out += [
            Row(
                benchmark="observability",
                case=case,
                figure=f"CPU per token, median of {line['repeats']}",
                value=f"{line['cpu_us_per_token']:.0f} µs{cost} [{each}]",
                target=f"≤ +{TARGET_METRICS_COST:.0%}" if judged else "",
                verdict=harness.verdict(line["cost"] <= TARGET_METRICS_COST, smoke=smoke)
                if judged
                else "",
            ),
            Row(
                benchmark="observability",
                case=case,
                figure="latency p50 / p99, CPU",
                value=f"{line['p50_ms']:.2f} / {line['p99_ms']:.2f} ms, "
                + f"{line['cpu_percent']:.0f}% of a core"
                + "".join(f"; {item}" for item in extra),
            ),
        ]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="5 streams in runs of 10 tokens, 1 s a variant; writes nothing",
    )
    parser.add_argument(
        "--streams", type=int, action="append", help=f"a level (default {FULL_LEVELS})"
    )
    parser.add_argument("--rate", type=float, default=concurrency.RATE, help="tokens/s a stream")
    parser.add_argument(
        "--duration", type=float, help=f"seconds of steady state ({FULL_DURATION:g})"
    )
    parser.add_argument("--ramp", type=float, help="seconds over which streams open (3)")
    parser.add_argument("--repeats", type=int, help=f"repeats of each variant ({FULL_REPEATS})")
    parser.add_argument(
        "--run-tokens", type=int, help=f"tokens a run in the 'runs' shape ({RUN_TOKENS})"
    )
    parser.add_argument(
        "--shape",
        choices=("one", "runs"),
        action="append",
        help="one: a run per stream; runs: runs of --run-tokens back to back (default both; "
        "--smoke: runs)",
    )
    parser.add_argument(
        "--stack", help="asyncio+h11 or uvloop+httptools (default: the fastest installed)"
    )
    args = parser.parse_args(argv)
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be positive")
    harness.print_header("observability's cost: concurrent paced streams")
    outcome = measure(
        smoke=args.smoke,
        levels=args.streams,
        rate=args.rate,
        duration=args.duration,
        ramp=args.ramp,
        repeats=args.repeats,
        run_tokens=args.run_tokens,
        shapes=args.shape,
        stack=harness.stack_named(args.stack),
    )
    return harness.finish(outcome, smoke=args.smoke)


if __name__ == "__main__":
    sys.exit(main())
