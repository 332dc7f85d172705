"""What keeping threads costs per token (issue 42, point 8): the bridge's CPU per delivered
token at S paced streams (``--streams``, default 200, at 20 tokens/s each) with ``--threads
memory`` and ``--threads redis://…`` (a ``redis-server`` started here, when one is installed),
against the same bridge keeping none, in the same run: the three bridges up at once before one
upstream, measured in turn (off, memory, redis; ``--repeats`` times, default 6, alternating),
each figure the median of its repeats. Target: threads on ≤ 1.15 x threads off.

concurrency.py's machinery (``concurrency._level``): the same paced upstream, client and
``/proc`` readings; streams open over the ramp, then each client runs runs of ``--run-tokens``
tokens (default 100) back to back, so that what a kept run costs at its start and end (its
thread saved as it begins, folded and saved as it ends, the Redis run keys) falls in the
window with its tokens. The CPU is the bridge process's; Redis's own is not counted.

    python benchmarks/threads_cpu.py          # 200 streams, 6 x 10 s each: results/threads_cpu.json
    python benchmarks/threads_cpu.py --smoke  # 5 streams for 0.6 s, writes nothing

Every stream must deliver each of its tokens and end (RUN_FINISHED); otherwise the run exits
non-zero. Timing never fails the run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apps
import concurrency
import harness
from harness import Outcome, Row, ServerStack, Spec
from thread_stores import redis_server

FULL = {"streams": 200, "duration": 10.0, "ramp": 3.0, "repeats": 6, "run_tokens": 100}
SMOKE = {"streams": 5, "duration": 0.6, "ramp": 0.1, "repeats": 1, "run_tokens": 6}
TARGET_RATIO = 1.15
MODES = ("off", "memory", "redis")


def measure(
    *,
    smoke: bool,
    streams: int,
    repeats: int,
    run_tokens: int,
    duration: float,
    ramp: float,
    rate: float = concurrency.RATE,
    stack: ServerStack | None = None,
    modes: Sequence[str] = MODES,
) -> Outcome:
    stack = stack or harness.default_stack()
    with tempfile.TemporaryDirectory() as folder, redis_server(Path(folder)) as redis_url:
        stores = {"off": "", "memory": "memory", **({"redis": redis_url} if redis_url else {})}
        if not redis_url and "redis" in modes:
            print("threads_cpu: no redis-server installed, its row is left out")
        stores = {mode: store for mode, store in stores.items() if mode in modes}
        upstream = Spec(factory="upstream")
        env = {apps.UPSTREAM_URL_ENV: upstream.url, apps.MAX_RUNS_ENV: str(streams + 16)}
        specs = [Spec(factory="bridge", env={**env, apps.THREADS_ENV: s}) for s in stores.values()]
        results: list[dict[str, Any]] = []
        with harness.serve(upstream, *specs, stack=stack) as (upstream_server, *servers):
            bridges = list(zip(stores, servers, strict=True))
            for repeat in range(repeats):
                # Each repeat begins with the next mode: each is measured first, second and
                # third as often (the machine's speed drifts within a repeat too).
                turn = repeat % len(bridges)
                for mode, server in bridges[turn:] + bridges[:turn]:
                    level = concurrency._level(
                        "bridge", server, upstream_server, streams, rate, duration, ramp,
                        run_tokens=run_tokens,
                    )  # fmt: skip
                    result = harness.run_client(level)
                    results.append({"mode": mode, "repeat": repeat, **result})
    config = {
        "streams": streams,
        "rate": rate,
        "run_tokens": run_tokens,
        "duration_s": duration,
        "ramp_s": ramp,
        "repeats": repeats,
        "stack": stack.name,
        "modes": list(stores),
    }
    return Outcome(
        name="threads_cpu",
        config=config,
        results=results,
        rows=rows(results, smoke=smoke),
        problems=[
            f"threads {result['mode']}: {problem}"
            for result in results
            for problem in result.pop("problems")
        ],
    )


def medians(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per mode: the median CPU µs per token, CPU % and latency p99 of its repeats, and the
    median of its ratios to threads off in the same repeat (``ratio``): the VM's speed drifts
    between repeats by more than the difference measured, and a repeat's modes are measured
    within a minute of each other."""
    out: dict[str, dict[str, float]] = {}
    off = {r["repeat"]: r["cpu_us_per_token"] for r in results if r["mode"] == "off"}
    for mode in dict.fromkeys(result["mode"] for result in results):
        runs = [result for result in results if result["mode"] == mode]
        p99s = [r["latency_ms"]["p99"] for r in runs if r["latency_ms"]]
        ratios = [r["cpu_us_per_token"] / off[r["repeat"]] for r in runs if off.get(r["repeat"])]
        out[mode] = {
            "cpu_us_per_token": statistics.median(r["cpu_us_per_token"] for r in runs),
            "cpu_percent": statistics.median(r["cpu_percent"].get("server", 0) for r in runs),
            "p99_ms": statistics.median(p99s) if p99s else float("inf"),
            "ratio": statistics.median(ratios) if ratios else 0.0,
            "ratio_low": min(ratios, default=0.0),
            "ratio_high": max(ratios, default=0.0),
        }
    return out


def rows(results: Sequence[dict[str, Any]], *, smoke: bool) -> list[Row]:
    figures = medians(results)
    off = figures.get("off", {}).get("cpu_us_per_token", 0.0)
    first = results[0] if results else {"streams": 0, "rate": 0.0, "run_tokens": 0}
    shape = f"{first['streams']} streams x {first['rate']:g}/s, runs of {first['run_tokens']}"
    out: list[Row] = []
    for mode, figure in figures.items():
        us = figure["cpu_us_per_token"]
        value, target, verdict = f"{us:.1f} µs", "", ""
        if mode != "off" and off:
            ratio = figure["ratio"]
            value += (
                f" ({ratio:.2f}x off, repeats {figure['ratio_low']:.2f}-"
                f"{figure['ratio_high']:.2f}x)"
            )
            target = f"≤ {TARGET_RATIO:g}x off"
            verdict = harness.verdict(ratio <= TARGET_RATIO, smoke=smoke)
        case = f"threads {mode}, {shape}"
        out += [
            Row(
                benchmark="threads_cpu",
                case=case,
                figure="CPU per token (median; ratio: of each repeat's)",
                value=value,
                target=target,
                verdict=verdict,
            ),
            Row(
                benchmark="threads_cpu",
                case=case,
                figure="CPU % / latency p99",
                value=f"{figure['cpu_percent']:.0f}% / {figure['p99_ms']:.1f} ms",
            ),
        ]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="5 streams for 0.6 s; writes nothing")
    parser.add_argument("--streams", type=int, help=f"streams at once ({FULL['streams']})")
    parser.add_argument("--repeats", type=int, help=f"measures of each mode ({FULL['repeats']})")
    parser.add_argument("--run-tokens", type=int, help=f"tokens a run ({FULL['run_tokens']})")
    parser.add_argument(
        "--duration", type=float, help=f"seconds of steady state ({FULL['duration']:g})"
    )
    parser.add_argument(
        "--ramp", type=float, help=f"seconds over which streams open ({FULL['ramp']:g})"
    )
    parser.add_argument(
        "--stack", help="asyncio+h11 or uvloop+httptools (default: the fastest installed)"
    )
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"the bridges measured, of {', '.join(MODES)} (default: all; off is the baseline)",
    )
    args = parser.parse_args(argv)
    modes = [mode for mode in args.modes.split(",") if mode]
    if not modes or not set(modes) <= set(MODES):
        parser.error(f"--modes: say some of {', '.join(MODES)}")
    chosen = harness.chosen(parser, args, SMOKE if args.smoke else FULL)
    harness.print_header("CPU per token with threads kept, against none")
    outcome = measure(
        smoke=args.smoke,
        streams=int(chosen["streams"]),
        repeats=int(chosen["repeats"]),
        run_tokens=int(chosen["run_tokens"]),
        duration=float(chosen["duration"]),
        ramp=float(chosen["ramp"]),
        stack=harness.stack_named(args.stack),
        modes=modes,
    )
    return harness.finish(outcome, smoke=args.smoke)


if __name__ == "__main__":
    sys.exit(main())
