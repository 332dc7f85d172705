"""Draw README's trace picture (docs/otel-trace.png) from a real run's spans.

Starts ``agui-bridge demo --otel`` with the console exporter, asks the scripted model the time
(it calls the server tool ``get_time``, reads the result, answers), reads the spans the SDK
printed, draws them as a waterfall in HTML and has headless Chromium take its picture.

    .venv/bin/python docs/trace_picture.py    # needs the otel extra and a Chromium ($CHROMIUM)
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

OUT = Path(__file__).resolve().parent / "otel-trace.png"
SHOWN = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.conversation.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
)


def spans_of_a_run() -> list[dict[str, Any]]:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "50"}
    command = [sys.executable, "-m", "bridge", "demo", "--port", "0", "--pace", "0.01", "--otel"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        found = re.search(r"open (http://[\d.:]+)/ ", process.stdout.readline())
        assert found, "the demo did not start"
        body = {
            "threadId": "thread-demo",
            "runId": "run-1",
            "messages": [{"id": "u1", "role": "user", "content": "What time is it?"}],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
        traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        httpx.post(f"{found.group(1)}/agent", json=body, headers={"traceparent": traceparent})
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    spans, decoder, at = [], json.JSONDecoder(), 0
    while (start := out.find("{", at)) >= 0:
        span, at = decoder.raw_decode(out, start)
        spans.append(span)
    return spans


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def waterfall(spans: list[dict[str, Any]]) -> str:
    begin = min(_time(s["start_time"]) for s in spans)
    end = max(_time(s["end_time"]) for s in spans)
    width = end - begin
    by_id = {s["context"]["span_id"]: s for s in spans}

    def depth(span: dict[str, Any]) -> int:
        parent = span.get("parent_id")
        return 0 if parent not in by_id else 1 + depth(by_id[parent])

    rows = []
    for span in sorted(spans, key=lambda s: (_time(s["start_time"]), depth(s))):
        left = (_time(span["start_time"]) - begin) / width * 100
        size = max((_time(span["end_time"]) - _time(span["start_time"])) / width * 100, 0.4)
        ms = (_time(span["end_time"]) - _time(span["start_time"])) * 1000
        shown = {
            k: round(v, 4) if isinstance(v, float) else v
            for k, v in span["attributes"].items()
            if k in SHOWN
        }
        attributes = " · ".join(f"{html.escape(k)}={html.escape(str(v))}" for k, v in shown.items())
        kind = span["kind"].removeprefix("SpanKind.")
        rows.append(
            f'<div class="row"><div class="name" style="padding-left:{depth(span) * 18}px">'
            f"{html.escape(span['name'])} <small>{kind} · {ms:.1f} ms</small></div>"
            f'<div class="lane"><div class="bar {kind.lower()}" style="left:{left:.2f}%;'
            f'width:{size:.2f}%"></div></div>'
            f'<div class="attrs">{attributes}</div></div>'
        )
    trace_id = spans[0]["context"]["trace_id"]
    return f"""<!doctype html><meta charset="utf-8"><style>
body{{font:13px system-ui,sans-serif;margin:16px;color:#1f2328;background:#fff;width:1160px}}
h1{{font-size:15px;margin:0 0 10px}} .row{{display:grid;grid-template-columns:300px 1fr;
gap:4px 12px;padding:6px 0;border-top:1px solid #e5e7eb}} .name{{font-weight:600}}
small{{color:#6b7280;font-weight:400}} .lane{{position:relative;height:18px;background:#f6f8fa}}
.bar{{position:absolute;top:3px;height:12px;border-radius:3px;background:#2563eb}}
.client{{background:#059669}} .internal{{background:#d97706}}
.attrs{{grid-column:2;color:#4b5563;font:11px ui-monospace,monospace;word-break:break-all}}</style>
<h1>Trace {trace_id}: <code>agui-bridge demo --otel</code>, "What time is it?" (parent: the
request's traceparent)</h1>{"".join(rows)}"""


def main() -> None:
    spans = spans_of_a_run()
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or "chromium"
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "trace.html"
        page.write_text(waterfall(spans))
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                f"--user-data-dir={folder}/profile",
                "--hide-scrollbars",
                "--window-size=1200,330",
                f"--screenshot={OUT}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"{len(spans)} spans drawn in {OUT}")


if __name__ == "__main__":
    main()
