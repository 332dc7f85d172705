"""Every HTTP benchmark in turn, one combined table, ``benchmarks/results/all.json``.

e2e.py (one stream's throughput: bridge, pass-through proxy, direct), concurrency.py (latency,
CPU and memory with many paced streams), run_started.py (time to RUN_STARTED and to the first
content) and workers.py (``uvicorn --workers`` scale-out). Each also runs alone; translate.py
(the pipeline without HTTP) runs apart, as before.

    python benchmarks/run_all.py            # full run (several minutes), writes all.json
    python benchmarks/run_all.py --smoke    # a tiny run of every path (~20 s), writes nothing

A wrong output anywhere exits non-zero (after the other benchmarks ran). Timing never fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence

import concurrency
import e2e
import harness
import run_started
import workers
from harness import Outcome

BENCHMARKS: dict[str, Callable[..., Outcome]] = {
    "e2e": e2e.measure,
    "concurrency": concurrency.measure,
    "run_started": run_started.measure,
    "workers": workers.measure,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run; writes nothing")
    parser.add_argument(
        "--only", action="append", choices=sorted(BENCHMARKS), help="run only these (repeatable)"
    )
    args = parser.parse_args(argv)
    names = args.only or list(BENCHMARKS)
    harness.print_header(f"{', '.join(names)}{' (smoke run)' if args.smoke else ''}")
    print(f"server stacks: {', '.join(stack.name for stack in harness.available_stacks())}")
    load_before = os.getloadavg()
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    for name in names:
        began = time.perf_counter()
        outcome = BENCHMARKS[name](smoke=args.smoke)
        outcomes.append(outcome)
        print(f"\n-- {name} ({time.perf_counter() - began:.0f} s)")
        print(harness.table(outcome.rows))

    elapsed = time.perf_counter() - started
    print(
        f"\n== all ({elapsed:.0f} s; load average before {_load(load_before)}, "
        f"after {_load(os.getloadavg())})"
    )
    print(harness.table([row for outcome in outcomes for row in outcome.rows]))
    problems = [f"{o.name}: {problem}" for o in outcomes for problem in o.problems]
    if problems:
        print("output check failed:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    if harness.bridge_code() != harness.BRIDGE_CODE_AT_START:
        print(
            f"note: the bridge's code changed during the run ({harness.BRIDGE_CODE_AT_START} -> "
            f"{harness.bridge_code()}): figures from before and after mix two versions"
        )
    print("output checked: ok")
    if args.smoke:
        return 0
    results = {
        outcome.name: {
            "config": outcome.config,
            "results": outcome.results,
            "table": [dataclasses.asdict(row) for row in outcome.rows],
        }
        for outcome in outcomes
    }
    config = {
        "benchmarks": names,
        "seconds": round(elapsed),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }
    harness.write_results("all", harness.report("all", config, results))
    return 0


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.2f}" for value in load)


if __name__ == "__main__":
    sys.exit(main())
