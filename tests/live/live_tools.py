"""What the live tests share: llama-server and the bridge started for a test, and the official
client's runs (``tests/node/run_agent.mjs``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

import llama_server
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from node_tools import npm_install, require_node
from servers import serve

TESTS = Path(__file__).resolve().parent.parent
NODE_DIR = TESTS / "node"
ARTIFACTS = TESTS / "artifacts" / "live"
#: The answers are nonsense, but the same for the same request: greedy decoding, one seed.
DETERMINISTIC = {"temperature": 0, "seed": 42}


@contextmanager
def llama(
    bed: llama_server.Bed,
    *,
    template: str | None = llama_server.THINKING_TEMPLATE,
    reasoning_format: str = "deepseek",
    extra: Sequence[str] = (),
) -> Iterator[llama_server.Running]:
    """A llama-server with ``template`` (``None``: the model's own) and ``reasoning_format``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with llama_server.running(
            bed,
            template=template,
            reasoning_format=reasoning_format,
            extra=extra,
            log_folder=ARTIFACTS,
        ) as server:
            yield server
    except llama_server.BedError as exc:
        pytest.fail(f"llama-server could not start: {exc}", pytrace=False)


def bridge_config(server: llama_server.Running, **overrides: Any) -> BridgeConfig:
    base = BridgeConfig(upstream_url=server.url, model=llama_server.MODEL_ALIAS, idle_timeout=120.0)
    return replace(base, **overrides)


@contextmanager
def bridge(
    server: llama_server.Running, *, tools: Sequence[Any] = (), **overrides: Any
) -> Iterator[str]:
    """The bridge in front of ``server``: its agent URL (``POST``)."""
    with serve(create_app(bridge_config(server, **overrides), tools=tools)) as url:
        yield f"{url}/"


def official(runs: Sequence[dict[str, Any]], *, client: str = "1.0.0") -> list[dict[str, Any]]:
    """The runs, at once, through the official client (``tests/node/run_agent.mjs``): per run the
    events its subscriber saw, its messages and state at the end, ``failed`` (onRunFailed) and
    ``rejected``. Anything the client logged as a warning or error fails the test."""
    node = require_node("the live tests judge the events with the official AG-UI client")
    npm_install(
        NODE_DIR,
        NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json",
        "the official AG-UI client",
    )
    spec = {"client": client, "runs": list(runs)}
    try:
        done = subprocess.run(
            [node, "run_agent.mjs"],
            cwd=NODE_DIR,
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the official client did not finish within 300 s: {exc.stderr}")
    if done.returncode != 0:
        pytest.fail(f"the official client exited with {done.returncode}:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["logged"] == [], f"the official client complained: {result['logged']}"
    reports: list[dict[str, Any]] = result["reports"]
    return reports


def one_run(url: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """One run through the official client that must end in ``RUN_FINISHED``."""
    (report,) = official([{"url": url, "messages": messages, **extra}])
    assert report["rejected"] is None and not report["failed"], report
    assert report["events"][-1]["type"] == "RUN_FINISHED", report["events"][-1]
    return report


def user(text: str, id: str = "u1") -> dict[str, Any]:
    return {"id": id, "role": "user", "content": text}


def joined(events: list[dict[str, Any]], kind: str) -> str:
    return "".join(event["delta"] for event in events if event["type"] == kind)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def ask(server: llama_server.Running, body: dict[str, Any]) -> dict[str, Any]:
    """The same request, asked of llama-server directly (not streamed)."""
    response = httpx.post(f"{server.url}/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer
