"""Who gets in (issue 56, points 3 and 4; README "Threads that survive a reload", "Failure
behaviour"): a run's place among ``--max-concurrent-runs`` is taken before its body is read and
given back however it ends; with threads, a run nobody follows gives its place to one whose
client is there; a hydrate holds a place while it makes its snapshot, and makes it off the
event loop, one at a time, a slice at a time. Real uvicorn servers and sockets; the bridge runs
in this process, so a test can hold a hydrate's work where it happens (a gate)."""

from __future__ import annotations

import asyncio
import http.client
import json
import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any

import httpx
import pytest
from threads_processes import LONG, SHORT, fresh, read_in_background, run_body
from threads_tools import bridge_for, checked, events, hydrate_body, read_some, sse, wait_until

from bridge.config import BridgeConfig
from bridge.serve.http import hydrate as http_hydrate
from bridge.serve.http.app import create_app
from bridge.serve.redact import SLICE, Redactor
from faulty_upstream import FaultyUpstream, faulty_upstream
from servers import serve

PLACES = 20
#: 200 KB of a user's words: a body that takes a moment to arrive.
WORDS = "word " * 40_000


@contextmanager
def bridge(threads: str | None, **overrides: Any) -> Iterator[tuple[str, FaultyUpstream]]:
    with faulty_upstream() as upstream:
        given: dict[str, Any] = {
            "max_concurrent_runs": PLACES,
            "metrics": True,
            "models": (SHORT,),
            **overrides,
        }
        config = BridgeConfig(upstream_url=upstream.url, model=LONG, threads=threads, **given)
        with bridge_for(config) as url:
            yield url, upstream


def _refused(url: str, code: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith("agui_bridge_requests_refused_total{") and f'code="{code}"' in line:
            return float(line.rpartition(" ")[2])
    return 0.0


def _head(url: str, size: int, token: str) -> bytes:
    port = url.rpartition(":")[2]
    return (
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("threads", [None, "memory"], ids=["no-threads", "threads"])
def test_sixty_runs_sent_at_once_against_twenty_places_admit_twenty(threads: str | None) -> None:
    """Sixty runs of 200 KB bodies, each begun (its head and half its body sent) before any
    ends: twenty are admitted, forty refused with 503 ``too_many_runs`` before their bodies
    are read, and the twenty run to their end once their bodies arrive. (Counted after the
    body, all sixty were admitted.)"""
    with bridge(threads) as (url, upstream), ExitStack() as stack:
        sockets: list[socket.socket] = []
        bodies: list[bytes] = []
        for index in range(60):
            body = json.dumps(
                run_body(
                    fresh("th-admit"),
                    model=LONG,
                    messages=[{"id": f"u{index}", "role": "user", "content": WORDS}],
                )
            ).encode()
            made = stack.enter_context(
                socket.create_connection(("127.0.0.1", int(url.rpartition(":")[2])))
            )
            made.sendall(_head(url, len(body), f"token-{index}") + body[: len(body) // 2])
            sockets.append(made)
            bodies.append(body)
        wait_until(lambda: _refused(url, "too_many_runs") == 40, "forty refusals counted")
        readable, _, _ = select.select(sockets, [], [], 0)
        refused = [sockets.index(s) for s in readable]
        assert len(refused) == 40
        for index in refused:
            answer = sockets[index].recv(65536).decode()
            assert answer.startswith("HTTP/1.1 503"), answer[:200]
            assert '"too_many_runs"' in answer and "retry-after: 1" in answer.lower()
        admitted = [i for i in range(60) if i not in refused]
        for index in admitted:
            sockets[index].sendall(bodies[index][len(bodies[index]) // 2 :])
        for index in admitted:
            status, text = _read_response(sockets[index])
            assert status == 200, text[:200]
            assert checked(events(text))[-1]["type"] == "RUN_FINISHED"
        assert len(upstream.requests) == 20
        assert _refused(url, "too_many_runs") == 40


def _read_response(made: socket.socket) -> tuple[int, str]:
    """A response's status and body, read to its end."""
    made.settimeout(120)
    answer = http.client.HTTPResponse(made)
    answer.begin()
    return answer.status, answer.read().decode()


# --- runs nobody follows give way ------------------------------------------------------------


def _leave(url: str, given: dict[str, Any], token: str) -> list[tuple[str | None, Any]]:
    """Post a run, read two frames and leave; the frames read."""
    return read_some(url, given, 2, {"Authorization": f"Bearer {token}"})


@pytest.fixture(params=["memory", "file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """Each store kind's URL (Redis: the module's server)."""
    if request.param == "file":
        return str(tmp_path.as_uri())
    if request.param == "redis":
        return str(request.getfixturevalue("redis").url)
    return "memory"


def test_a_run_nobody_follows_gives_its_place_to_one_whose_client_is_there(store: str) -> None:
    """Four places, four runs left by their clients (a reload, a closed tab), the grace still
    far: the next person is admitted, and the run left the longest ends as it would after its
    grace (its upstream request stopped, ``RUN_FINISHED`` cancelled for whoever comes back,
    its partial answer kept), while the others go on."""
    with bridge(store, max_concurrent_runs=4, run_grace=600) as (url, upstream):
        left = [run_body(fresh("th-left"), model=LONG) for _ in range(4)]
        for index, given in enumerate(left):  # each told apart upstream by its words
            given["messages"][0]["content"] = f"Hi from run {index}"
        taken = [_leave(url, given, f"token-{i}") for i, given in enumerate(left)]
        wait_until(lambda: len(upstream.requests) == 4, "four upstream requests")

        def admitted() -> bool:
            given = run_body(fresh("th-new"), model=SHORT)
            answer = httpx.post(
                url + "/", json=given, headers={"Authorization": "Bearer new"}, timeout=60
            )
            return answer.status_code == 200

        wait_until(admitted, "the new person admitted (the leaves seen)")
        first = httpx.get(
            f"{url}/runs/{left[0]['runId']}/events",
            headers={"Authorization": "Bearer token-0", "Last-Event-ID": str(taken[0][-1][0])},
            timeout=60,
        )
        end = checked([frame for _, frame in [*taken[0], *sse(first.text)]])[-1]
        assert end["type"] == "RUN_FINISHED" and end["outcome"] == {"type": "cancelled"}
        assert end["result"]["reason"] == "abandoned"
        # Its own upstream request (the four may have reached the upstream in any order).
        [its] = [r for r in upstream.requests if "Hi from run 0" in str(r.body.get("messages"))]
        wait_until(lambda: its.peer_closed_at is not None, "its upstream stopped")
        assert not its.finished
        for index in (1, 2, 3):
            owner = {"Authorization": f"Bearer token-{index}"}
            going = httpx.get(f"{url}/threads", headers=owner, timeout=30).json()["threads"]
            assert going[0]["running"] == left[index]["runId"]
        wait_until(lambda: _said(url, left[0]["threadId"], "token-0"), "its partial answer kept")


def _said(url: str, thread: str, token: str) -> bool:
    given = hydrate_body(thread)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = httpx.post(url + "/", json=given, headers=headers, timeout=60)
    messages = events(answer.text)[1]["messages"]
    return any(m["role"] in ("reasoning", "assistant") and m.get("content") for m in messages)


def test_runs_whose_clients_are_there_never_give_way() -> None:
    """Four places, four runs whose clients read them: the next person gets 503
    ``too_many_runs``, and no run was cancelled for it."""
    with bridge("memory", max_concurrent_runs=4, run_grace=600) as (url, upstream):
        readers = [
            read_in_background(
                "POST", url + "/", json=run_body(fresh("th-read"), model=LONG),
                headers={"Authorization": f"Bearer reader-{i}"},
            )
            for i in range(4)
        ]  # fmt: skip
        wait_until(lambda: len(upstream.requests) == 4, "four upstream requests")
        refused = httpx.post(url + "/", json=run_body(fresh("th-new"), model=SHORT), timeout=60)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "too_many_runs"
        for reading in readers:
            assert reading.done.wait(120) and reading.status == 200
            end = checked(events(reading.text))[-1]
            assert end["type"] == "RUN_FINISHED" and end.get("outcome") != {"type": "cancelled"}


# --- hydrates are work ------------------------------------------------------------------------


class Held:
    """Holds each hydrate's work (the snapshot's making, ``_hydrated``) until let go; notes
    whether it ran on the event loop's thread and how many ran at once."""

    def __init__(self, work: Callable[..., Any]) -> None:
        self._work = work
        self.entered = threading.Event()
        self.go = threading.Event()
        self.on_loop: list[bool] = []
        self.running = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.on_loop.append(_on_event_loop())
        self.entered.set()
        self.go.wait(60)
        try:
            return self._work(*args)
        finally:
            with self._lock:
                self.running -= 1


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextmanager
def kept_thread(store: str = "memory", **overrides: Any) -> Iterator[tuple[str, Any, str]]:
    """A bridge keeping threads in ``store`` (its app, to count its places) with one thread."""
    with faulty_upstream() as upstream:
        config = BridgeConfig(upstream_url=upstream.url, model=SHORT, threads=store, **overrides)
        app = create_app(config)
        with serve(app) as url:
            thread = fresh("th-kept")
            done = httpx.post(url + "/", json=run_body(thread, model=SHORT), timeout=60)
            assert done.status_code == 200
            wait_until(lambda: _said(url, thread, ""), "the thread kept")
            yield url, app, thread


def test_a_hydrate_holds_a_place_while_it_makes_its_snapshot_off_the_loop(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One place: while a hydrate makes its snapshot (held, in a worker thread), a run is
    refused with 503 ``too_many_runs`` and ``/health`` answers; once sent, the place is back."""
    with kept_thread(store, max_concurrent_runs=1) as (url, app, thread):
        held = Held(http_hydrate._hydrated)
        monkeypatch.setattr(http_hydrate, "_hydrated", held)
        hydrate = read_in_background("POST", url + "/", json=hydrate_body(thread))
        assert held.entered.wait(60)
        refused = httpx.post(url + "/", json=run_body(fresh("th-other"), model=SHORT), timeout=60)
        health = httpx.get(f"{url}/health", timeout=60)
        held.go.set()
        assert hydrate.done.wait(60) and hydrate.status == 200
        wait_until(lambda: app.state.bridge.active_runs == 0, "the hydrate's place given back")
        after = httpx.post(url + "/", json=run_body(fresh("th-other"), model=SHORT), timeout=60)
    assert (refused.status_code, refused.json()["error"]["code"]) == (503, "too_many_runs")
    assert health.status_code == 200
    assert held.on_loop == [False]
    assert [f["type"] for f in events(hydrate.text)][1] == "MESSAGES_SNAPSHOT"
    assert after.status_code == 200


def test_hydrates_make_their_snapshots_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three hydrates at once: their work runs one after another in a worker thread (many at
    once wanted the GIL together, and the event loop waited for them all), and each answers
    the whole thread."""
    with kept_thread() as (url, app, thread):
        held = Held(http_hydrate._hydrated)
        monkeypatch.setattr(http_hydrate, "_hydrated", held)
        hydrates = [
            read_in_background("POST", url + "/", json=hydrate_body(thread)) for _ in range(3)
        ]
        wait_until(lambda: app.state.bridge.active_runs == 3, "three hydrates under way")
        assert held.entered.wait(60)
        held.go.set()
        for hydrate in hydrates:
            assert hydrate.done.wait(60) and hydrate.status == 200
            messages = events(hydrate.text)[1]["messages"]
            assert [m["role"] for m in messages] == ["user", "reasoning", "assistant", "tool"][
                : len(messages)
            ]
    assert held.most == 1 and held.on_loop == [False, False, False]


def test_a_big_threads_snapshot_is_redacted_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A thread of 3 MB (one user message) kept in a folder two bridges share: a hydrate at
    the other bridge scans it for the secrets a slice at a time (one scan of it whole held
    the GIL, and with it the event loop, for tens of milliseconds); the bridge that saved
    it, redacted, sends the very JSON it saved with no scan again. Each answers it whole."""
    scanned: list[int] = []
    for name in ("redact", "split_held"):
        original = getattr(Redactor, name)

        def spy(self: Redactor, text: str, original: Any = original) -> Any:
            scanned.append(len(text))
            return original(self, text)

        monkeypatch.setattr(Redactor, name, spy)
    words = "many words " * 300_000
    key, store = "sk-proj-Wq3Zr8Tn5Vb2Xc7Lm4Kd", tmp_path.as_uri()
    with kept_thread(store, api_key=key, max_body_bytes=8 << 20) as (url, _, _):
        thread = fresh("th-big")
        given = run_body(
            thread, model=SHORT, messages=[{"id": "big", "role": "user", "content": words}]
        )
        assert httpx.post(url + "/", json=given, timeout=60).status_code == 200
        wait_until(lambda: _said(url, thread, ""), "the big thread kept")
        scanned.clear()
        here = httpx.post(url + "/", json=hydrate_body(thread), timeout=60)
        scanned_here = [size for size in scanned if size > 1000]
        config = BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model=SHORT, threads=store)
        with bridge_for(replace(config, api_key=key)) as other:
            scanned.clear()
            there = httpx.post(other + "/", json=hydrate_body(thread), timeout=60)
    assert events(here.text)[1]["messages"][0]["content"] == words
    assert events(there.text)[1]["messages"][0]["content"] == words
    assert scanned_here == []
    assert scanned and max(scanned) <= 2 * SLICE and sum(scanned) >= len(words)
