"""The operator's instructions before a live llama-server (issue 43, point 1): the same bytes
first in every run, so llama.cpp's prompt cache keeps them: the next run's usage counts them as
cached tokens (``prompt_tokens_details.cached_tokens``), where instructions that differ are
read again. Judged through the official client 1.0.0."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import llama_server
from live_tools import DETERMINISTIC, bridge, llama, one_run, user

#: Long enough that its tokens outnumber everything after it in the prompt many times.
INSTRUCTIONS = "You are Ada, the operator's agent; answer in one short sentence. " * 20


@pytest.fixture(scope="module")
def server(bed: llama_server.Bed) -> Iterator[llama_server.Running]:
    with llama(bed, template=None) as running:
        yield running


def _usage(url: str, text: str) -> dict[str, Any]:
    limits = {**DETERMINISTIC, "max_tokens": 4}
    report = one_run(url, [user(text)], forwardedProps=limits)
    usage: dict[str, Any] = report["events"][-1]["usage"][0]
    return usage


def test_the_instructions_prefix_is_cached_by_llama_server_across_runs(
    server: llama_server.Running,
) -> None:
    """Promise: the instructions keep the prompt's prefix byte for byte across runs: the
    second run of another question finds all of it in llama-server's cache."""
    with bridge(server, instructions=INSTRUCTIONS) as url:
        first = _usage(url, "Tell me about cats")
        second = _usage(url, "Tell me about dogs, please")
    assert first.get("cachedInputTokens", 0) == 0
    # All but the few tokens of the user's turn come from the cache.
    assert second["cachedInputTokens"] >= first["inputTokens"] - 12, (first, second)
    with bridge(server, instructions="Another operator. " + INSTRUCTIONS) as url:
        changed = _usage(url, "Tell me about cats")
    # A prefix changed at its start is read again (llama.cpp keeps only the same beginning).
    assert changed.get("cachedInputTokens", 0) < 8, changed
