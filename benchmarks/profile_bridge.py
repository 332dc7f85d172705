"""Where the bridge process spends its CPU under the e2e (or concurrency) load: a cProfile profile.

The bridge runs as ``apps.profiled_bridge`` under uvicorn in front of the fast upstream; after
a warm-up the client switches cProfile on (``POST /profile/start``), drives the bridge for
``--seconds`` with e2e.py's ``mixed`` streams back to back (or ``--paced S`` streams at 20
tokens/s, concurrency.py's load), and switches it off. Printed: the functions with the most
own time, with their calls per upstream chunk (chunks = calls of
``ChatStreamTranslator.feed``); own time by package; and the share of the pure core (decode,
translate, encode) against everything around it.

Why cProfile and not a sampling profiler: on the 2-core VM these figures come from, py-spy
(blocking mode) put a third of its samples in ``asyncio.current_task``, where ``perf`` finds
about 1% (the ``getpid`` that CPython 3.11's ``get_running_loop`` makes): its samples were
skewed. cProfile counts every call exactly; its own cost per call inflates small functions
called often, so read the times as relative, and the run itself is slower than unprofiled.

    python benchmarks/profile_bridge.py              # 20 s a stack: benchmarks/results/profile.json
    python benchmarks/profile_bridge.py --smoke      # 3 s, writes nothing
    python benchmarks/profile_bridge.py --paced 200  # 200 paced streams (concurrency.py's load)
"""

from __future__ import annotations

import argparse
import asyncio
import pstats
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apps
import concurrency
import e2e
import harness
import httpx
from harness import ServerStack, Spec

FULL_SECONDS = 20.0
SMOKE_SECONDS = 3.0
CHUNKS = 20_000
TOP = 25
# The pure core: no I/O, what translate.py measures; everything else is HTTP and async plumbing.
CORE = (
    ("bridge/serve/upstream/sse.py", "chunk_from_data"),
    ("bridge/core/translate.py", "feed"),
    ("bridge/core/encode.py", "encode_event"),
)

Key = tuple[str, int, str]  # pstats: file, line, function


def package(file: str) -> str:
    """The package or stdlib module a function's file belongs to; ``~`` is a C builtin."""
    if file == "~":
        return "C builtins (socket I/O, json, dict…)"
    if "/site-packages/" in file:
        return file.split("/site-packages/")[1].split("/")[0].removesuffix(".py")
    parts = Path(file).parts
    if "bridge" in parts:
        return "bridge"
    if "python3.11" in parts or file.startswith("<"):
        rest = parts[parts.index("python3.11") + 1 :] if "python3.11" in parts else (file,)
        return rest[0].removesuffix(".py")
    return Path(file).name


def _name(key: Key) -> str:
    file, line, function = key
    if file == "~":
        return function
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{function} ({short}:{line})"


def summarise(stats: pstats.Stats) -> dict[str, Any]:
    table: dict[Key, tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in table.values())
    chunks = sum(
        nc
        for (file, _, function), (_, nc, *_) in table.items()
        if file.endswith("bridge/core/translate.py") and function == "feed"
    )
    per_chunk = max(chunks, 1)
    own = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:TOP]
    packages: dict[str, float] = {}
    for (file, _, _), (_, _, tt, _, _) in table.items():
        packages[package(file)] = packages.get(package(file), 0.0) + tt
    core = sum(
        ct
        for (file, _, function), (_, _, _, ct, _) in table.items()
        if any(file.endswith(f) and function == fn for f, fn in CORE)
    )
    return {
        "chunks": chunks,
        "function_calls": sum(nc for _, nc, _, _, _ in table.values()),
        "seconds_profiled": round(total, 2),
        "core_percent": round(100 * core / total, 1),
        "own": [
            {
                "function": _name(key),
                "percent": round(100 * tt / total, 1),
                "calls_per_chunk": round(nc / per_chunk, 2),
            }
            for key, (_, nc, tt, _, _) in own
        ],
        "packages": [
            {"package": name, "percent": round(100 * tt / total, 1)}
            for name, tt in sorted(packages.items(), key=lambda item: -item[1])[:12]
        ],
    }


async def _drive_paced(url: str, seconds: float, streams: int, run_tokens: int | None) -> None:
    window = concurrency.Window(start_ns=0, end_ns=0)
    rate = concurrency.RATE
    start = time.time()
    if run_tokens:  # runs of run_tokens back to back: a run's start and end are counted too
        until = start + seconds
        await asyncio.gather(
            *(
                concurrency.runs(
                    "bridge",
                    url,
                    start_at=start + i / streams,
                    until=until,
                    rate=rate,
                    run_tokens=run_tokens,
                    window=window,
                )
                for i in range(streams)
            )
        )
        return
    orders = {"rate": rate, "tokens": round(seconds * rate)}
    await asyncio.gather(
        *(
            concurrency.stream(
                "bridge", url, start_at=start + i / streams, orders=orders, window=window
            )
            for i in range(streams)
        )
    )


async def _drive(url: str, seconds: float) -> None:
    body = apps.run_input({"variant": "mixed", "chunks": CHUNKS, "block": apps.WRITE_BLOCK})
    deadline = time.monotonic() + seconds
    async with e2e.new_client() as client:
        while time.monotonic() < deadline:
            await e2e.fetch(client, url, body)


def profile(
    stack: ServerStack,
    seconds: float,
    paced: int | None,
    out: Path,
    *,
    threads: str | None = None,
    run_tokens: int | None = None,
) -> dict[str, Any]:
    upstream = Spec(factory="upstream")
    env = {
        apps.UPSTREAM_URL_ENV: upstream.url,
        apps.MAX_RUNS_ENV: str((paced or 0) + 16),
        apps.PROFILE_OUT_ENV: str(out),
        **({apps.THREADS_ENV: threads} if threads else {}),
    }
    bridge = Spec(
        factory="profiled_bridge",
        env=env,
        python_options=("-m", "cProfile", "-o", str(out.with_suffix(".all"))),
    )
    with harness.serve(upstream, bridge, stack=stack) as (_, server):
        harness.run_client(_drive(server.url, 0.5))  # imports, connections, the upstream's cache
        httpx.post(f"{server.url}/profile/start").raise_for_status()
        harness.run_client(
            _drive_paced(server.url, seconds, paced, run_tokens)
            if paced
            else _drive(server.url, seconds)
        )
        httpx.post(f"{server.url}/profile/stop", timeout=60).raise_for_status()
    return {"stack": stack.name, **summarise(pstats.Stats(str(out)))}


def _print(stack: ServerStack, summary: dict[str, Any]) -> None:
    calls = summary["function_calls"] / max(summary["chunks"], 1)
    print(
        f"\n-- {stack.name}: {summary['chunks']:,} upstream chunks, {calls:.0f} function calls "
        f"a chunk; the pure core (decode, translate, encode): {summary['core_percent']}%"
    )
    print(f"  {'own time':64} {'%':>5} {'calls/chunk':>11}")
    for entry in summary["own"]:
        function, percent, calls = entry["function"], entry["percent"], entry["calls_per_chunk"]
        print(f"  {function[:64]:64} {percent:5.1f} {calls:11.2f}")
    print("  own time by package:")
    for entry in summary["packages"]:
        print(f"  {entry['percent']:5.1f}%  {entry['package']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_SECONDS:g} s; writes nothing")
    parser.add_argument("--seconds", type=float, help=f"seconds profiled ({FULL_SECONDS:g})")
    parser.add_argument(
        "--stack", action="append", help="asyncio+h11 or uvloop+httptools (default: each installed)"
    )
    parser.add_argument(
        "--paced",
        type=int,
        metavar="S",
        help="load: S paced streams at 20 tokens/s instead of e2e streams",
    )
    parser.add_argument(
        "--threads", metavar="STORE", help="the bridge's --threads (memory, redis://…)"
    )
    parser.add_argument(
        "--run-tokens",
        type=int,
        metavar="N",
        help="with --paced: each stream runs runs of N tokens back to back (one run otherwise)",
    )
    args = parser.parse_args(argv)
    seconds: float = args.seconds or (SMOKE_SECONDS if args.smoke else FULL_SECONDS)
    stacks = (
        [harness.stack_named(n) for n in args.stack] if args.stack else harness.available_stacks()
    )
    load = f"{args.paced} paced streams" if args.paced else f"{CHUNKS:,}-chunk mixed streams"
    harness.print_header(f"cProfile of the bridge process, {load}, {seconds:g} s per stack")
    summaries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for stack in stacks:
            summary = profile(
                stack,
                seconds,
                args.paced,
                Path(scratch) / f"{stack.name}.prof",
                threads=args.threads,
                run_tokens=args.run_tokens,
            )
            summaries.append(summary)
            _print(stack, summary)
    if not args.smoke:
        name = f"profile-paced-{args.paced}" if args.paced else "profile"
        name += f"-threads-{args.threads.split(':')[0]}" if args.threads else ""
        config = {
            "seconds": seconds,
            "chunks_per_stream": CHUNKS,
            "paced_streams": args.paced,
            "threads": args.threads,
            "run_tokens": args.run_tokens,
        }
        harness.write_results(name, harness.report(name, config, summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
