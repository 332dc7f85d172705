"""Text from a live llama-server (SmolLM2's own chat template), judged by what the official
client 1.0.0 receives: the answer as llama-server gives it, its usage, a cut answer, a client
that leaves, more runs than slots."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import llama_server
from live_tools import (
    DETERMINISTIC,
    ask,
    bridge,
    joined,
    llama,
    official,
    one_run,
    types,
    user,
)

STORY = "Write a short story about a cat named Tom."


@pytest.fixture(scope="module")
def server(bed: llama_server.Bed) -> Iterator[llama_server.Running]:
    with llama(bed, template=None) as running:
        yield running


@pytest.fixture(scope="module")
def agent(server: llama_server.Running) -> Iterator[str]:
    with bridge(server) as url:
        yield url


def _direct(prompt: str, **params: Any) -> dict[str, Any]:
    return {
        "model": llama_server.MODEL_ALIAS,
        "messages": [{"role": "user", "content": prompt}],
        **DETERMINISTIC,
        **params,
    }


def test_the_text_is_what_llama_server_answers_and_its_usage_is_the_runs(
    server: llama_server.Running, agent: str
) -> None:
    limits = {**DETERMINISTIC, "max_tokens": 40}
    report = one_run(agent, [user(STORY)], forwardedProps=limits)
    direct = ask(server, _direct(STORY, max_tokens=40))
    content = direct["choices"][0]["message"]["content"]
    assert content.strip(), "llama-server answered nothing: the comparison would prove nothing"
    assert joined(report["events"], "TEXT_MESSAGE_CONTENT") == content
    assert "REASONING_START" not in types(report["events"])
    (usage,) = report["events"][-1]["usage"]
    assert usage["inputTokens"] == direct["usage"]["prompt_tokens"]
    assert usage["outputTokens"] == direct["usage"]["completion_tokens"]
    assert usage["totalTokens"] == direct["usage"]["total_tokens"]
    (assistant,) = [m for m in report["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == content


def test_max_tokens_reached_finishes_the_run_as_truncated(agent: str) -> None:
    report = one_run(agent, [user(STORY)], forwardedProps={**DETERMINISTIC, "max_tokens": 5})
    finished = report["events"][-1]
    assert finished["result"]["finishReason"] == "length"
    assert finished["result"]["truncated"] is True
    assert "cut" in finished["result"]["message"]
    assert finished["usage"][0]["outputTokens"] == 5
    assert joined(report["events"], "TEXT_MESSAGE_CONTENT")


def _busy_slots(server: llama_server.Running) -> list[int]:
    slots = httpx.get(f"{server.origin}/slots", timeout=5).json()
    return [slot["id"] for slot in slots if slot.get("is_processing")]


def test_a_client_that_leaves_frees_llama_servers_slot_within_a_second(
    server: llama_server.Running, agent: str
) -> None:
    # 2000 tokens take this server many seconds: a slot still busy a second after the client
    # left is one the bridge did not release.
    long = {**DETERMINISTIC, "max_tokens": 2000}
    (report,) = official(
        [
            {
                "url": agent,
                "messages": [user(STORY)],
                "forwardedProps": long,
                "abortAfter": "TEXT_MESSAGE_CONTENT",
                "abortCount": 3,
            }
        ]
    )
    assert report["aborted"], report
    assert "RUN_FINISHED" not in types(report["events"])
    left = time.monotonic()
    while _busy_slots(server) and time.monotonic() - left < 1.0:
        time.sleep(0.02)
    assert _busy_slots(server) == [], "llama-server still decodes for a client that left"


def test_eight_runs_over_four_slots_all_finish(server: llama_server.Running, agent: str) -> None:
    prompts = [f"Count from {n} to {n + 5}." for n in range(8)]
    runs = [
        {
            "url": agent,
            "threadId": f"t{n}",
            "messages": [user(prompt)],
            "forwardedProps": {**DETERMINISTIC, "max_tokens": 24},
        }
        for n, prompt in enumerate(prompts)
    ]
    reports = official(runs)
    assert len(reports) == 8 > llama_server.SLOTS
    for report in reports:
        assert report["rejected"] is None and not report["failed"], report
        assert report["events"][-1]["type"] == "RUN_FINISHED"
        assert joined(report["events"], "TEXT_MESSAGE_CONTENT")
