"""Where the bridge process spends its CPU during the e2e benchmark: a py-spy profile.

The bridge (``apps.bridge`` under uvicorn) in front of the fast upstream, driven by e2e.py's
client with ``mixed`` streams back to back for ``--seconds``, while ``py-spy record`` samples
the bridge process. Prints the functions with the most samples on top of the stack (self),
the most samples anywhere on the stack (inclusive, bridge code only) and self samples by
package. Needs py-spy (``pip install -e '.[bench]'``) and the right to ptrace the bridge
(root, or ``kernel.yama.ptrace_scope`` 0).

    python benchmarks/profile_bridge.py             # 20 s, writes benchmarks/results/profile.json
    python benchmarks/profile_bridge.py --smoke     # 3 s, writes nothing
    python benchmarks/profile_bridge.py --raw p.txt # keep the collapsed stacks (flamegraph.pl)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apps
import e2e
import harness
from harness import Spec

FULL_SECONDS = 20.0
SMOKE_SECONDS = 3.0
CHUNKS = 20_000
RATE_HZ = 100
TOP = 20
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::\d+)?\)$")
# Frames below which a sample is the event loop itself (in C with uvloop: I/O, timers, the
# scheduling of callbacks).
_LOOP_FRAMES = ("Runner.run (", "run_until_complete (", "run_forever (", "_run_once (")


def package(file: str) -> str:
    """The package (or stdlib module) a frame's file belongs to: py-spy names files relative to
    their ``sys.path`` entry (``bridge/stream.py``, ``anyio/streams/memory.py``, ``typing.py``)."""
    return file.split("/")[0].removesuffix(".py")


def summarise(collapsed: str) -> dict[str, Any]:
    """Top self and inclusive functions, and self samples by package, from py-spy's raw output."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame for frame in stack.split(";") if frame]
        total += count
        leaf = frames[-1]
        if leaf.startswith(_LOOP_FRAMES):
            leaf = "(the event loop: I/O, timers, scheduling; C under uvloop)"
        own[leaf] += count
        match = _FRAME.match(frames[-1])
        packages[package(match["file"]) if match else "?"] += count
        for frame in set(frames):
            if "bridge/" in frame:
                anywhere[frame] += count

    def share(counter: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "percent": round(100 * n / total, 1)}
            for name, n in counter.most_common(TOP)
        ]

    return {
        "samples": total,
        "self": share(own),
        "inclusive_bridge": share(anywhere),
        "packages": share(packages),
    }


async def _drive(url: str, seconds: float) -> int:
    """Streams back to back until ``seconds`` are up; how many were read."""
    body = apps.run_input({"variant": "mixed", "chunks": CHUNKS, "block": apps.WRITE_BLOCK})
    done = 0
    deadline = time.monotonic() + seconds
    async with e2e.new_client() as client:
        while time.monotonic() < deadline:
            await e2e.fetch(client, url, body)
            done += 1
    return done


def profile(py_spy: str, stack: harness.ServerStack, seconds: float, raw: Path) -> dict[str, Any]:
    """Sample the bridge for ``seconds`` while the client keeps it busy; the summary."""
    upstream = Spec(factory="upstream")
    bridge = Spec(factory="bridge", env={apps.UPSTREAM_URL_ENV: upstream.url})
    with harness.serve(upstream, bridge, stack=stack) as (_, server):
        harness.run_client(_drive(server.url, 0.5))  # imports, connections, the upstream's cache
        command = [
            py_spy,
            "record",
            "--pid",
            str(server.pid),
            "--rate",
            str(RATE_HZ),
            "--duration",
            str(round(seconds)),
            "--function",
            "--format",
            "raw",
            "--output",
            str(raw),
        ]
        spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            streams = harness.run_client(_drive(server.url, seconds + 1))
        finally:
            _, errors = spy.communicate(timeout=60)
    if spy.returncode != 0 or not raw.exists():
        raise RuntimeError(f"py-spy failed ({spy.returncode}): {errors.decode(errors='replace')}")
    return {"stack": stack.name, "streams_read": streams, **summarise(raw.read_text())}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_SECONDS:g} s; writes nothing")
    parser.add_argument("--seconds", type=float, help=f"seconds sampled ({FULL_SECONDS:g})")
    parser.add_argument(
        "--stack", action="append", help="asyncio+h11 or uvloop+httptools (default: each installed)"
    )
    parser.add_argument(
        "--raw", type=Path, help="keep py-spy's collapsed stacks (<stack> added to the name)"
    )
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        print("py-spy is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    seconds: float = args.seconds or (SMOKE_SECONDS if args.smoke else FULL_SECONDS)
    stacks = (
        [harness.stack_named(name) for name in args.stack]
        if args.stack
        else harness.available_stacks()
    )
    harness.print_header(f"profile of the bridge process, {seconds:g} s per server stack")
    summaries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for stack in stacks:
            raw = args.raw or Path(scratch) / "collapsed.txt"
            raw = raw.with_name(f"{raw.stem}-{stack.name}{raw.suffix}")
            summary = profile(py_spy, stack, seconds, raw)
            summaries.append(summary)
            read, samples = summary["streams_read"], summary["samples"]
            print(f"\n-- {stack.name}: {read} streams of {CHUNKS:,} chunks; {samples:,} samples")
            for title, key in (
                ("self", "self"),
                ("inclusive, bridge code", "inclusive_bridge"),
                ("self, by package", "packages"),
            ):
                print(f"{title}:")
                for entry in summary[key]:
                    print(f"  {entry['percent']:5.1f}%  {entry['function']}")
    if not args.smoke:
        config = {"seconds": seconds, "chunks": CHUNKS, "rate_hz": RATE_HZ}
        harness.write_results("profile", harness.report("profile", config, summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
