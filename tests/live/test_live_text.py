"""Text from a live llama-server (SmolLM2's own chat template), judged by what the official
client 1.0.0 receives: the answer as llama-server gives it, its usage, a cut answer, a client
that leaves, more runs than slots."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

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


#: llama-server's log lines for a task cancelled (its client's connection closed) and for a
#: slot let go (its context: the prompt's tokens and those decoded).
CANCELLED = re.compile(r"cancel task, id_task = (\d+)")
RELEASED = re.compile(r"release: id +\d+ \| task (\d+) \| stop processing: n_tokens = (\d+)")
#: The most tokens llama-server may decode for a client that left after 3 (a run the bridge
#: did not cancel decodes all 2000 of ``max_tokens``: this story never ends sooner).
DECODED_AT_MOST = 100


class Release(NamedTuple):
    task: str
    context: int  # the slot's tokens as it let them go: the prompt's and those decoded
    cancelled: set[str]  # the tasks cancelled before it


def _releases(log: Path, start: int, count: int, timeout: float = 120.0) -> list[Release]:
    """The first ``count`` slot releases logged after byte ``start``, in order."""
    deadline = time.monotonic() + timeout
    while True:
        with log.open("rb") as file:
            file.seek(start)
            text = file.read().decode(errors="replace")
        found = [
            Release(
                match.group(1), int(match.group(2)), set(CANCELLED.findall(text[: match.start()]))
            )
            for match in RELEASED.finditer(text)
        ]
        if len(found) >= count:
            return found[:count]
        assert time.monotonic() < deadline, (
            f"llama-server let {len(found)} slots go: {text[-2000:]}"
        )
        time.sleep(0.05)


def test_a_client_that_leaves_has_llama_server_cancel_its_answer_after_a_few_tokens(
    server: llama_server.Running, agent: str
) -> None:
    # Counted in llama-server's tokens, not in seconds: on a loaded machine every token takes
    # longer, and the cancel still comes a few tokens after the client left. A bridge that kept
    # reading (or kept the connection) would have all 2000 decoded: this story never ends sooner.
    start = server.log.stat().st_size
    prompt = ask(server, _direct(STORY, max_tokens=1))["usage"]["prompt_tokens"]
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
    _, run = _releases(server.log, start, 2)  # the direct ask's, then the run's
    assert run.task in run.cancelled, "llama-server ended the answer itself: nobody cancelled it"
    decoded = run.context - prompt
    assert 2 <= decoded <= DECODED_AT_MOST, (
        f"llama-server decoded {decoded} tokens after the prompt"
    )


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
