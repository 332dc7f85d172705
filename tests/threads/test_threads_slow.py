"""One slow reader holds only itself (issue 56, point 6): a follower of a run that stops
reading while another follows is cut once it falls ``FOLLOW_WINDOW`` frames behind (its stream
ends with ``agui_bridge.follower_cut``, no terminal event); the run and the other follower go
on to the run's end, and the one cut catches up with ``Last-Event-ID``, so no frame is lost or
given twice. A follower alone still slows its run, as without threads.

Real bridges (one process with its memory store, three sharing Redis or a folder) in front of
the faulty upstream; the stalled reader is a raw socket with a small receive buffer that reads
nothing until the test says so, on the process that runs the run."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from threads_processes import (
    ALICE,
    TOPOLOGIES,
    Frame,
    Processes,
    fresh,
    processes,
    read_in_background,
    run_body,
    topology,
)
from threads_tools import sse, wait_until

from faulty_upstream import fault_model

#: A run of about 4,000 frames of 2 KB (some 8 MB), written as fast as the bridge takes them.
FAST = fault_model("ok", n=4000, width=2000)
#: A run of about 3,000 frames of 2 KB (some 6 MB) over some seconds: a follower comes while it
#: goes on, and a stalled one falls past the window (far more than the 3 MB or so that the
#: kernel holds for a socket on loopback that nobody reads).
PACED = fault_model("ok", n=3000, delay=0.002, width=2000)
#: What a run that waited for its stalled follower to the end would hit.
TIMEOUT = "20"


@pytest.fixture(scope="module", params=TOPOLOGIES)
def bridges(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Processes]:
    with topology(
        request, tmp_path_factory, "--run-timeout", TIMEOUT, models=f"{FAST},{PACED}"
    ) as made:
        yield made


class Stalled:
    """A follower that sends its request and reads nothing until ``read``: its socket's
    receive buffer is small, so the bridge's writes to it soon wait."""

    def __init__(self, url: str, path: str, headers: dict[str, str], body: bytes = b"") -> None:
        host, _, port = url.removeprefix("http://").partition("/")[0].partition(":")
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect((host, int(port)))
        method = "POST" if body else "GET"
        head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        if body:
            head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def read(self) -> list[Frame]:
        """Everything the bridge sent, to the stream's end."""
        answer = http.client.HTTPResponse(self.sock)
        answer.begin()
        assert answer.status == 200, answer.status
        text = answer.read().decode()
        self.sock.close()
        return sse(text)


def _frames_of(frames: list[Frame]) -> dict[int, dict[str, Any]]:
    """The numbered frames, by number (each at most once)."""
    numbered: dict[int, dict[str, Any]] = {}
    for ident, data in frames:
        if ident is None:
            continue
        number = int(ident.rpartition(":")[2])
        assert number not in numbered, f"frame {number} given twice"
        numbered[number] = data
    return numbered


def _caught_up(url: str, run_id: str, had: list[Frame]) -> list[Frame]:
    """What a client cut gets when it follows again from the last frame it had."""
    last = [ident for ident, _ in had if ident is not None][-1]
    answer = httpx.get(
        f"{url}/runs/{run_id}/events", headers={**ALICE, "Last-Event-ID": last}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    return sse(answer.text)


def _whole(frames: list[Frame]) -> None:
    """Every frame of the run from 1 to its end, once, ending with RUN_FINISHED."""
    numbered = _frames_of(frames)
    assert sorted(numbered) == list(range(1, len(numbered) + 1))
    assert numbered[len(numbered)]["type"] == "RUN_FINISHED"


def _cut(frames: list[Frame]) -> bool:
    return any(
        ident is None and data.get("name") == "agui_bridge.follower_cut" for ident, data in frames
    )


def test_a_stalled_second_follower_is_cut_and_the_run_goes_on(bridges: Processes) -> None:
    thread, run_id = fresh("slow"), fresh("run")
    url = bridges.urls[0]  # the process that runs the run
    reader = read_in_background(
        "POST", url + "/", json=run_body(thread, run_id, PACED), headers=ALICE
    )
    wait_until(lambda: reader.status == 200, "the run started")
    stalled = Stalled(url, f"/agent/runs/{run_id}/events", ALICE)
    assert reader.done.wait(60), "the run did not end"
    told = reader.frames()
    _whole(told)
    assert told[-1][1]["type"] == "RUN_FINISHED"  # not RUN_ERROR run_timeout
    had = stalled.read()
    assert _cut(had) and all(data["type"] != "RUN_FINISHED" for _, data in had)
    rest = _caught_up(bridges.urls[1], run_id, had)
    _whole(had + rest)  # nothing lost, nothing twice
    assert len(_frames_of(had + rest)) == len(_frames_of(told))


def test_a_stalled_client_of_the_run_is_cut_when_another_follows(bridges: Processes) -> None:
    """The client that posted the run stops reading (the run waits for it, as without threads);
    another follower comes: the run goes on to its end for it, and the stalled one is cut."""
    thread, run_id = fresh("slow"), fresh("run")
    url = bridges.urls[0]
    body = json.dumps(run_body(thread, run_id, PACED)).encode()
    stalled = Stalled(url, "/agent/", ALICE, body)
    wait_until(lambda: _running(url, run_id), "the run started")
    follower = read_in_background("GET", f"{url}/runs/{run_id}/events", headers=ALICE)
    assert follower.done.wait(60), "the run did not end for its other follower"
    followed = follower.frames()
    _whole(followed)
    had = stalled.read()
    assert _cut(had)
    rest = _caught_up(bridges.urls[2], run_id, had)
    assert _frames_of(had + rest) == _frames_of(followed)


def _running(url: str, run_id: str) -> bool:
    answer = httpx.get(f"{url}/threads", headers=ALICE, timeout=10)
    return any(t["running"] == run_id for t in answer.json()["threads"])


def test_a_follower_alone_still_slows_its_run(tmp_path: Path) -> None:
    """Alone, a reader that stops reading holds its run (the upstream read waits), as without
    threads: no frame is let go for it, and it is not cut."""
    with processes("one", tmp_path, None, models=FAST) as bridges:
        thread, run_id = fresh("slow"), fresh("run")
        url = bridges.urls[0]
        body = json.dumps(run_body(thread, run_id, FAST)).encode()
        stalled = Stalled(url, "/agent/", ALICE, body)
        wait_until(lambda: _running(url, run_id), "the run started")
        done = threading.Event()
        threading.Timer(2.0, done.set).start()
        done.wait()
        assert _running(url, run_id)  # still held by its one reader
        had = stalled.read()
    assert not _cut(had)
    _whole(had)
