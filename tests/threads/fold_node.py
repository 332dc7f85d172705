"""The official clients as judges of the thread fold (``bridge/serve/threads/fold.py``): the
Node scripts ``tests/node/wire_agent.mjs`` (conversations over HTTP, the bytes received kept)
and ``tests/node/apply_events.mjs`` (given events through the client's whole pipeline, no HTTP),
and the fold of the same input, to compare with what the client holds."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from bridge.serve.threads.fold import ThreadFold
from node_tools import NODE_DIR, npm_install, require_node

#: The client lines that judge: 1.0.0, and 0.0.59 (CopilotKit 1.74 / runtime 1.75).
CLIENTS = ("1.0.0", "0.0.59")


def node(script: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``tests/node/<script>`` on ``spec``; its one JSON line."""
    runtime = require_node("the official AG-UI client judges the thread fold")
    client = spec.get("client", "1.0.0")
    npm_install(
        NODE_DIR,
        NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json",
        "the official AG-UI client",
    )
    try:
        done = subprocess.run(
            [runtime, script],
            cwd=NODE_DIR,
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} did not finish within 300 s: {exc.stderr}")
    if done.returncode != 0:
        pytest.fail(f"{script} exited with {done.returncode}:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def conversations(client: str, talks: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each conversation's turns through the client over HTTP (``wire_agent.mjs``); a warning
    or an error the client logged fails the test."""
    result = node("wire_agent.mjs", {"client": client, "conversations": list(talks)})
    assert result["logged"] == [], f"the official client complained: {result['logged']}"
    reports: list[list[dict[str, Any]]] = result["reports"]
    return reports


def applied(client: str, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each case's events through the client's pipeline (``apply_events.mjs``)."""
    reports: list[dict[str, Any]] = node("apply_events.mjs", {"client": client, "cases": cases})[
        "reports"
    ]
    return reports


def frames(body: str) -> list[str]:
    """The frames of an SSE body as the bridge wrote them, each ending in its blank line."""
    return [f"{block}\n\n" for block in body.split("\n\n") if block]


def folded(
    messages: list[dict[str, Any]],
    state: Any,
    body_frames: Iterable[str],
    interrupts: list[dict[str, Any]] | None = None,
) -> ThreadFold:
    fold = ThreadFold(messages, state, interrupts=interrupts)
    for frame in body_frames:
        fold.apply_frame(frame)
    return fold


def as_json(value: Any) -> Any:
    """``value`` as JSON reads it back (the comparison the tests make: as JSON)."""
    return json.loads(json.dumps(value))
