"""How long a big attachment holds the bridge's event loop, and how much it slows another stream
(issue 41, point 4): the latency of ``GET /health`` and the longest gap between the frames of a
paced run streaming beside it, while the bridge takes one request carrying a 20 MB base64
attachment (about 15 MB of bytes).

Three processes: an upstream (this script with ``--role upstream``) that answers every request
with the same 40 chunks 5 ms apart without reading the body as JSON (the scripted upstream
parses a 20 MB body on its own event loop, which would stall the other stream there, not in
the bridge), the bridge (uvicorn, this script with ``--role bridge``; its limits raised to take
the attachment, ``--record`` into a temporary folder with ``--record``), and this process: one
thread asks ``/health`` back to back, another streams short runs one after the other and notes
the longest gap between two frames of a run, a third posts the attachment and reads its whole
answer. Idle, ``/health`` answers in about a millisecond and the gap is the pace.

- ``image``: an image part (``image_url`` with a data URL upstream);
- ``pdf``: a PDF as a document part (``file`` with ``file_data``);
- ``text``: a CSV as a document part, read as text (decoded, sent as a text part);
- ``binary``: the PDF as a 0.0.x ``binary`` part;
- ``none``: the same question without an attachment: what the machine's own noise is.

    python benchmarks/attachment_stall.py                   # 20 MB of base64, 3 runs a kind
    python benchmarks/attachment_stall.py --record          # the same, recorded (--record DIR)
    python benchmarks/attachment_stall.py --smoke           # 1 MB, one run a kind
    PYTHONPATH=/tmp/before python benchmarks/attachment_stall.py   # another checkout's bridge

The output is checked: each run ends with RUN_FINISHED, or is reported as refused (a bridge
before issue 41 took images only). Timing never fails a run.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, health_probes, stall_figures
from tool_result_stall import _process

HERE = Path(__file__).resolve()
KINDS = ("none", "image", "pdf", "text", "binary")
PACE = 0.005
MB = 1024 * 1024


def _serve_bridge(port: int, upstream: str, record: str | None) -> None:
    import uvicorn

    from bridge.config import BridgeConfig
    from bridge.serve.http.app import create_app

    limits: dict[str, Any] = {"max_body_bytes": 64 * MB}
    if "max_attachment_bytes" in BridgeConfig.__dataclass_fields__:  # a bridge of issue 41
        limits |= {"max_attachment_bytes": 32 * MB, "max_request_attachment_bytes": 32 * MB}
    config = BridgeConfig(
        upstream_url=f"{upstream}/v1",
        model="paced",
        api_key="sk-proj-Zq8vT2mW9xL4nB7cR1pK6hY3jD5fG0sA",  # a secret to redact, as usual
        record_dir=record,
        **limits,
    )
    uvicorn.run(create_app(config), host="127.0.0.1", port=port, log_level="warning")


def _serve_upstream(port: int) -> None:
    """Chat Completions that streams the same answer to every request, whatever its body."""
    import asyncio

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
        return f"data: {json.dumps(data)}\n\n".encode()

    async def answer() -> Any:
        yield chunk({"role": "assistant", "content": ""})
        for _ in range(40):
            await asyncio.sleep(PACE)
            yield chunk({"content": "word "})
        yield chunk({}, "stop") + b"data: [DONE]\n\n"

    async def completions(request: Request) -> Response:
        await request.body()
        return StreamingResponse(answer(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [Route("/v1/chat/completions", completions, methods=["POST"])]
    routes.append(Route("/health", health))
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


def attachment(kind: str, size: int) -> dict[str, Any]:
    """A content part carrying about ``size`` characters of base64."""
    raw = size * 3 // 4
    if kind == "text":
        row = "2026-05-09,Oslo,4.5,overcast\n"
        data = (row * (raw // len(row) + 1))[:raw].encode()
        name, mime = "weather.csv", "text/csv"
    else:
        data = random.Random(41).randbytes(raw)
        name, mime = (
            ("photo.png", "image/png") if kind == "image" else ("report.pdf", "application/pdf")
        )
    encoded = base64.b64encode(data).decode()
    if kind == "binary":
        return {"type": "binary", "mimeType": mime, "data": encoded, "filename": name}
    return {
        "type": "image" if kind == "image" else "document",
        "source": {"type": "data", "value": encoded, "mimeType": mime},
        "metadata": {"filename": name},
    }


def _body(content: Any) -> dict[str, Any]:
    return {
        "threadId": "t",
        "runId": f"r-{time.monotonic_ns()}",
        "messages": [{"id": "u", "role": "user", "content": content}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


@contextmanager
def stream_gaps(url: str) -> Iterator[list[float]]:
    """Short runs streamed one after the other in a thread while the block runs: the gaps (s)
    between consecutive frames of each run."""
    gaps: list[float] = []
    done = threading.Event()

    def stream() -> None:
        with httpx.Client(timeout=120) as client:
            while not done.is_set():
                body = _body("Tell me something about foxes")
                with client.stream("POST", url, json=body) as response:
                    last = None
                    for _ in response.iter_lines():
                        now = time.perf_counter()
                        if last is not None:
                            gaps.append(now - last)
                        last = now

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    time.sleep(0.3)
    try:
        yield gaps
    finally:
        done.set()
        streamer.join()


def _one_run(bridge_url: str, kind: str, size: int) -> dict[str, Any]:
    content = [{"type": "text", "text": "What is in it?"}]
    if kind != "none":
        content.append(attachment(kind, size))
    raw = json.dumps(_body(content))
    headers = {"content-type": "application/json"}
    with stream_gaps(bridge_url) as gaps, health_probes(bridge_url, timeout=60) as latencies:
        started = time.perf_counter()
        response = httpx.post(bridge_url, content=raw.encode(), headers=headers, timeout=120)
        took = time.perf_counter() - started
    row: dict[str, Any] = {"mb": len(raw) / 1e6, **stall_figures(latencies), "run_s": took}
    row["gap_ms"] = max(gaps, default=0.0) * 1e3
    if response.status_code != 200:
        row["refused"] = f"{response.status_code} {response.json()['error']['code']}"
        return row
    frames = [json.loads(f[6:]) for f in response.text.split("\n\n") if f.startswith("data:")]
    assert frames and frames[-1]["type"] == "RUN_FINISHED", frames[-1:]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="1 MB of base64, one run a kind")
    parser.add_argument("--base64-mb", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kind", choices=[*KINDS, "all"], default="all")
    parser.add_argument("--record", action="store_true", help="the bridge records its runs")
    parser.add_argument("--role", choices=["bench", "bridge", "upstream"], default="bench")
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--record-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "bridge":
        return _serve_bridge(args.port, args.upstream, args.record_dir)
    if args.role == "upstream":
        return _serve_upstream(args.port)
    size = 1_000_000 if args.smoke else int(args.base64_mb * 1_000_000)
    runs = 1 if args.smoke else args.runs
    import bridge

    recorded = ", recorded" if args.record else ""
    print(f"attachment stall: {size / 1e6:g} MB of base64{recorded}, bridge from {bridge.__file__}")
    print("  kind       MB  /health max    p99      p50   probes   stream gap   run")
    upstream_port, bridge_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}"
    bridge_url = f"http://127.0.0.1:{bridge_port}"
    up = [sys.executable, str(HERE), "--role", "upstream", "--port", str(upstream_port)]
    kinds = KINDS if args.kind == "all" else (args.kind,)
    with tempfile.TemporaryDirectory(prefix="attachment-stall-") as folder:
        command = [sys.executable, str(HERE), "--role", "bridge", "--port", str(bridge_port)]
        command += ["--upstream", upstream]
        if args.record:
            command += ["--record-dir", folder]
        with _process(up, upstream), _process(command, bridge_url):
            _one_run(bridge_url, "image", 100_000)  # warm-up: imports, first connections
            for kind in kinds:
                for _ in range(runs):
                    print(_line(kind, _one_run(bridge_url, kind, size)))


def _line(kind: str, row: dict[str, Any]) -> str:
    refused = f"   refused: {row['refused']}" if "refused" in row else ""
    return (
        f"  {kind:7} {row['mb']:5.1f} {row['max_ms']:8.1f} ms {row['p99_ms']:6.1f} ms "
        f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {row['gap_ms']:9.1f} ms "
        f"{row['run_s']:6.2f} s{refused}"
    )


if __name__ == "__main__":
    main()
