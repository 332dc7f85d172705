"""Every benchmark's smoke run (``--smoke``: a tiny run of each path, nothing written), several
at once: what ``make test`` ends with.

Each benchmark runs as its own ``python benchmarks/<name>.py --smoke`` process, ``--jobs`` at a
time (default 3: 155 s one after another became 55-88 s on two cores). Each gets a range of ports
of its own (``harness.PORT_RANGE_ENV``, below the kernel's ephemeral ports), so that servers
started by two benchmarks at once never get the same port. Each benchmark's output is printed
whole, in the order named; the run exits non-zero, naming them, when any failed.

    python benchmarks/smoke.py translate run_all firehose     # these, three at a time
    python benchmarks/smoke.py --jobs 1 e2e                   # one at a time
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import harness

BENCH_DIR = Path(__file__).resolve().parent
#: The first port handed to the first benchmark, and how many each one gets: at most 25
#: benchmarks, all below Linux's ephemeral range (32768-60999), so that no port the kernel
#: gives a client (or a test's ``bind(0)``) is one of them.
FIRST_PORT = 20_000
PORTS_EACH = 500


def _run(name: str, ports: range) -> tuple[str, int, str, float]:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / f"{name}.py"), "--smoke"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        env=harness.env_with_port_range(ports),
    )
    return name, done.returncode, done.stdout, time.perf_counter() - began


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("names", nargs="+", help="benchmarks/<name>.py to run, by name")
    parser.add_argument("--jobs", type=int, default=3, help="how many run at once (default 3)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if not (BENCH_DIR / f"{name}.py").is_file()]
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)}")
    if len(args.names) * PORTS_EACH > 32_768 - FIRST_PORT:
        parser.error(f"at most {(32_768 - FIRST_PORT) // PORTS_EACH} benchmarks in one run")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    started = time.perf_counter()
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = [
            pool.submit(_run, name, range(start, start + PORTS_EACH))
            for name, start in zip(args.names, range(FIRST_PORT, 32_768, PORTS_EACH), strict=False)
        ]
        for run in runs:  # in the order named, each as soon as it and those before it end
            name, code, output, seconds = run.result()
            print(f"\n===== {name}.py --smoke: exit {code} ({seconds:.0f} s)", flush=True)
            print(output, end="" if output.endswith("\n") else "\n", flush=True)
            if code != 0:
                failed.append(name)
    elapsed = time.perf_counter() - started
    if failed:
        print(f"\nsmoke runs failed ({elapsed:.0f} s): {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"\nevery smoke run passed: {len(args.names)} in {elapsed:.0f} s, {args.jobs} at once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
