"""Threads under ``agui-bridge serve --workers 2`` (issue 42, point 6; README "Threads"): with a
store the workers share (``file:///DIR``, ``redis://…``) a run left at one worker is followed
from the other (``Last-Event-ID``, and a hydrate), every event exactly once; ``--threads memory``
is refused at start with one line naming the fix. Real processes on one port: the kernel gives
each connection to a worker, and the log lines (their ``pid``) say which one answered."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_load_balancer import AUTHORIZATION, ENVIRONMENT, Replica, started
from threads_tools import checked, follow, hydrate_body, numbers, read_some, sse, wait_until

from faulty_upstream import fault_model, faulty_upstream
from redis_server import RedisServer

#: A run of a second and a half: left, then followed from the other worker while it goes on.
MEDIUM = fault_model("ok", n=50, delay=0.03)
#: Runs until one was followed from another worker than its own (one in two, about).
ATTEMPTS = 16


@pytest.fixture(params=["file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "file":
        yield tmp_path.as_uri()
        return
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        yield redis.url
    finally:
        redis.stop()


def _command(upstream: str, *flags: str) -> list[str]:
    return [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", upstream, "--model", MEDIUM,
        "--port", "0", "--log-format", "json", "--workers", "2", *flags,
    ]  # fmt: skip


def _pids(made: Replica, event: str, run_id: str) -> list[int]:
    """The workers that logged ``event`` for the run."""
    lines = [json.loads(line) for line in made.stderr if line.startswith("{")]
    return [
        line["pid"]
        for line in lines
        if line.get("event") == event and run_id in (line.get("run"), line.get("run_id"))
    ]


def _texts(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_run_is_followed_from_another_worker_exactly_once(store: str) -> None:
    crossed = {"reconnect": False, "hydrate": False}
    with (
        faulty_upstream() as upstream,
        started([_command(upstream.url, "--threads", store)], ENVIRONMENT) as [made],
    ):
        url = f"http://{made.address}/agent"
        for attempt in range(ATTEMPTS):
            given = _attempt(url, attempt)
            ran = _wait_pids(made, "run", given["runId"])
            crossed["reconnect"] |= _pids(made, "thread_reconnect", given["runId"]) != ran
            crossed["hydrate"] |= _pids(made, "thread_hydrate", given["runId"]) != ran
            if all(crossed.values()):
                break
    assert crossed == {"reconnect": True, "hydrate": True}


def _attempt(url: str, attempt: int) -> dict[str, Any]:
    """A run left after a few frames, followed again at once by a reconnect and a hydrate
    (each on a connection of its own): both give every event after their last, once."""
    thread = f"th-workers-{attempt}"
    given = {**hydrate_body(thread), "messages": [{"id": "u", "role": "user", "content": "Hi"}]}
    before = read_some(url, given, 6, AUTHORIZATION)
    hydrated: list[httpx.Response] = []
    hydrate = threading.Thread(
        target=lambda: hydrated.append(
            httpx.post(url + "/", json=hydrate_body(thread), headers=AUTHORIZATION, timeout=60)
        )
    )
    hydrate.start()
    again = follow(url, given["runId"], before[-1][0], AUTHORIZATION)
    hydrate.join(60)
    assert again.status_code == 200, again.text
    whole = [*before, *sse(again.text)]
    assert numbers(whole) == list(range(1, len(whole) + 1))
    frames = checked([frame for _, frame in whole])
    assert frames[-1]["type"] == "RUN_FINISHED"
    [shown] = hydrated
    assert shown.status_code == 200, shown.text
    run_frames = [(ident, frame) for ident, frame in sse(shown.text) if ident is not None]
    assert numbers(run_frames) == list(range(1, len(whole) + 1))
    assert _texts(checked([frame for _, frame in run_frames])) == _texts(frames)
    return given


def _wait_pids(made: Replica, event: str, run_id: str) -> list[int]:
    """The worker that ran the run, once its run line is out (it follows the run's end)."""
    wait_until(lambda: _pids(made, event, run_id), f"the run line of {run_id}")
    return _pids(made, event, run_id)


def test_workers_with_threads_in_memory_are_refused_at_start_naming_the_fix() -> None:
    done = subprocess.run(
        _command("http://127.0.0.1:9/v1", "--threads", "memory"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("agui-bridge: --threads memory keeps each worker's threads")
    assert "file:///FOLDER" in line and "redis://" in line
