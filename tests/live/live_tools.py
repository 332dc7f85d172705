"""What the live tests share: llama-server and the bridge started for a test, and the official
client's runs (``tests/node/run_agent.mjs``)."""

from __future__ import annotations

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
from node_tools import official
from servers import serve

TESTS = Path(__file__).resolve().parent.parent
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
