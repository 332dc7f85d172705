"""What one ``update_state`` patch costs the bridge's other users (issue 40, finding 2): the
latency of ``GET /health`` while a run applies it, the bridge's CPU for the run, and how much
its memory grew at the peak.

Two servers in their own processes: the demo's scripted model (``apps:scripted_upstream``),
which applies whatever "… patch: [ … ]" the user types, and the bridge before it with
``--shared-state`` (``apps:shared_state_bridge``), fresh for each run. This process asks
``/health`` back to back in one thread and posts the run in another. Two patches:

- ``copies``: 18 operations, each copying the subtree ``/a`` into itself (``--base`` bytes of
  text in it): applied whole, they double it 18 times (2^18 copies) before a size check made
  afterwards could refuse it; checked before each copy, it is refused once the copies would
  pass ``--max-state-bytes`` (1 MB).
- ``big``: one small edit of a state of about 900 KB (the client's), applied and sent back
  whole as the run's ``STATE_SNAPSHOT``.

    python benchmarks/state_patch_stall.py            # both, 3 runs each
    python benchmarks/state_patch_stall.py --smoke    # a smaller base, one run each
    PYTHONPATH=/tmp/before python benchmarks/state_patch_stall.py   # another checkout's bridge

The output is checked: each run ends with RUN_FINISHED; ``copies`` changed nothing (its result
is an error, no STATE_DELTA), ``big`` applied its edit. Timing never fails a run.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx
from apps import UPSTREAM_URL_ENV
from harness import (
    Spec,
    cpu_seconds,
    default_stack,
    health_probes,
    rss_bytes,
    serve,
    stall_figures,
)

COPIES = 18


def _patch_and_state(kind: str, base: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if kind == "copies":
        patch = [{"op": "copy", "from": "/a", "path": f"/a/c{i}"} for i in range(COPIES)]
        return patch, {"a": {"text": "x" * base}}
    items = ["an item of the list, a hundred bytes long " * 2 + "x" * 16] * 9000
    return [{"op": "replace", "path": "/items/0", "value": "edited"}], {"items": items}


def _one_run(bridge: str, pid: int, kind: str, base: int) -> dict[str, float]:
    patch, state = _patch_and_state(kind, base)
    text = f"Update it with patch: {json.dumps(patch)}"
    body = {
        "threadId": "t",
        "runId": f"r-{time.monotonic_ns()}",
        "messages": [{"id": "u", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "state": state,
        "forwardedProps": {},
    }
    with health_probes(bridge, timeout=120) as latencies:
        rss, cpu = rss_bytes(pid), cpu_seconds(pid)
        started = time.perf_counter()
        received = bytearray()
        with httpx.stream("POST", bridge, json=body, timeout=600) as response:
            for piece in response.iter_bytes():
                received += piece
        took = time.perf_counter() - started
        cpu = cpu_seconds(pid) - cpu
        grown = rss_bytes(pid, "VmHWM") - rss
    frames = [json.loads(f[6:]) for f in received.decode().split("\n\n") if f.startswith("data:")]
    kinds = [frame["type"] for frame in frames]
    [result] = [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert kinds[-1] == "RUN_FINISHED", kinds[-3:]
    if kind == "copies":
        assert result.startswith("Error: update_state:") and "STATE_DELTA" not in kinds, result
    else:
        assert result.startswith("State updated.") and "STATE_DELTA" in kinds, result[:200]
    figures = stall_figures(latencies)
    return {**figures, "run_s": took, "cpu_s": cpu, "grown_mb": grown / 1e6}


def _measure(kind: str, base: int, runs: int) -> list[dict[str, float]]:
    # -P: not the working folder first on the servers' path, but PYTHONPATH's bridge (the one
    # this process imported and names), wherever it is run from.
    upstream = Spec(factory="scripted_upstream", python_options=("-P",))
    out = []
    for _ in range(runs):
        env = {UPSTREAM_URL_ENV: upstream.url}
        bridge = Spec(factory="shared_state_bridge", env=env, python_options=("-P",))
        with serve(upstream, bridge, stack=default_stack()) as (_, server):
            out.append(_one_run(server.url, server.pid, kind, base))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="a base of 20 bytes, one run each")
    parser.add_argument("--base", type=int, default=1000, help="bytes of text in /a (copies)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kind", choices=["copies", "big", "both"], default="both")
    args = parser.parse_args()
    base = 20 if args.smoke else args.base
    runs = 1 if args.smoke else args.runs
    import bridge

    print(f"state patch stall: {COPIES} copies of a {base}-byte subtree; bridge {bridge.__file__}")
    print("  kind    /health max     p99      p50  probes     run     CPU   memory grown")
    kinds = ["copies", "big"] if args.kind == "both" else [args.kind]
    for kind in kinds:
        for row in _measure(kind, base, runs):
            print(
                f"  {kind:7} {row['max_ms']:8.1f} ms {row['p99_ms']:6.1f} ms "
                f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {row['run_s']:6.2f} s "
                f"{row['cpu_s']:5.2f} s {row['grown_mb']:8.1f} MB"
            )


if __name__ == "__main__":
    main()
