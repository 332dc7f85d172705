"""Hostile upstreams against the README's promises of "Failure behaviour" and "History sent
upstream" (issue 40, findings 5 and 6), over real sockets: a real bridge (uvicorn) in front of
``peers_upstream.HostileUpstream``, on both transports."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from peers_upstream import MODEL, WORDS, HostileUpstream, hostile_upstream

from bridge.config import BridgeConfig, UpstreamTransport
from bridge.serve.http.app import create_app
from bridge.serve.upstream.transport import MAX_RESENDS
from servers import post, run_input, serve

TRANSPORTS = ["aiohttp", "httpx"]


def _config(
    upstream: HostileUpstream, transport: UpstreamTransport, **overrides: Any
) -> BridgeConfig:
    settings: dict[str, Any] = {
        "upstream_url": upstream.url,
        "model": MODEL,
        "upstream_transport": transport,
        "metrics": True,
        "reasoning_scope": "current-turn",  # no /props read: only completions on the wire
        **overrides,
    }
    return BridgeConfig(**settings)


def _asking(run: str) -> dict[str, Any]:
    """A run whose upstream request names it (its last message's text)."""
    return run_input([{"id": "u", "role": "user", "content": run}])


def _fill_pool(bridge: str, connections: int) -> None:
    """``connections`` runs at once: the upstream answers none before each has a connection
    of its own, and the bridge's pool keeps them all."""
    with ThreadPoolExecutor(connections) as pool:
        runs = list(pool.map(lambda i: post(bridge, _asking(f"fill-{i}")), range(connections)))
    assert all(frames[-1]["type"] == "RUN_FINISHED" for frames in runs)


def _metric(bridge: str, name: str) -> float:
    text = httpx.get(f"{bridge}/metrics", timeout=10).text
    match = re.search(rf'^{name}{{model="{MODEL}"}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


@contextmanager
def _run_lines(caplog: pytest.LogCaptureFixture) -> Iterator[list[dict[str, Any]]]:
    """The run lines' fields, read once the bridge has stopped (its last line written)."""
    lines: list[dict[str, Any]] = []
    with caplog.at_level(logging.INFO, logger="agui_bridge.runs"):
        yield lines
        lines.extend(
            r.agui_run  # type: ignore[attr-defined]
            for r in caplog.records
            if r.name == "agui_bridge.runs" and r.agui_run.get("event") == "run"  # type: ignore[attr-defined]
        )


@pytest.mark.parametrize("pooled", [1, 4, 12, 30])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_closed_pooled_connection_costs_one_resend_on_a_new_connection(
    transport: UpstreamTransport, pooled: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 5. README "Failure behaviour": a request a pooled connection failed before any
    answer is sent again at once *on a new connection*, counted in the run line and the
    metrics. The upstream reads each request on a reused connection whole, then closes it
    unanswered: once the bridge pooled 30 connections, one run's completion went out 27 times
    (each on another pooled connection, each perhaps a whole generation)."""
    with (
        hostile_upstream(fill=pooled) as upstream,
        _run_lines(caplog) as lines,
        serve(create_app(_config(upstream, transport))) as bridge,
    ):
        _fill_pool(bridge, pooled)
        assert upstream.connections == pooled
        frames = post(bridge, _asking("probe"))
        resends = _metric(bridge, "agui_bridge_upstream_resends_total")
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT") == "".join(
        WORDS
    )
    # Once on a pooled connection (read, then closed), once on a connection made for it.
    assert upstream.completions_of("probe") == 2
    assert upstream.connections == pooled + 1
    [probe] = [line for line in lines if line["upstream_resends"]]
    assert (probe["upstream_resends"], probe["upstream_requests"]) == (1, 1)
    assert resends == 1.0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_resends_are_bounded_per_run_in_all(
    transport: UpstreamTransport, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 5. README "Failure behaviour": at most ``MAX_RESENDS`` resends per run in all,
    whatever its retries. After the pool is full every connection, a new one too, is read and
    closed unanswered: each attempt meets a pooled connection, then a new one; once the run
    spent its resends, a closed pooled connection is a failure like any other, retried with
    backoff and counted."""
    retries = MAX_RESENDS + 3
    with hostile_upstream(fill=30) as upstream, _run_lines(caplog) as lines:
        config = _config(upstream, transport, retries=retries, retry_backoff=0.0001)
        with serve(create_app(config)) as bridge:
            _fill_pool(bridge, 30)
            upstream.set(new="close")
            frames = post(bridge, _asking("probe"))
            resends = _metric(bridge, "agui_bridge_upstream_resends_total")
            retried = _metric(bridge, "agui_bridge_upstream_retries_total")
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "upstream_unreachable"
    attempts = retries + 1
    assert upstream.completions_of("probe") == attempts + MAX_RESENDS
    [probe] = [line for line in lines if line["outcome"] == "error"]
    assert probe["upstream_resends"] == MAX_RESENDS
    assert (resends, retried) == (MAX_RESENDS, retries)
