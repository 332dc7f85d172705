"""Observability over real HTTP (README "Observability"): ``/metrics`` and what it counts,
the run line in both forms, its redaction, and when tracing is asked for. The real Prometheus
scrape is ``test_prometheus.py``; the OTLP export ``test_otel.py``."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bridge.cli.options import otel_requested
from bridge.serve.http.app import create_app as create_bridge
from bridge.serve.observe import JsonFormatter
from bridge.serve.observe.metrics import MAX_FRONTEND_TOOLS, Metrics
from servers import (
    TOOLS,
    free_port,
    post,
    run_input,
    scripted_config,
    scripted_stack,
    serve,
)

TOKEN = "metrics-token-5b1e9c2a7d"
KEY = "sk-observe-Zq8vT2mW9xL4nB7cR1pK"


def samples(base: str, headers: dict[str, str] | None = None) -> dict[tuple[str, str], float]:
    """``/metrics`` read back: (sample name, its labels as k=v,k=v sorted) → value."""
    response = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[(sample.name, labels)] = sample.value
    return out


def get_time() -> str:
    """The current time."""
    return "12:00"


def test_metrics_count_a_run_its_tokens_tools_and_bytes() -> None:
    with scripted_stack(tools=[get_time], metrics=True) as made:
        ask = "What's the weather in Paris, and what time is it?"
        body = run_input([{"id": "u", "role": "user", "content": ask}], tools=TOOLS[:1])
        frames = post(made.bridge_url, body)
        seen = samples(made.bridge_url)
    model = made.config.model
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert seen[("agui_bridge_runs_started_total", f"model={model}")] == 1
    assert seen[("agui_bridge_runs_in_flight", f"model={model}")] == 0
    assert seen[("agui_bridge_runs_ended_total", f"code=,model={model},outcome=finished")] == 1
    usage = frames[-1]["usage"]
    for kind, field in (("input", "inputTokens"), ("output", "outputTokens")):
        total = sum(entry.get(field) or 0 for entry in usage)
        assert seen[("agui_bridge_tokens_total", f"kind={kind},model={model}")] == total
    # The model called get_time (a server tool) and get_weather (the frontend's): the server's
    # ran, and the run ended with the frontend's pending.
    assert seen[("agui_bridge_tool_calls_total", "outcome=ok,side=server,tool=get_time")] == 1
    key = ("agui_bridge_tool_calls_total", "outcome=handed_off,side=frontend,tool=get_weather")
    assert seen[key] == 1
    assert seen[("agui_bridge_tool_duration_seconds_count", "tool=get_time")] == 1
    assert seen[("agui_bridge_upstream_requests_total", f"model={model},status=200")] == 1
    assert seen[("agui_bridge_time_to_first_token_seconds_count", f"model={model}")] == 1
    assert seen[("agui_bridge_time_to_first_event_seconds_count", f"model={model}")] == 1
    assert seen[("agui_bridge_output_chunks_total", f"model={model}")] > 0
    assert ("agui_bridge_client_disconnects_total", f"model={model}") not in seen


def test_an_interrupt_and_a_declined_call_are_counted_as_such() -> None:
    from test_approvals_http import TOOLS as APPROVAL_TOOLS
    from test_approvals_http import interrupted, resume

    with scripted_stack(
        tools=cast(list[Callable[..., Any]], APPROVAL_TOOLS),
        metrics=True,
        secret="Qx7Vb2Kp9Lm4Nz8Rt1Wy6Hd5Jf0Gs3",
    ) as made:
        first, frames, history = interrupted(made)
        post(made.bridge_url, resume(first, history, frames, {"approved": False}))
        seen = samples(made.bridge_url)
    model = made.config.model
    tools = "agui_bridge_tool_calls_total"
    assert seen[("agui_bridge_runs_ended_total", f"code=,model={model},outcome=interrupted")] == 1
    assert seen[("agui_bridge_runs_ended_total", f"code=,model={model},outcome=finished")] == 1
    assert seen[(tools, "outcome=awaiting_approval,side=server,tool=send_mail")] == 1
    assert seen[(tools, "outcome=rejected,side=server,tool=send_mail")] == 1
    assert seen[(tools, "outcome=ok,side=server,tool=get_time")] == 1
    assert (tools, "outcome=ok,side=server,tool=send_mail") not in seen


def failing_upstream(status: int) -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": "busy"}}, status_code=status)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_upstream_answers_retries_and_failures() -> None:
    with serve(failing_upstream(503)) as upstream:
        config = scripted_config(upstream, metrics=True, retries=2, retry_backoff=0.01)
        with serve(create_bridge(config)) as bridge:
            frames = post(bridge, run_input())
            seen = samples(bridge)
    model = config.model
    assert frames[-1] == {"type": "RUN_ERROR", "message": "busy", "code": "upstream_http_503"}
    assert seen[("agui_bridge_upstream_requests_total", f"model={model},status=503")] == 3
    assert seen[("agui_bridge_upstream_retries_total", f"model={model}")] == 2
    assert seen[("agui_bridge_upstream_failures_total", f"kind=http,model={model}")] == 1
    error = f"code=upstream_http_503,model={model},outcome=error"
    assert seen[("agui_bridge_runs_ended_total", error)] == 1

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = scripted_config(closed, metrics=True, retries=1, retry_backoff=0.01)
    with serve(create_bridge(config)) as bridge:
        frames = post(bridge, run_input())
        seen = samples(bridge)
    assert frames[-1]["code"] == "upstream_unreachable"
    assert seen[("agui_bridge_upstream_requests_total", f"model={model},status=none")] == 1
    assert seen[("agui_bridge_upstream_failures_total", f"kind=refused,model={model}")] == 1
    assert seen[("agui_bridge_upstream_retries_total", f"model={model}")] == 1


def test_metrics_sit_behind_the_token_unless_public_and_refusals_are_counted() -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with scripted_stack(metrics=True, auth_token=TOKEN) as made:
        assert httpx.get(f"{made.bridge_url}/metrics").status_code == 401
        assert httpx.post(made.bridge_url, json=run_input()).status_code == 401
        bad = httpx.post(made.bridge_url, content=b"{", headers=auth)
        assert bad.status_code == 400
        seen = samples(made.bridge_url, auth)
    assert seen[("agui_bridge_requests_refused_total", "code=unauthorized,status=401")] == 2
    assert (
        seen[
            ("agui_bridge_requests_refused_total", f"code={bad.json()['error']['code']},status=400")
        ]
        == 1
    )
    with scripted_stack(metrics_public=True, metrics=True, auth_token=TOKEN) as made:
        assert httpx.get(f"{made.bridge_url}/metrics").status_code == 200
        assert httpx.get(f"{made.bridge_url}/capabilities").status_code == 401
    with scripted_stack() as made:  # off by default: no such route
        assert httpx.get(f"{made.bridge_url}/metrics").status_code == 404


def test_openmetrics_is_served_to_a_scraper_that_asks() -> None:
    with scripted_stack(metrics=True) as made:
        response = httpx.get(
            f"{made.bridge_url}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_frontend_tool_names_are_bounded() -> None:
    metrics = Metrics()
    for index in range(MAX_FRONTEND_TOOLS + 5):
        metrics.tool_call(f"tool_{index}", "frontend", "handed_off")
    metrics.tool_call("tool_0", "frontend", "handed_off")  # a name already seen keeps its own
    text = metrics.render(None)[0].decode()
    names = {
        sample.labels["tool"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "agui_bridge_tool_calls_total"
    }
    assert len(names) == MAX_FRONTEND_TOOLS + 1 and "other" in names


@contextmanager
def run_lines(caplog: pytest.LogCaptureFixture) -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    with caplog.at_level(logging.INFO, logger="agui_bridge.runs"):
        yield records
        records.extend(r for r in caplog.records if r.name == "agui_bridge.runs")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_one_line_per_run_with_its_figures(
    caplog: pytest.LogCaptureFixture, log_format: str
) -> None:
    with run_lines(caplog) as records, scripted_stack(log_format=log_format) as made:
        body = run_input(threadId="thread-obs")
        response = httpx.post(made.bridge_url, json=body, timeout=30)
    [record] = records
    line = record.getMessage()
    fields: dict[str, Any] = record.agui_run  # type: ignore[attr-defined]
    if log_format == "json":
        assert json.loads(line) == fields
    else:
        assert line.startswith("run thread=thread-obs run=") and "outcome=finished" in line
    assert fields["thread"] == "thread-obs" and fields["run"] == body["runId"]
    assert fields["model"] == made.config.model and fields["protocol"] == "1.0"
    assert fields["outcome"] == "finished" and fields["code"] is None
    usage = [f for f in map(json.loads, _data(response.text))][-1]["usage"]
    assert fields["tokens_in"] == sum(u.get("inputTokens") or 0 for u in usage)
    assert fields["tokens_out"] == sum(u.get("outputTokens") or 0 for u in usage)
    assert fields["bytes_sent"] == len(response.content)
    assert fields["duration_ms"] >= fields["ttft_ms"] > 0


def _data(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def test_the_run_line_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    with run_lines(caplog) as records, scripted_stack(api_key=KEY, log_format="json") as made:
        post(made.bridge_url, run_input(threadId=f"thread-{KEY}"))
    [record] = records
    assert KEY not in record.getMessage() and KEY[:12] not in record.getMessage()
    assert "[redacted]" in record.agui_run["thread"]  # type: ignore[attr-defined]


def test_json_formatter_writes_one_object_per_record() -> None:
    formatter = JsonFormatter("%(message)s", use_colors=False)
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("agui_bridge", logging.ERROR, "f", 1, "it %s", ("broke",), None)
        record.exc_info = sys.exc_info()
    line = json.loads(formatter.format(record))
    assert line["level"] == "ERROR" and line["logger"] == "agui_bridge"
    assert line["message"] == "it broke" and "ValueError: boom" in line["exception"]
    assert "\n" not in formatter.format(record)


@pytest.mark.parametrize(
    ("flag", "environ", "wanted"),
    [
        (True, {}, True),
        (False, {}, False),
        (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, None),
        (False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, None),
        (False, {"OTEL_TRACES_EXPORTER": "console"}, None),
        (False, {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}, False),
        (False, {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}, False),
        (True, {"OTEL_SDK_DISABLED": "true"}, True),
    ],
)
def test_tracing_is_asked_for_by_the_flag_or_the_sdks_variables(
    flag: bool, environ: dict[str, str], wanted: bool | None
) -> None:
    assert otel_requested(flag, environ) is wanted


def test_the_commands_log_is_json_lines_with_log_format_json() -> None:
    """``demo --log-format json``: every line on stderr, uvicorn's and the run line, is JSON."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bridge",
            "demo",
            "--port",
            "0",
            "--pace",
            "0",
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        opened = process.stdout.readline()
        base = opened.split("open ", 1)[1].split("/ ", 1)[0]
        post(f"{base}/agent", run_input(threadId="thread-json"))
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert any("no interrupt secret" in line.get("message", "") for line in lines)
    runs = [line for line in lines if line.get("event") == "run"]
    assert [run["thread"] for run in runs] == ["thread-json"]
    assert runs[0]["logger"] == "agui_bridge.runs" and runs[0]["outcome"] == "finished"
    assert any(line["logger"] == "uvicorn.error" for line in lines)


def test_metrics_carry_no_secret_a_client_put_in_a_label() -> None:
    """A frontend tool's name is the client's text, and a label value: redacted like any body."""
    name = f"tool_{KEY.replace('-', '_')}"
    tool = {"name": name, "description": "d", "parameters": {"type": "object", "properties": {}}}
    with scripted_stack(metrics=True, api_key=KEY) as made:
        body = run_input([{"id": "u", "role": "user", "content": f"call {name}"}], tools=[tool])
        frames = post(made.bridge_url, body)
        text = httpx.get(f"{made.bridge_url}/metrics").text
    assert any(f["type"] == "TOOL_CALL_START" for f in frames)
    pieces = {KEY[i : i + 8] for i in range(len(KEY) - 7)}
    assert not [piece for piece in pieces if piece in text]
    assert 'tool="tool_sk_observe_[redacted]"' in text
