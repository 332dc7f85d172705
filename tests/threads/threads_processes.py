"""Bridges keeping threads in processes of their own (issue 56): one process with its memory
store, or three sharing a store (a real ``redis-server``, or a folder), in front of the faulty
upstream. Each process listens on its own port, so a test sends each request to the process it
names (``urls[0]``, ``urls[1]``, ``urls[2]``: the same one thrice for one process). Callers are
told apart by their bearer tokens (no ``--auth-token``: each token is an owner)."""

from __future__ import annotations

import json
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_load_balancer import Replica, started
from threads_tools import sse

from faulty_upstream import FaultyUpstream, fault_model, faulty_upstream

#: How the processes keep threads: one process (memory), three sharing Redis or a folder.
TOPOLOGIES = ["one", "redis", "file"]
#: A run of about six seconds: long enough to leave it and come back while it goes on.
LONG = fault_model("ok", n=200, delay=0.03)
#: A run of a moment.
SHORT = fault_model("ok", n=6)

ALICE = {"Authorization": "Bearer alice-Hq3Vt8Lz"}
BOB = {"Authorization": "Bearer bob-Wd6Rk2Np"}

Frame = tuple[str | None, dict[str, Any]]


@dataclass
class Processes:
    """The bridges of one topology and their upstream."""

    kind: str
    urls: list[str]
    upstream: FaultyUpstream
    made: list[Replica]

    def log(self, event: str) -> list[dict[str, Any]]:
        """Every process's JSON log lines whose message or event holds ``event``."""
        lines = [json.loads(s) for r in self.made for s in list(r.stderr) if s.startswith("{")]
        return [line for line in lines if event in str(line.get("message", line.get("event")))]


@contextmanager
def processes(
    kind: str, folder: Path, redis_url: str | None, *flags: str, models: str = LONG
) -> Iterator[Processes]:
    """``kind``'s bridges (``TOPOLOGIES``), each given ``flags``."""
    if kind == "one":
        store, count = "memory", 1
    elif kind == "redis":
        assert redis_url is not None
        store, count = redis_url, 3
    else:
        (folder / "threads").mkdir(parents=True, exist_ok=True)
        store, count = (folder / "threads").as_uri(), 3
    with faulty_upstream() as upstream:
        command = [
            sys.executable, "-m", "bridge", "serve", "--upstream-url", upstream.url,
            "--model", SHORT, "--models", models, "--port", "0", "--log-format", "json",
            "--threads", store, *flags,
        ]  # fmt: skip
        with started([command] * count, {}) as made:
            urls = [f"http://{replica.address}/agent" for replica in made]
            yield Processes(kind, urls * (3 // count), upstream, made)


@contextmanager
def topology(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    *flags: str,
    models: str = LONG,
) -> Iterator[Processes]:
    """The bridges of the topology a fixture parametrized by ``TOPOLOGIES`` is asked for (its
    folder made, its Redis the module's), each given ``flags``."""
    kind = request.param
    folder = tmp_path_factory.mktemp(f"{request.module.__name__}-{kind}")
    redis_url = request.getfixturevalue("redis").url if kind == "redis" else None
    with processes(kind, folder, redis_url, *flags, models=models) as made:
        yield made


def run_body(
    thread: str, run: str | None = None, model: str = LONG, **extra: Any
) -> dict[str, Any]:
    """A run's input as ``@ag-ui/client`` 1.0 sends it."""
    run = run or f"run-{uuid.uuid4().hex[:8]}"
    return {
        "protocolVersion": "1.0",
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user", "content": "Hi"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {"model": model},
        **extra,
    }


def fresh(name: str) -> str:
    """An id no other test (nor another topology's run of this one) uses."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def leave_after(
    url: str, given: dict[str, Any], count: int, headers: dict[str, str]
) -> list[Frame]:
    """Post a run, read ``count`` frames and leave (the connection closed, as a reload does)."""
    taken: list[Frame] = []
    with httpx.stream("POST", url + "/", json=given, headers=headers, timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        text = ""
        for piece in answer.iter_text():
            text += piece
            blocks = text.split("\n\n")
            text = blocks.pop()
            taken.extend(sse("".join(f"{b}\n\n" for b in blocks if not b.startswith(":"))))
            if len(taken) >= count:
                return taken
    raise AssertionError(f"the run ended after {len(taken)} frames")


def follow(
    url: str, run_id: str, headers: dict[str, str], last: str | None = None
) -> httpx.Response:
    sent = dict(headers)
    if last is not None:
        sent["Last-Event-ID"] = last
    return httpx.get(f"{url}/runs/{_path(run_id)}/events", headers=sent, timeout=60)


def cancel(url: str, run_id: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{url}/runs/{_path(run_id)}/cancel", headers=headers, timeout=30)


def listed(url: str, headers: dict[str, str]) -> dict[str, str | None]:
    """The caller's threads: id → the run going on in it."""
    answer = httpx.get(f"{url}/threads", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return {t["id"]: t["running"] for t in answer.json()["threads"]}


def hydrated(url: str, thread: str, headers: dict[str, str]) -> list[Frame]:
    given = run_body(thread, messages=[])
    answer = httpx.post(url + "/", json=given, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return sse(answer.text)


def _path(run_id: str) -> str:
    from urllib.parse import quote

    return quote(run_id, safe="")


@dataclass
class Reading:
    """A response read to its end in a thread of its own."""

    status: int = 0
    text: str = ""
    done: threading.Event = field(default_factory=threading.Event)

    def frames(self) -> list[Frame]:
        return sse(self.text)


def read_in_background(method: str, url: str, **kwargs: Any) -> Reading:
    reading = Reading()

    def read() -> None:
        try:
            with httpx.stream(method, url, timeout=120, **kwargs) as answer:
                reading.status = answer.status_code
                reading.text = answer.read().decode()
        finally:
            reading.done.set()

    threading.Thread(target=read, daemon=True).start()
    return reading
