"""How long a big server-tool result holds the bridge's event loop: the latency of ``GET /health``
while one run's tool returns a 10 MB text (issue 22, point 4: at most 50 ms).

Three processes: the scripted upstream (``python -m bridge scripted-upstream``), the bridge
(uvicorn, this script with ``--role bridge``) with one server tool that returns ``--size-mb``
MB of prose (``big_result``, a Python function; or ``big__result``, the tool of an MCP server
on stdio, this script with ``--role mcp``), and this process: one thread asks ``/health`` back
to back, another posts one run that calls the tool and reads its whole stream. The figure is
the slowest ``/health`` answer during the run (and the 99th percentile); idle, it is about a
millisecond. Each kind runs ``--runs`` times (default 3), on a fresh bridge.

    python benchmarks/tool_result_stall.py                # 10 MB, python and mcp, 3 runs each
    python benchmarks/tool_result_stall.py --smoke        # 1 MB, one run each
    python benchmarks/tool_result_stall.py --text unicode # beyond ASCII: slower to encode
    PYTHONPATH=/tmp/before python benchmarks/tool_result_stall.py   # another checkout's bridge

The output is checked: each run ends with RUN_FINISHED and its TOOL_CALL_RESULT carries the
whole text. Timing never fails a run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from harness import free_port, health_probes, stall_figures

PROSE = "The quick brown fox considers several alternatives before it jumps over the lazy dog. "
#: ``--text unicode``: beyond ASCII, as most languages' text is (slower to encode than ASCII).
UNICODE = 'Le renard brun réfléchit à plusieurs options 日本語のテキスト "quoted"\n'
KEY = "sk-proj-Zq8vT2mW9xL4nB7cR1pK6hY3jD5fG0sA"
HERE = Path(__file__).resolve()


def big_text(size: int, kind: str = "ascii") -> str:
    unit = UNICODE if kind == "unicode" else PROSE
    return (unit * (size // len(unit) + 1))[:size]


# -- the servers -----------------------------------------------------------------------------
def _serve_bridge(port: int, upstream: str, kind: str, size: int, text_kind: str) -> None:
    import uvicorn

    from bridge.config import BridgeConfig
    from bridge.serve.http.app import create_app

    text = big_text(size, text_kind)

    def big_result() -> str:
        """A big text."""
        return text

    mcp = {"big": f"python {HERE} --role mcp --size {size} --text {text_kind}"}
    if kind != "mcp":
        mcp = {}
    config = BridgeConfig(
        upstream_url=f"{upstream}/v1",
        model="scripted-reasoning-content",
        api_key=KEY,  # a secret to redact, as every real deployment has
        mcp_servers=mcp,
        tool_timeout=120,
    )
    app = create_app(config, tools=[big_result] if kind == "python" else [])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _serve_mcp(size: int, text_kind: str) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big", log_level="WARNING")
    text = big_text(size, text_kind)

    @server.tool()
    def result() -> str:
        """A big text."""
        return text

    server.run()


@contextmanager
def _process(command: list[str], url: str) -> Iterator[None]:
    """A server in its own process group, until it answers ``/health``; stopped after. The
    working folder is the bridge package's root, so ``-m bridge`` and ``PYTHONPATH`` agree."""
    import bridge

    root = Path(bridge.__file__).resolve().parents[1]
    process = subprocess.Popen(command, cwd=root, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited with {process.returncode}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not answer /health")
            time.sleep(0.05)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


# -- the measurement -------------------------------------------------------------------------
def _one_run(bridge_url: str, tool: str, size: int) -> dict[str, float]:
    body = {
        "threadId": "t",
        "runId": f"r-{time.monotonic_ns()}",
        "messages": [{"id": "u", "role": "user", "content": f"Please {tool} now"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    with health_probes(bridge_url, timeout=30) as latencies:
        started = time.perf_counter()
        received = bytearray()
        with httpx.stream("POST", bridge_url, json=body, timeout=120) as response:
            for piece in response.iter_bytes():
                received += piece
        took = time.perf_counter() - started
    frames = [json.loads(f[6:]) for f in received.decode().split("\n\n") if f.startswith("data:")]
    results = [f for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert frames and frames[-1]["type"] == "RUN_FINISHED", frames[-1:]
    assert len(results) == 1 and len(results[0]["content"]) == size, "the result is not whole"
    return {**stall_figures(latencies), "run_s": took}


def _measure(kind: str, size: int, runs: int, text_kind: str) -> list[dict[str, float]]:
    upstream_port, bridge_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}"
    bridge_url = f"http://127.0.0.1:{bridge_port}"
    up = [sys.executable, "-m", "bridge", "scripted-upstream", "--port", str(upstream_port)]
    up += ["--log-level", "warning"]
    tool = "big_result" if kind == "python" else "big__result"
    out = []
    with _process(up, upstream):
        for _ in range(runs):
            command = [sys.executable, str(HERE), "--role", "bridge", "--port", str(bridge_port)]
            command += ["--upstream", upstream, "--kind", kind, "--size", str(size)]
            command += ["--text", text_kind]
            with _process(command, bridge_url):
                _one_run(bridge_url, tool, size)  # warm-up: imports, first connections
                out.append(_one_run(bridge_url, tool, size))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="1 MB, one run each")
    parser.add_argument("--size-mb", type=float, default=10.0)
    parser.add_argument(
        "--text", choices=["ascii", "unicode"], default="ascii", help="the result's characters"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kind", choices=["python", "mcp", "both"], default="both")
    parser.add_argument("--role", choices=["bench", "bridge", "mcp"], default="bench")
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bridge":
        return _serve_bridge(args.port, args.upstream, args.kind, args.size, args.text)
    if args.role == "mcp":
        return _serve_mcp(args.size, args.text)
    size = 1_000_000 if args.smoke else int(args.size_mb * 1_000_000)
    runs = 1 if args.smoke else args.runs
    import bridge

    print(f"tool result stall: {size / 1e6:g} MB {args.text} result, bridge from {bridge.__file__}")
    print("  kind     /health max   p99      p50   probes   run")
    kinds = ["python", "mcp"] if args.kind == "both" else [args.kind]
    for kind in kinds:
        for row in _measure(kind, size, runs, args.text):
            print(
                f"  {kind:7} {row['max_ms']:8.1f} ms {row['p99_ms']:6.1f} ms "
                f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {row['run_s']:6.2f} s"
            )


if __name__ == "__main__":
    main()
