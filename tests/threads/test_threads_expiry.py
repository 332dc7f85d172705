"""Expiry (issue 42, point 1; README "Threads"): a thread idle for ``--thread-ttl`` is gone, in
each store (a real ``redis-server`` for Redis): the hydrate gives an empty thread, ``GET
/threads`` no longer lists it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from threads_tools import (
    body,
    events,
    hydrate_body,
    post_run,
    scripted_bridge,
    store_url,
    wait_until,
)

TTL = 1.5


@pytest.fixture(params=["memory", "file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    redis_url = request.getfixturevalue("redis").url if request.param == "redis" else None
    return store_url(request.param, tmp_path, redis_url)


def test_a_thread_idle_for_its_ttl_is_gone(store: str) -> None:
    def listed() -> list[dict[str, Any]]:
        threads: list[dict[str, Any]] = httpx.get(url + "/threads").json()["threads"]
        return [t for t in threads if t["running"] is None]

    def thread(name: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = events(post_run(url, hydrate_body(name)))[1]["messages"]
        return messages

    with scripted_bridge(store, thread_ttl=TTL) as url:
        post_run(url, body("th-idle", "Hi"))
        wait_until(lambda: [t["id"] for t in listed()] == ["th-idle"], "the run's end kept")
        assert [m["role"] for m in thread("th-idle")] == ["user", "reasoning", "assistant"]
        wait_until(lambda: listed() == [], "the idle thread no longer listed")
        assert thread("th-idle") == []
