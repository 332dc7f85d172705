"""Peers of the inputs' hostile tests (findings 7 and 12): bodies too big to handle on the event
loop, a gate that shows whether the loop answered ``/health`` while a piece of work was in
progress, and, run as a script, an MCP App server whose widget's tool answers with a big text.

    python peers_inputs.py --size N   # an MCP server on stdio: tool ``big`` returns N characters

The gate proves order, not speed: the work waits (at most ``DEADLINE`` seconds) until the test
has had its ``/health`` answer. Done in a worker thread, the wait holds nothing and the answer
comes between the work's start and end; done on the event loop, the wait holds the loop, and
the answer comes after the work's end.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from typing import Any

import httpx

#: The longest a gated piece of work waits for ``/health``'s answer.
DEADLINE = 10.0
#: The secret the bridge redacts in these tests (its ``--api-key``).
KEY = "sk-proj-Hz7qW3mV8xN2bK5rT1pL9yF4jD6gC0aS"
#: A string found only in the big inputs, so that spies act on them alone.
MARKER = "hostile-input-marker"


def on_event_loop() -> bool:
    """Whether the caller runs on an event loop's thread (a worker thread has none)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Gate:
    """Holds one piece of work (``hold``) until ``/health`` has answered (``health``); the
    order of the three (start, health, end) and whether the work ran on the event loop."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.on_loop: list[bool] = []
        self._entered = threading.Event()
        self._answered = threading.Event()
        self._lock = threading.Lock()

    def hold(self) -> None:
        """Called by the work; only its first call waits."""
        with self._lock:
            self.on_loop.append(on_event_loop())
            if self._entered.is_set():
                return
            self.order.append("work started")
            self._entered.set()
        self._answered.wait(DEADLINE)
        self.order.append("work went on")

    def health(self, base_url: str) -> None:
        """Once the work has started, ask ``/health``; its answer is noted in the order."""
        assert self._entered.wait(DEADLINE), "the work never started"
        try:
            response = httpx.get(f"{base_url}/health", timeout=DEADLINE * 2)
            assert response.status_code == 200
            self.order.append("health answered")
        finally:
            self._answered.set()


def posted_while_gated(base_url: str, gate: Gate, body: dict[str, Any]) -> httpx.Response:
    """POST a run from a thread of its own while this one asks ``/health`` through the gate."""
    answer: list[httpx.Response] = []
    failed: list[BaseException] = []

    def send() -> None:
        try:
            answer.append(httpx.post(f"{base_url}/", json=body, timeout=DEADLINE * 6))
        except BaseException as exc:  # handed to the test's thread
            failed.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        gate.health(base_url)
    finally:
        sender.join(DEADLINE * 6)
    if failed:
        raise failed[0]
    return answer[0]


def part_history(parts: int, *, per_message: int = 50) -> list[dict[str, Any]]:
    """A history of user messages made of many small text parts (``parts`` in all): the most
    objects a body of its size can make the validator build. The last one asks a question."""
    part = {"type": "text", "text": f"a word or two {MARKER}"}
    count = max(1, parts // per_message)
    history: list[dict[str, Any]] = [
        {"id": f"m{i}", "role": "user", "content": [part] * per_message} for i in range(count)
    ]
    return [*history, {"id": "ask", "role": "user", "content": "Hi"}]


def _serve_mcp(size: int) -> None:
    from mcp.server.apps import Apps
    from mcp.server.mcpserver import MCPServer

    apps = Apps()
    unit = f"A big answer that quotes the key {KEY} now and then, {MARKER}. "
    text = (unit * (size // len(unit) + 1))[:size]

    @apps.tool(resource_uri="ui://big/app.html", visibility=["app"], description="A big text")
    def big() -> str:
        return text

    apps.add_html_resource("ui://big/app.html", "<!doctype html><p>big</p>")
    MCPServer("big", log_level="WARNING", extensions=[apps]).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, required=True)
    _serve_mcp(parser.parse_args().size)
