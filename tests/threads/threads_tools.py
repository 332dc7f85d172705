"""What the threads' tests share: a bridge keeping threads in front of the scripted or the
faulty upstream, each store kind (a real ``redis-server`` for Redis), and the SSE of a kept run
read as the client reads it: frames with their ``id:``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from agui_rules import ProtocolViolation, check_frames
from bridge.cli.demo import create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from servers import scripted_config, serve


def sse(body: str) -> list[tuple[str | None, dict[str, Any]]]:
    """The frames of a kept run's SSE body, each with its ``id:`` (``None`` without one), split
    as the client splits them (on LF LF only)."""
    if "\r" in body:
        raise ProtocolViolation("the body holds CR characters")
    frames: list[tuple[str | None, dict[str, Any]]] = []
    for block in body.split("\n\n"):
        if not block or block.startswith(":"):
            continue
        ident = None
        lines = block.split("\n")
        if lines[0].startswith("id: "):
            ident = lines.pop(0)[len("id: ") :]
        if len(lines) != 1 or not lines[0].startswith("data: "):
            raise ProtocolViolation(f"not an id and one data line: {block[:120]!r}")
        frames.append((ident, json.loads(lines[0][len("data: ") :])))
    return frames


def events(body: str) -> list[dict[str, Any]]:
    return [frame for _, frame in sse(body)]


def numbers(frames: list[tuple[str | None, dict[str, Any]]]) -> list[int]:
    return [int(ident.rpartition(":")[2]) for ident, _ in frames if ident is not None]


def body(thread: str, text: str = "Hi", **extra: Any) -> dict[str, Any]:
    """A run's input as ``@ag-ui/client`` 1.0 sends it."""
    given: dict[str, Any] = {
        "protocolVersion": "1.0",
        "threadId": thread,
        "runId": f"run-{time.monotonic_ns()}",
        "messages": [{"id": f"u-{time.monotonic_ns()}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    given.update(extra)
    return given


def hydrate_body(thread: str, **extra: Any) -> dict[str, Any]:
    return body(thread, messages=[], **extra)


def post_run(url: str, given: dict[str, Any], headers: dict[str, str] | None = None) -> str:
    response = httpx.post(url + "/", json=given, headers=headers or {}, timeout=60)
    assert response.status_code == 200, response.text
    return response.text


def read_some(
    url: str, given: dict[str, Any], count: int, headers: dict[str, str] | None = None
) -> list[tuple[str | None, dict[str, Any]]]:
    """Start a run and leave after ``count`` frames (the connection closed, as a reload does)."""
    taken: list[tuple[str | None, dict[str, Any]]] = []
    with httpx.stream("POST", url + "/", json=given, headers=headers or {}, timeout=60) as r:
        assert r.status_code == 200
        text = ""
        for piece in r.iter_text():
            text += piece
            while "\n\n" in text:
                block, text = text.split("\n\n", 1)
                if block.startswith(":"):
                    continue
                taken.extend(sse(block + "\n\n"))
                if len(taken) >= count:
                    return taken
    return taken


def follow(
    url: str, run_id: str, last: str | None, headers: dict[str, str] | None = None
) -> httpx.Response:
    sent = dict(headers or {})
    if last is not None:
        sent["Last-Event-ID"] = last
    return httpx.get(f"{url}/runs/{run_id}/events", headers=sent, timeout=60)


def checked(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return check_frames(frames)


@contextmanager
def scripted_bridge(store: str, *, pace: float = 0.0, **overrides: Any) -> Iterator[str]:
    """A bridge keeping threads in ``store``, in front of the scripted upstream."""
    with serve(create_scripted_upstream(pace=pace)) as upstream:
        config = replace(scripted_config(upstream), threads=store, **overrides)
        with serve(create_app(config)) as url:
            yield url


@contextmanager
def bridge_for(config: BridgeConfig, **create: Any) -> Iterator[str]:
    with serve(create_app(config, **create)) as url:
        yield url


def store_url(kind: str, folder: Path, redis_url: str | None) -> str:
    if kind == "memory":
        return "memory"
    if kind == "file":
        return folder.as_uri()
    assert redis_url is not None
    return redis_url


def wait_until(check: Any, what: str, seconds: float = 20.0) -> None:
    """Poll ``check()`` until it is true (a condition, not a timing: the limit only stops a
    test that would hang)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)
