"""Threads across replicas (issue 42, point 6; README "Threads"): two ``agui-bridge serve``
processes with one Redis (``--threads redis://…``, one secret, one token) behind Debian's nginx
running ``examples/deploy/nginx.conf``, round robin, no sticky sessions. A run started at one
replica is followed from the other after its client left (``Last-Event-ID``, and a hydrate),
every event exactly once, to its end; a cancel sent to the other stops its upstream request; the
thread reads the same from both. nginx's ``X-Replica`` header says which replica answered each
request, and each request is steered to the replica the test needs (round robin alternates)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from test_load_balancer import AUTHORIZATION, ENVIRONMENT, Replica, started
from threads_tools import checked, hydrate_body, numbers, sse, wait_until

from bridge.serve.threads.owner import bearer_owner
from bridge.serve.threads.store import RunKey
from faulty_upstream import FaultyUpstream, fault_model, faulty_upstream
from nginx_server import Nginx, nginx, require_nginx
from redis_server import RedisServer

#: A run of about four seconds: long enough to leave it and follow it from the other replica.
MEDIUM = fault_model("ok", n=120, delay=0.03)
#: A run of twenty seconds, to be cancelled.
SLOW = fault_model("ok", n=400, delay=0.05)


class Balanced:
    """nginx in front of two replicas sharing one Redis, and the faulty upstream behind them."""

    def __init__(
        self, balancer: Nginx, made: list[Replica], upstream: FaultyUpstream, redis_url: str
    ) -> None:
        self.url = f"{balancer.url}/agent"
        self.made = made
        self.upstream = upstream
        self.redis_url = redis_url

    def other(self, address: str) -> str:
        [other] = [r.address for r in self.made if r.address != address]
        return other

    def steer_to(self, address: str) -> None:
        """Probe ``/health`` until a probe lands on the other replica: round robin sends the
        next request to ``address``."""
        for _ in range(4):
            answered = httpx.get(f"{self.url}/health", timeout=10).headers["x-replica"]
            if answered != address:
                return
        raise AssertionError(f"nginx never answered from {self.other(address)}")

    def lines(self, event: str) -> list[tuple[str, dict[str, Any]]]:
        """Each replica's JSON log lines of ``event`` (``run``, ``thread_reconnect``, …)."""
        return [
            (replica.address, line)
            for replica in self.made
            for line in map(json.loads, [s for s in replica.stderr if s.startswith("{")])
            if line.get("event") == event
        ]


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balanced]:
    require_nginx()
    folder = tmp_path_factory.mktemp("replicas")
    with ExitStack() as stack:
        redis = RedisServer(folder)
        redis.start()
        stack.callback(redis.stop)
        upstream = stack.enter_context(faulty_upstream())
        command = [
            sys.executable, "-m", "bridge", "serve", "--upstream-url", upstream.url,
            "--model", MEDIUM, "--models", SLOW, "--port", "0", "--log-format", "json",
            "--threads", redis.url,
        ]  # fmt: skip
        made = stack.enter_context(started([command] * 2, ENVIRONMENT))
        balancer = stack.enter_context(nginx(folder / "nginx", [r.address for r in made]))
        yield Balanced(balancer, made, upstream, redis.url)


def _leave_after(url: str, given: dict[str, Any], count: int) -> tuple[str, list[Any]]:
    """Start a run, read ``count`` frames and leave (a reload); the replica that ran it."""
    taken: list[tuple[str | None, dict[str, Any]]] = []
    with httpx.stream("POST", url + "/", json=given, headers=AUTHORIZATION, timeout=30) as r:
        assert r.status_code == 200, r.read()
        text = ""
        for piece in r.iter_text():
            text += piece
            blocks = text.split("\n\n")
            text = blocks.pop()
            taken.extend(sse("".join(f"{b}\n\n" for b in blocks if not b.startswith(":"))))
            if len(taken) >= count:
                return r.headers["x-replica"], taken
    raise AssertionError(f"the run ended after {len(taken)} frames")


def _run_input(thread: str, run: str, **extra: Any) -> dict[str, Any]:
    return {
        "protocolVersion": "1.0",
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": "Weather in Paris?"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **extra,
    }


def _texts(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_run_left_at_one_replica_is_followed_from_the_other_exactly_once(
    balanced: Balanced,
) -> None:
    given = _run_input("th-replicas", "run-replicas")
    first, before = _leave_after(balanced.url, given, 12)
    other = balanced.other(first)
    last_id = before[-1][0]

    # The reconnect and the hydrate land on the other replica while the run goes on there.
    followed: dict[str, Any] = {}

    def reconnect() -> None:
        headers = {**AUTHORIZATION, "Last-Event-ID": last_id}
        url = f"{balanced.url}/runs/{given['runId']}/events"
        with httpx.stream("GET", url, headers=headers, timeout=60) as r:
            followed["replica"], followed["status"] = r.headers["x-replica"], r.status_code
            followed["body"] = r.read().decode()

    balanced.steer_to(other)
    reader = threading.Thread(target=reconnect)
    reader.start()
    wait_until(lambda: "replica" in followed, "the reconnect's answer began")
    balanced.steer_to(other)
    hydrated = httpx.post(
        balanced.url + "/", json=hydrate_body("th-replicas"), headers=AUTHORIZATION, timeout=60
    )
    reader.join(60)

    assert (followed["replica"], followed["status"]) == (other, 200)
    assert (hydrated.headers["x-replica"], hydrated.status_code) == (other, 200)
    whole = [*before, *sse(followed["body"])]
    assert numbers(whole) == list(range(1, len(whole) + 1))
    frames = checked([frame for _, frame in whole])
    assert frames[-1]["type"] == "RUN_FINISHED"
    kinds = [frame["type"] for frame in frames]

    # The hydrate: the run from its start, the thread before it (frames with no id) after
    # RUN_STARTED.
    shown = sse(hydrated.text)
    snapshot = [frame for ident, frame in shown if ident is None]
    assert [f["type"] for f in snapshot] == ["MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert shown[1][1]["messages"] == given["messages"]
    run_frames = [(ident, frame) for ident, frame in shown if ident is not None]
    assert numbers(run_frames) == list(range(1, len(whole) + 1))
    assert [frame["type"] for _, frame in run_frames] == kinds
    checked([frame for _, frame in shown])
    assert _texts([f for _, f in run_frames]) == _texts(frames)

    # One replica ran it (one upstream request); the other only followed it. Its run line is
    # written as the run ends there, which may be a moment after its followers got its end.
    def ran() -> list[str]:
        return [a for a, line in balanced.lines("run") if line["run"] == given["runId"]]

    wait_until(ran, "the run's line")
    assert ran() == [first]
    assert len(balanced.upstream.requests_for(MEDIUM)) == 1

    # Once ended, the thread reads the same from both replicas.
    def thread_at(address: str) -> list[dict[str, Any]]:
        balanced.steer_to(address)
        answer = httpx.post(
            balanced.url + "/", json=hydrate_body("th-replicas"), headers=AUTHORIZATION
        )
        assert answer.headers["x-replica"] == address
        messages: list[dict[str, Any]] = sse(answer.text)[1][1]["messages"]
        return messages

    wait_until(lambda: _listed(balanced, "th-replicas") is None, "the run's end kept")
    at_first, at_other = thread_at(first), thread_at(other)
    assert at_first == at_other
    assert [m["role"] for m in at_first] == ["user", "reasoning", "assistant"]
    assert at_first[2]["content"] == _texts(frames)


def test_a_run_goes_to_redis_as_it_goes_only_once_a_follower_elsewhere_asks(
    balanced: Balanced,
) -> None:
    """A run nobody on another replica follows writes none of its events to Redis while it
    goes (its begin entry only; all of them at its end); a reconnect on the other replica asks
    for it, and from then on its events reach Redis, and that follower, while it goes."""
    from redis import Redis

    given = _run_input("th-wanted", "run-wanted")
    token = AUTHORIZATION["Authorization"].partition(" ")[2]
    run = RunKey(bearer_owner(token), given["runId"]).name
    admin = Redis.from_url(balanced.redis_url)
    try:

        def stream_then_ended() -> tuple[int, bytes | None]:
            # In this order: the end's entry is added before the run is marked ended, so a
            # run not yet marked had not added it when the stream was read.
            length = admin.xlen(f"agui-bridge:events:{run}")
            return length, admin.hget(f"agui-bridge:run:{run}", "ended")

        first, before = _leave_after(balanced.url, given, 12)
        assert stream_then_ended() == (1, b"0")  # 12 frames sent; none in Redis

        balanced.steer_to(balanced.other(first))
        headers = {**AUTHORIZATION, "Last-Event-ID": before[-1][0]}
        url = f"{balanced.url}/runs/{given['runId']}/events"
        with httpx.stream("GET", url, headers=headers, timeout=60) as answer:
            assert answer.headers["x-replica"] == balanced.other(first)
            text, shared = "", None
            for piece in answer.iter_text():
                text += piece
                if shared is None and sse(text[: text.rfind("\n\n") + 2]):
                    shared = stream_then_ended()  # as the first frame followed came
        assert shared is not None and shared[0] > 1 and shared[1] == b"0"  # shared as it goes
        whole = [*before, *sse(text)]
        assert numbers(whole) == list(range(1, len(whole) + 1))
        assert checked([frame for _, frame in whole])[-1]["type"] == "RUN_FINISHED"
    finally:
        admin.close()


def _listed(balanced: Balanced, thread: str) -> str | None:
    threads = httpx.get(f"{balanced.url}/threads", headers=AUTHORIZATION).json()["threads"]
    [found] = [t for t in threads if t["id"] == thread]
    running: str | None = found["running"]
    return running


def test_a_cancel_sent_to_the_other_replica_stops_the_run(balanced: Balanced) -> None:
    given = _run_input("th-cancel-replicas", "run-cancel-replicas", forwardedProps={"model": SLOW})
    first, _ = _leave_after(balanced.url, given, 8)
    wait_until(lambda: balanced.upstream.requests_for(SLOW), "the upstream request")
    [request] = balanced.upstream.requests_for(SLOW)

    balanced.steer_to(balanced.other(first))
    asked = httpx.post(
        f"{balanced.url}/runs/{given['runId']}/cancel", headers=AUTHORIZATION, timeout=10
    )
    assert asked.status_code == 202, asked.text
    assert asked.headers["x-replica"] == balanced.other(first)

    wait_until(lambda: request.peer_closed_at is not None, "the upstream request stopped")
    assert not request.finished
    wait_until(lambda: _listed(balanced, "th-cancel-replicas") is None, "the run's end kept")
    balanced.steer_to(balanced.other(first))
    after = httpx.get(
        f"{balanced.url}/runs/{given['runId']}/events", headers=AUTHORIZATION, timeout=30
    )
    frames = checked([frame for _, frame in sse(after.text)])
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert frames[-1]["outcome"] == {"type": "cancelled"}
