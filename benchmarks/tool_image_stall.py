"""How long an MCP tool's big image holds the bridge's event loop: the latency of ``GET /health``
while one run's MCP tool returns a ``--size-mb`` MB image (issue 41, point 5), for an AG-UI 1.0
client (the image as a content part, its bytes decoded and scanned for the key, and the next
request's data URL) and a 0.0.x client (the result's text: the image as JSON, its base64 as
text).

Three processes: the scripted upstream (``python -m bridge scripted-upstream``), the bridge
(uvicorn, this script with ``--role bridge``, a key to redact) with one MCP server on stdio (this
script with ``--role mcp``: a tool ``picture`` that returns the image), and this process: one
thread asks ``/health`` back to back while another posts one run that calls the tool and reads
its whole stream. The figure is the slowest ``/health`` answer during the run (and the 99th
percentile); idle, it is about a millisecond. Each client line runs ``--runs`` times (default
3), on a fresh bridge.

    python benchmarks/tool_image_stall.py                # 10 MB, both lines, 3 runs each
    python benchmarks/tool_image_stall.py --smoke        # 1 MB, one run each
    PYTHONPATH=/tmp/before python benchmarks/tool_image_stall.py   # another checkout's bridge

The output is checked: each run ends with RUN_FINISHED and its TOOL_CALL_RESULT carries the
whole image. Timing never fails a run.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, health_probes, stall_figures
from mcp_types import ContentBlock, ImageContent
from tool_result_stall import KEY, _process

HERE = Path(__file__).resolve()


def image(size: int) -> str:
    """``size`` bytes that do not compress, as an image's, in base64."""
    unit = bytes(range(256)) * 4
    return base64.b64encode((unit * (size // len(unit) + 1))[:size]).decode()


def _serve_bridge(port: int, upstream: str, size: int) -> None:
    import uvicorn

    from bridge.config import BridgeConfig
    from bridge.serve.http.app import create_app

    config = BridgeConfig(
        upstream_url=f"{upstream}/v1",
        model="scripted-reasoning-content",
        api_key=KEY,  # a secret to redact, as every real deployment has
        mcp_servers={"media": f"{sys.executable} {HERE} --role mcp --size {size}"},
        tool_timeout=120,
    )
    uvicorn.run(create_app(config), host="127.0.0.1", port=port, log_level="warning")


def _serve_mcp(size: int) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("media", log_level="WARNING")
    data = image(size)

    @server.tool()
    def picture() -> list[ContentBlock]:
        """A big image."""
        return [ImageContent(type="image", data=data, mime_type="image/png")]

    server.run()


def _one_run(bridge_url: str, protocol: str | None, size: int) -> dict[str, float]:
    body: dict[str, Any] = {
        "threadId": "t",
        "runId": f"r-{time.monotonic_ns()}",
        "messages": [{"id": "u", "role": "user", "content": "Please media__picture now"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    if protocol is not None:
        body["protocolVersion"] = protocol
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
    (result,) = results
    content = result["content"]
    whole = image(size)
    if isinstance(content, list):  # a part (this bridge, a 1.0 client)
        assert content[0]["source"]["value"] == whole, "the image is not whole"
    else:  # text: the image's JSON (a 0.0.x client, or a bridge from before parts)
        assert whole in content, "the image is not whole"
    return {**stall_figures(latencies), "run_s": took}


def _measure(protocol: str | None, size: int, runs: int) -> list[dict[str, float]]:
    upstream_port, bridge_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}"
    bridge_url = f"http://127.0.0.1:{bridge_port}"
    up = [sys.executable, "-m", "bridge", "scripted-upstream", "--port", str(upstream_port)]
    up += ["--log-level", "warning"]
    out = []
    with _process(up, upstream):
        for _ in range(runs):
            command = [sys.executable, str(HERE), "--role", "bridge", "--port", str(bridge_port)]
            command += ["--upstream", upstream, "--size", str(size)]
            with _process(command, bridge_url):
                _one_run(bridge_url, protocol, size)  # warm-up: imports, first connections
                out.append(_one_run(bridge_url, protocol, size))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="1 MB, one run each")
    parser.add_argument("--size-mb", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--client", choices=["1.0", "0.0", "both"], default="both")
    parser.add_argument("--role", choices=["bench", "bridge", "mcp"], default="bench")
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bridge":
        return _serve_bridge(args.port, args.upstream, args.size)
    if args.role == "mcp":
        return _serve_mcp(args.size)
    size = 1_000_000 if args.smoke else int(args.size_mb * 1_000_000)
    runs = 1 if args.smoke else args.runs
    import bridge

    print(f"tool image stall: a {size / 1e6:g} MB image, bridge from {bridge.__file__}")
    print("  client   /health max   p99      p50   probes   run")
    clients = ["1.0", "0.0"] if args.client == "both" else [args.client]
    for client in clients:
        for row in _measure(client if client == "1.0" else None, size, runs):
            print(
                f"  {client:7} {row['max_ms']:8.1f} ms {row['p99_ms']:6.1f} ms "
                f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {row['run_s']:6.2f} s"
            )


if __name__ == "__main__":
    main()
