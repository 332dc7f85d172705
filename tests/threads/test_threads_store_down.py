"""The thread store down (issue 42, point 6; README "Threads"): threads are a convenience, so a
Redis that stops mid-run costs the thread, never the run; ``/health`` says ``degraded`` with
``thread_store: "unavailable"``; what needs the store (a hydrate, a reconnect to a run this
process does not hold, the list) is a 503 ``thread_store_unavailable``; and when Redis is back
(on the same port, empty) threads work again. A real ``redis-server``, stopped and started by
the test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from threads_tools import (
    body,
    bridge_for,
    checked,
    events,
    hydrate_body,
    numbers,
    post_run,
    sse,
    wait_until,
)

from bridge.config import BridgeConfig
from faulty_upstream import TEXT, fault_model, faulty_upstream
from redis_server import RedisServer

#: About three seconds of text, long enough to stop Redis in the middle.
N = 100
MEDIUM = fault_model("ok", n=N, delay=0.03)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path) as server:
        yield server


def _said(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")


#: What the faulty upstream says in ``N`` text tokens.
WHOLE = "".join((TEXT * (N // len(TEXT) + 1))[:N])


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "thread_store_unavailable"
    assert "cannot be reached" in answer.json()["error"]["message"]


def test_redis_stopped_mid_run_costs_the_thread_not_the_run(redis: RedisServer) -> None:
    with faulty_upstream() as upstream:
        config = BridgeConfig(upstream_url=upstream.url, model=MEDIUM, threads=redis.url)
        with bridge_for(config) as url:
            assert httpx.get(url + "/health").json() == {"status": "ok"}
            got: list[str] = []
            reader = threading.Thread(target=lambda: got.append(post_run(url, body("th-down"))))
            reader.start()
            wait_until(lambda: upstream.requests and upstream.requests[0].chunks_sent > 20, "text")
            redis.stop()
            reader.join(60)
            # The run went on to its end, every token of it.
            frames = checked(events(got[0]))
            assert frames[-1]["type"] == "RUN_FINISHED"
            assert _said(frames) == WHOLE

            assert httpx.get(url + "/health").json() == {
                "status": "degraded",
                "thread_store": "unavailable",
            }
            _refused(httpx.post(url + "/", json=hydrate_body("th-down"), timeout=30))
            _refused(httpx.get(url + "/runs/run-elsewhere/events", timeout=30))
            _refused(httpx.get(url + "/threads", timeout=30))
            # A new run runs, unkept.
            again = checked(events(post_run(url, body("th-down-2"))))
            assert _said(again) == WHOLE

            redis.start()  # back, empty
            wait_until(lambda: httpx.get(url + "/health").json() == {"status": "ok"}, "health")
            kept = checked(events(post_run(url, body("th-back"))))
            wait_until(lambda: _running(url, "th-back") is None, "the run's end kept")
            thread = events(post_run(url, hydrate_body("th-back")))[1]["messages"]
    assert [m["role"] for m in thread] == ["user", "reasoning", "assistant"]
    assert thread[2]["content"] == _said(kept)


def _running(url: str, thread: str) -> str | None:
    listed = httpx.get(url + "/threads", timeout=10).json()["threads"]
    found = [t for t in listed if t["id"] == thread]
    return found[0]["running"] if found else "(not kept yet)"


def test_a_follower_on_another_process_is_told_when_the_store_goes(redis: RedisServer) -> None:
    """Its run goes on where it runs; the follower, which reads it from the store, ends with
    RUN_ERROR ``thread_store_unavailable`` (no id: not one of the run's frames, so a later
    ``Last-Event-ID`` resumes from the run's last), not a stream cut short."""
    with faulty_upstream() as upstream:
        config = BridgeConfig(upstream_url=upstream.url, model=MEDIUM, threads=redis.url)
        with bridge_for(config) as first, bridge_for(config) as other:
            given = body("th-follower")
            got: list[str] = []
            runner = threading.Thread(target=lambda: got.append(post_run(first, given)))
            runner.start()
            wait_until(lambda: upstream.requests and upstream.requests[0].chunks_sent > 5, "text")
            followed: list[str] = []
            url = f"{other}/runs/{given['runId']}/events"
            follower = threading.Thread(
                target=lambda: followed.append(httpx.get(url, timeout=60).text)
            )
            follower.start()
            wait_until(lambda: upstream.requests[0].chunks_sent > 30, "more text")
            redis.stop()
            follower.join(60)
            runner.join(60)
    assert _said(checked(events(got[0]))) == WHOLE
    frames = sse(followed[0])
    assert numbers(frames) == list(range(1, len(frames)))
    last_id, last = frames[-1]
    assert last_id is None
    assert last["type"] == "RUN_ERROR" and last["code"] == "thread_store_unavailable"
    checked([frame for _, frame in frames])


@pytest.mark.parametrize("kind", ["file", "redis"])
def test_a_follower_of_a_run_whose_process_died_is_told_so(
    kind: str, redis: RedisServer, tmp_path: Path
) -> None:
    """A run begun by a process that then died (begun in the store, never written again): a
    client that comes back for it from another process waits --run-timeout (1 s here) for
    anything new, then ends with RUN_ERROR ``run_lost``, not a stream with no terminal event."""
    import anyio

    from bridge.serve.threads.owner import Owners
    from bridge.serve.threads.store import RunKey
    from bridge.serve.threads.stores import thread_store

    url = redis.url if kind == "redis" else tmp_path.as_uri()
    with faulty_upstream() as upstream:
        config = BridgeConfig(
            upstream_url=upstream.url,
            model=MEDIUM,
            threads=url,
            run_timeout=1.0,
            keepalive_interval=0.2,
        )
        with bridge_for(config) as other:
            # The owner every caller is without a token: what the dead process kept it under.
            owner = Owners().of(httpx.Request("GET", other))  # type: ignore[arg-type]

            async def begun() -> None:
                kept = thread_store(url, ttl=600)
                dead = RunKey(owner, "run-of-the-dead")
                await kept.run_begin(dead, "th-dead", "dead-process")
                await kept.aclose()

            anyio.run(begun)
            answer = httpx.get(f"{other}/runs/run-of-the-dead/events", timeout=60)
    assert answer.status_code == 200, answer.text
    [(ident, last)] = sse(answer.text)
    assert ident is None
    assert (last["type"], last["code"]) == ("RUN_ERROR", "run_lost")
    assert "--run-timeout" in last["message"]
