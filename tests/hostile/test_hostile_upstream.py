"""Hostile upstreams against the README's promises of "Failure behaviour" and "History sent
upstream" (issue 40, findings 5 and 6), over real sockets: a real bridge (uvicorn) in front of
``peers_upstream.HostileUpstream``, on both transports."""

from __future__ import annotations

import asyncio
import logging
import re
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from bridge.config import BridgeConfig, UpstreamTransport
from bridge.core.errors import BridgeError
from bridge.serve.http.app import create_app
from bridge.serve.run.props import PROPS_RETRY, PROPS_TTL
from bridge.serve.upstream import client
from bridge.serve.upstream.client import UpstreamClient
from bridge.serve.upstream.transport import MAX_RESENDS
from peers_upstream import HUGE, MODEL, WORDS, HostileUpstream, hostile_upstream
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


class _Clock:
    """The props cache's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


HOSTILE_PROPS = ["drip", "nested", "huge", "huge_chunked", "gzip_bomb"]
PROPS_READ = f"GET /props?model={MODEL}&autoload=false"


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    """``GET /props`` in 1 s in all (5 s in the bridge): the drip sends a byte every 0.25 s, far
    inside any timeout per read."""
    monkeypatch.setattr(client, "SMALL_ANSWER_DEADLINE", 1.0)
    return 1.0


@pytest.mark.parametrize("mode", HOSTILE_PROPS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_hostile_props_neither_holds_nor_breaks_a_run(
    transport: UpstreamTransport, mode: str, short_deadline: float
) -> None:
    """Finding 6. README "History sent upstream": ``/props`` is read within a deadline in all,
    a size and a depth, and a read that failed is kept as failed for its retry time, so it can
    hold a run only that long and break none, nor ``/capabilities``. A byte every 4 s held every
    run for 12 minutes; 100,000 nested arrays cut every run with no terminal event, made
    ``/capabilities`` answer 500 and were read again by every run; 200 MB or a gzip bomb were
    read whole."""
    with hostile_upstream(props=mode, reused="answer") as upstream:
        app = create_app(_config(upstream, transport, reasoning_scope="auto"))
        clock = app.state.bridge.upstream_props.clock = _Clock()
        with serve(app) as bridge:
            runs = [post(bridge, _asking(name)) for name in ("first", "second")]
            assert upstream.requests.count(PROPS_READ) == 1  # the failure kept: no second read
            clock.now += PROPS_TTL + PROPS_RETRY  # past any entry: read again, by /capabilities
            described = httpx.get(f"{bridge}/capabilities", timeout=30)
    for frames in runs:
        assert frames[-1]["type"] == "RUN_FINISHED"
        text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == "".join(WORDS)
    assert upstream.completions == ["first", "second"]
    assert described.status_code == 200
    custom = described.json()["custom"]
    assert custom["reasoningScopeResolved"] == "current-turn" and "llamaCpp" not in custom
    assert upstream.requests.count(PROPS_READ) == 2
    if mode == "drip":  # left before the body's end: not waited for
        assert upstream.sent < 2 * 1000 / 4
    if mode.startswith("huge"):  # at most what the sockets' buffers took, each time
        assert upstream.sent < HUGE // 4


@pytest.mark.parametrize(
    ("mode", "failure"),
    [
        ("drip", "did not answer GET /props within 1 s"),
        ("huge", "is 209715200 bytes long, more than 1048576"),
        ("huge_chunked", "is longer than 1048576 bytes"),
        ("gzip_bomb", "answered GET /props in gzip, though asked for no content coding"),
        ("nested", None),  # not JSON this bridge reads: as a server without /props
    ],
)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_props_is_bounded_before_it_is_read(
    transport: UpstreamTransport, mode: str, failure: str | None, short_deadline: float
) -> None:
    """Finding 6. README "History sent upstream": ``/props`` is refused by its deadline, its
    ``Content-Length``, the bytes that came, or a content coding it was asked not to use, before
    the work: memory never grows by the body (a 200 MB one took 650 MB, a gzip bomb 1.27 GB),
    and a body nested past recursion's end is no ``RecursionError``."""

    async def read(upstream: HostileUpstream) -> dict[str, Any] | None:
        reader = UpstreamClient(_config(upstream, transport))
        try:
            return await reader.llama_cpp_props(MODEL)
        finally:
            await reader.aclose()

    with hostile_upstream(props=mode) as upstream:
        tracemalloc.start()
        try:
            if failure is None:
                assert asyncio.run(read(upstream)) is None
            else:
                with pytest.raises(BridgeError, match=re.escape(failure)):
                    asyncio.run(read(upstream))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        ("nested_chunk", "bad_upstream_chunk", "the upstream sent a chunk that is not JSON"),
        ("nested_error", "upstream_http_500", "the upstream answered HTTP 500"),
        ("big_json", "bad_upstream_chunk", "is longer than 1048576 bytes"),
    ],
)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_answer_nested_or_too_big_is_the_upstreams_error(
    transport: UpstreamTransport, answer: str, code: str, message: str
) -> None:
    """Finding 6's pattern on the run's own answer. README "Failure behaviour": a malformed
    answer is the upstream's error with its code, not a bug of the bridge's: a chunk or an
    error body nested past recursion's end raised ``RecursionError`` (``internal_error``), and
    a whole JSON answer was read with no bound (now ``--max-line-bytes``, as a line of a
    stream)."""
    with hostile_upstream(answer=answer) as upstream:
        config = _config(upstream, transport, retries=0, max_line_bytes=1024 * 1024)
        with serve(create_app(config)) as bridge:
            frames = post(bridge, _asking("probe"))
    assert frames[-1]["type"] == "RUN_ERROR"
    assert frames[-1]["code"] == code and message in frames[-1]["message"]
