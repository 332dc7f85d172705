"""A real Prometheus scrapes a live bridge (``agui-bridge demo --metrics``, a token required)
while the scripted model serves runs with reasoning, a frontend and a server tool call,
upstream errors and a client that goes away, beside requests the bridge refuses; then the test
asks Prometheus' HTTP API for each metric and checks it against what was sent.

Prometheus is Debian's ``prometheus`` (``.ci/run`` installs it); where it is missing the test is
skipped, or fails when ``$CI`` is set (``tests/prometheus_server.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_rules import check_frames, parse_body
from prometheus_server import Prometheus, prometheus, require_prometheus
from servers import TOOLS, free_port, run_input

ROOT = Path(__file__).resolve().parent.parent
#: The bridge's token: runs and Prometheus' scrapes both send it.
TOKEN = "metrics-test-token"
#: What ``agui-bridge`` reads its --auth-token from (a flag would show in ``ps``).
AUTH_TOKEN_VARIABLE = "AGUI_BRIDGE_AUTH_TOKEN"
#: Where the demo serves its agent (Prometheus scrapes the server's root /metrics).
AGENT = "/agent"
#: Seconds between the scripted model's chunks: quick runs, a stream long enough to walk away from.
PACE = 0.01
#: Every run but one; the scripted model streams it one token per chunk (see ``_chunks``).
MODEL = "scripted-reasoning-content"
#: The run whose client goes away: a model of its own, because how many chunks the bridge read
#: before it noticed depends on timing, and token usage comes only at a stream's end.
GONE_MODEL = "scripted-reasoning"
PLAIN_RUNS = 3
UPSTREAM_ERRORS = 2
#: One "word" of many tokens: the scripted model echoes the first six words of the question in
#: its answer, so this makes a stream of about a thousand chunks (ten seconds at PACE), which the
#: client leaves after the first.
LONG_WORD = "-".join(["bee"] * 500)


def test_prometheus_scrapes_what_the_bridge_served(tmp_path: Path) -> None:
    require_prometheus()
    port = free_port()
    # Prometheus first: it takes its targets up about five seconds after it starts, and the runs
    # below fill that time (scrapes fail, harmlessly, until the bridge listens).
    with (
        prometheus(tmp_path, f"127.0.0.1:{port}", bearer_token=TOKEN) as prom,
        _demo(tmp_path, port) as client,
    ):
        usage: list[dict[str, Any]] = []  # the RUN_FINISHED events' usage, one entry per turn
        for number in range(PLAIN_RUNS):
            frames = _run(client, f"Tell me about bees, please ({number}).")
            assert any(f["type"] == "REASONING_MESSAGE_CONTENT" for f in frames)
            assert frames[-1]["type"] == "RUN_FINISHED"
            usage += frames[-1]["usage"]

        # A frontend tool: the run ends with its call pending, for the client to run.
        frames = _run(client, "What's the weather in Paris?", tools=TOOLS[:1])
        [start] = [f for f in frames if f["type"] == "TOOL_CALL_START"]
        assert start["toolCallName"] == "get_weather"
        assert frames[-1]["outcome"]["pendingToolCallIds"] == [start["toolCallId"]]
        usage += frames[-1]["usage"]

        # The demo's server tool: the bridge runs it, and the model answers in a second turn.
        frames = _run(client, "What time is it?")
        assert [f["type"] for f in frames].count("TOOL_CALL_RESULT") == 1
        assert frames[-1]["type"] == "RUN_FINISHED" and len(frames[-1]["usage"]) == 2
        usage += frames[-1]["usage"]

        # Upstream errors: the bridge forwards max_tokens -1 (llama.cpp's "no limit", which it
        # takes), and the scripted upstream, as OpenAI's API does, answers one below 1 with HTTP
        # 400. Two of them, so that runs (time to first event) and upstream requests that
        # produced output (time to first token) differ in number.
        for _ in range(UPSTREAM_ERRORS):
            frames = _run(client, "Tell me about wasps.", forwardedProps={"max_tokens": -1})
            assert frames[-1]["type"] == "RUN_ERROR"
            assert frames[-1]["code"] == "upstream_http_400"

        _walk_away(client, LONG_WORD, forwardedProps={"model": GONE_MODEL})

        refused = _refusals(client)
        _settle(prom)

        _check(prom, usage, refused)


def _check(
    prom: Prometheus, usage: list[dict[str, Any]], refused: dict[tuple[str, ...], float]
) -> None:
    turns = len(usage)  # the finished runs' upstream requests, each of which answered
    plain_and_tools = PLAIN_RUNS + 2
    runs = plain_and_tools + UPSTREAM_ERRORS
    assert _counts(prom, "agui_bridge_runs_started_total", "model") == {
        (MODEL,): runs,
        (GONE_MODEL,): 1,
    }
    assert _counts(prom, "agui_bridge_runs_in_flight", "model") == {}
    ended = {
        (MODEL, "finished", ""): plain_and_tools,
        (MODEL, "error", "upstream_http_400"): UPSTREAM_ERRORS,
        (GONE_MODEL, "cancelled", ""): 1,
    }
    assert _counts(prom, "agui_bridge_runs_ended_total", "model", "outcome", "code") == ended
    _histogram(
        prom,
        "agui_bridge_run_duration_seconds",
        ("model", "outcome"),
        {key[:2]: count for key, count in ended.items()},
    )
    # Every run sent its first event (RUN_STARTED), the refused requests none.
    _histogram(
        prom,
        "agui_bridge_time_to_first_event_seconds",
        ("model",),
        {(MODEL,): runs, (GONE_MODEL,): 1},
    )
    # Each upstream request that produced output: the finished runs' turns, and the stream the
    # client left after its first reasoning (the upstream errors produced none).
    _histogram(
        prom,
        "agui_bridge_time_to_first_token_seconds",
        ("model",),
        {(MODEL,): turns, (GONE_MODEL,): 1},
    )

    def total(key: str) -> float:
        return float(sum(entry.get(key, 0) for entry in usage))

    assert _counts(prom, "agui_bridge_tokens_total", "model", "kind") == _nonzero(
        {
            (MODEL, "input"): total("inputTokens"),
            (MODEL, "output"): total("outputTokens"),
            (MODEL, "reasoning"): total("reasoningTokens"),
            (MODEL, "cached_input"): total("cachedInputTokens"),
        }
    )
    assert total("reasoningTokens") > 0
    chunks = _counts(prom, "agui_bridge_output_chunks_total", "model")
    assert chunks.pop((GONE_MODEL,)) > 0  # however many came before the bridge saw it go
    assert chunks == {(MODEL,): _chunks(usage)}

    assert _counts(prom, "agui_bridge_upstream_requests_total", "model", "status") == {
        (MODEL, "200"): turns,
        (MODEL, "400"): UPSTREAM_ERRORS,
        (GONE_MODEL, "200"): 1,
    }
    assert _counts(prom, "agui_bridge_upstream_failures_total", "model", "kind") == {
        (MODEL, "http"): UPSTREAM_ERRORS
    }
    assert _counts(prom, "agui_bridge_upstream_retries_total", "model") == {}  # 400 is final

    assert _counts(prom, "agui_bridge_tool_calls_total", "tool", "side", "outcome") == {
        ("get_weather", "frontend", "handed_off"): 1,
        ("get_time", "server", "ok"): 1,
    }
    _histogram(prom, "agui_bridge_tool_duration_seconds", ("tool",), {("get_time",): 1})

    assert _counts(prom, "agui_bridge_client_disconnects_total", "model") == {(GONE_MODEL,): 1}
    assert _counts(prom, "agui_bridge_requests_refused_total", "status", "code") == refused


# --- driving the bridge -----------------------------------------------------------------------


@contextmanager
def _demo(directory: Path, port: int) -> Iterator[httpx.Client]:
    """``agui-bridge demo --metrics`` on ``port``, requiring TOKEN, until the block ends; yields
    a client of its server that sends the token. Its output goes to ``directory/bridge.log``."""
    # --threads none: a client that leaves cancels its run at once (counted "cancelled").
    command = [sys.executable, "-m", "bridge", "demo", "--port", str(port), "--threads", "none"]
    command += ["--pace", str(PACE), "--metrics", "--shutdown-grace", "1", "--log-level", "warning"]
    env = {**os.environ, AUTH_TOKEN_VARIABLE: TOKEN}
    log = directory / "bridge.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
        ) as client:
            deadline = time.monotonic() + 30
            while not _healthy(client):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the bridge did not start:\n{log.read_text()}", pytrace=False)
                time.sleep(0.05)
            yield client
    finally:
        process.terminate()  # --shutdown-grace 1: a run still going ends a second later
        process.wait(timeout=15)


def _healthy(client: httpx.Client) -> bool:
    try:
        return client.get(f"{AGENT}/health").status_code == 200
    except httpx.TransportError:
        return False


def _run(client: httpx.Client, question: str, **extra: Any) -> list[dict[str, Any]]:
    """One run over HTTP; its frames, checked by the client's rules."""
    body = run_input([{"id": "u", "role": "user", "content": question}], **extra)
    response = client.post(AGENT, json=body)
    assert response.status_code == 200, response.text
    return check_frames(parse_body(response.text))


def _walk_away(client: httpx.Client, question: str, **extra: Any) -> None:
    """A run whose client closes the connection once the model's output has begun."""
    body = run_input([{"id": "u", "role": "user", "content": question}], **extra)
    with client.stream("POST", AGENT, json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if '"REASONING_MESSAGE_CONTENT"' in line:
                break
        else:
            pytest.fail("the stream ended before any reasoning")
    # Leaving the block closes the connection with most of the stream unread.


def _refusals(client: httpx.Client) -> dict[tuple[str, ...], float]:
    """Requests the bridge answers with an HTTP error instead of a run: no token, a wrong one,
    a body that is not JSON, a model it does not serve, and ``/metrics`` without the token (the
    token guards it: Prometheus' scrapes prove their bearer token works). How many of each
    (status, code)."""
    assert client.get(f"{AGENT}/metrics").status_code == 200  # beside the root's, scraped
    body = run_input()
    answers = [
        client.get("/metrics", headers={"Authorization": ""}),
        client.post(AGENT, json=body, headers={"Authorization": ""}),
        client.post(AGENT, json=body, headers={"Authorization": "Bearer not-the-token"}),
        client.post(AGENT, content=b"{not json", headers={"Content-Type": "application/json"}),
        client.post(AGENT, json=run_input(forwardedProps={"model": "no-such-model"})),
    ]
    counted: dict[tuple[str, ...], float] = {}
    for answer in answers:
        assert 400 <= answer.status_code < 500, answer.text
        key = (str(answer.status_code), answer.json()["error"]["code"])
        counted[key] = counted.get(key, 0) + 1
    assert counted[("401", "unauthorized")] == 3
    return counted


# --- reading Prometheus -------------------------------------------------------------------------


def _settle(prom: Prometheus, timeout: float = 20) -> None:
    """Wait for a scrape that saw every run over: the one whose client went away ends when the
    bridge notices, a moment after the client closed."""
    deadline = time.monotonic() + timeout
    while True:
        prom.scraped_since(time.time())
        if not _counts(prom, "agui_bridge_runs_in_flight", "model"):
            return
        if time.monotonic() > deadline:
            pytest.fail("runs were still in flight at the last scrape", pytrace=False)


def _counts(prom: Prometheus, metric: str, *labels: str) -> dict[tuple[str, ...], float]:
    """The metric's series by ``labels``, those at 0 left out (a counter at 0 is one never
    incremented, whether or not its series exists)."""
    return _nonzero(prom.by(metric, *labels))


def _nonzero(values: dict[tuple[str, ...], float]) -> dict[tuple[str, ...], float]:
    return {key: value for key, value in values.items() if value}


def _histogram(
    prom: Prometheus, name: str, labels: tuple[str, ...], counts: dict[tuple[str, ...], float]
) -> None:
    """A histogram's observations: how many per label set, each set's sum above 0."""
    assert _counts(prom, f"{name}_count", *labels) == counts, name
    sums = _counts(prom, f"{name}_sum", *labels)
    assert sums.keys() == counts.keys(), (name, sums)
    assert all(value > 0 for value in sums.values()), (name, sums)


def _chunks(usage: list[dict[str, Any]]) -> float:
    """The chunks the bridge read from the scripted model for these turns: it streams one
    generated token per chunk, after a chunk that opens the message and before one with the
    finish reason and one with the usage (``bridge/cli/demo/dialects.py``, ``stream_chunks``)."""
    return float(sum(entry["outputTokens"] + 3 for entry in usage))
