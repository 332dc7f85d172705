"""How long a big input holds the bridge's event loop: the latency of ``GET /health`` while the
bridge takes a 13.5 MB request body, or answers a widget's proxied request whose MCP result is
30 MB (issue 40, finding 7).

Three processes: the scripted upstream (``python -m bridge scripted-upstream``), the bridge
(uvicorn, this script with ``--role bridge``) with one MCP server (this script with ``--role
mcp``: an MCP App whose tool ``big``, which its widget may call, returns ``--result-mb`` MB of
prose), and this process: one thread asks ``/health`` back to back while another posts one
request and reads its whole answer. The figure is the slowest ``/health`` answer meanwhile (and
the 99th percentile); idle, it is about a millisecond. The requests:

- ``parts``: a history of 5,000 user messages, each of many small text parts (the most objects
  a body of that size can make the validator build);
- ``history``: 5,000 messages of plain text, a long chat's history;
- ``context``: a few messages and a context of many small entries;
- ``arrays``: a state of millions of empty arrays, the most objects a body can make the parser
  build in one call (it calls back between objects, never between arrays);
- ``proxied``: a widget's ``tools/call`` of ``big``, answered without the model.

    python benchmarks/big_body_stall.py                 # 13.5 MB bodies, a 30 MB result, 3 runs
    python benchmarks/big_body_stall.py --smoke         # 1 MB bodies, a 2 MB result, one run
    PYTHONPATH=/tmp/before python benchmarks/big_body_stall.py   # another checkout's bridge

The output is checked: each run ends with RUN_FINISHED (the proxied one with the whole text).
Timing never fails a run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, health_probes, stall_figures
from tool_result_stall import _process, big_text

HERE = Path(__file__).resolve()
SHAPES = ("parts", "history", "context", "arrays", "proxied")
MESSAGES = 4999  # and the question: the default --max-messages, 5000


def _serve_bridge(port: int, upstream: str, size: int) -> None:
    import uvicorn

    from bridge.config import BridgeConfig
    from bridge.serve.http.app import create_app

    config = BridgeConfig(
        upstream_url=f"{upstream}/v1",
        model="scripted-reasoning-content",
        api_key="sk-proj-Zq8vT2mW9xL4nB7cR1pK6hY3jD5fG0sA",  # a secret to redact, as usual
        mcp_servers={"ui": f"{sys.executable} {HERE} --role mcp --size {size}"},
        max_body_bytes=32 * 1024 * 1024,
        tool_timeout=120,
    )
    uvicorn.run(create_app(config), host="127.0.0.1", port=port, log_level="warning")


def _serve_mcp(size: int) -> None:
    from mcp.server.apps import Apps
    from mcp.server.mcpserver import MCPServer

    apps = Apps()
    text = big_text(size)

    @apps.tool(resource_uri="ui://big/app.html", visibility=["app"], description="A big text")
    def big() -> str:
        return text

    apps.add_html_resource("ui://big/app.html", "<!doctype html><p>big</p>")
    MCPServer("big", log_level="WARNING", extensions=[apps]).run()


def body_of(shape: str, size: int) -> dict[str, Any]:
    """A ``RunAgentInput`` of about ``size`` bytes, shaped as ``shape`` says."""
    ask = {"id": "ask", "role": "user", "content": "Hello there"}
    messages: list[dict[str, Any]] = [ask]
    context: list[dict[str, str]] = []
    forwarded: dict[str, Any] = {}
    state: Any = {}
    if shape == "parts":
        part = {"type": "text", "text": "word " * 4}
        per = max(1, size // MESSAGES // (len(json.dumps(part)) + 1))
        many = [{"id": f"m{i}", "role": "user", "content": [part] * per} for i in range(MESSAGES)]
        messages = [*many, ask]
    elif shape == "history":
        text = big_text(size // MESSAGES)
        roles = ("user", "assistant")
        chat = [{"id": f"m{i}", "role": roles[i % 2], "content": text} for i in range(MESSAGES)]
        messages = [*chat, ask]
    elif shape == "context":
        entry = {"description": "a fact", "value": "one small value"}
        context = [entry] * (size // (len(json.dumps(entry)) + 1))
    elif shape == "arrays":
        state = {"rows": [[]] * (size // 3)}
    else:
        call = {"serverId": "ui", "method": "tools/call", "params": {"name": "big"}}
        forwarded = {"__proxiedMCPRequest": call}
    return {
        "threadId": "t",
        "runId": f"r-{time.monotonic_ns()}",
        "messages": messages,
        "tools": [],
        "context": context,
        "state": state,
        "forwardedProps": forwarded,
    }


def _one_run(bridge_url: str, shape: str, size: int, result_size: int) -> dict[str, float]:
    raw = json.dumps(body_of(shape, size), separators=(",", ":")).encode()
    headers = {"content-type": "application/json"}
    with health_probes(bridge_url, timeout=60) as latencies:
        started = time.perf_counter()
        received = bytearray()
        with httpx.stream(
            "POST", bridge_url, content=raw, headers=headers, timeout=120
        ) as response:
            for piece in response.iter_bytes():
                received += piece
        took = time.perf_counter() - started
    assert response.status_code == 200, bytes(received[:300])
    frames = [json.loads(f[6:]) for f in received.decode().split("\n\n") if f.startswith("data:")]
    assert frames and frames[-1]["type"] == "RUN_FINISHED", frames[-1:]
    if shape == "proxied":
        text = frames[-1]["result"]["content"][0]["text"]
        assert len(text) == result_size, "the result is not whole"
    return {"mb": len(raw) / 1e6, **stall_figures(latencies), "run_s": took}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="1 MB bodies, a 2 MB result, 1 run")
    parser.add_argument("--body-mb", type=float, default=13.5)
    parser.add_argument("--result-mb", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--role", choices=["bench", "bridge", "mcp"], default="bench")
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bridge":
        return _serve_bridge(args.port, args.upstream, args.size)
    if args.role == "mcp":
        return _serve_mcp(args.size)
    size = 1_000_000 if args.smoke else int(args.body_mb * 1_000_000)
    result_size = 2_000_000 if args.smoke else int(args.result_mb * 1_000_000)
    runs = 1 if args.smoke else args.runs
    import bridge

    print(f"big body stall: {size / 1e6:g} MB bodies, a {result_size / 1e6:g} MB proxied result")
    print(f"  bridge from {bridge.__file__}")
    print("  shape       MB  /health max    p99      p50   probes   run")
    upstream_port, bridge_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}"
    bridge_url = f"http://127.0.0.1:{bridge_port}"
    up = [sys.executable, "-m", "bridge", "scripted-upstream", "--port", str(upstream_port)]
    up += ["--log-level", "warning"]
    command = [sys.executable, str(HERE), "--role", "bridge", "--port", str(bridge_port)]
    command += ["--upstream", upstream, "--size", str(result_size)]
    shapes = SHAPES if args.shape == "all" else (args.shape,)
    with _process(up, upstream), _process(command, bridge_url):
        _one_run(bridge_url, "proxied", 0, result_size)  # warm-up: imports, first connections
        _one_run(bridge_url, "history", 100_000, 0)
        for shape in shapes:
            for _ in range(runs):
                row = _one_run(bridge_url, shape, size, result_size)
                print(
                    f"  {shape:8} {row['mb']:5.1f} {row['max_ms']:8.1f} ms {row['p99_ms']:6.1f} ms "
                    f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {row['run_s']:6.2f} s"
                )


if __name__ == "__main__":
    main()
