"""The CopilotKit example's thread survives a reload (issue 42, point 7): wired directly, the page
keeps its thread in its URL and its agent, ``ThreadAgent`` (``examples/copilotkit/src/shell.tsx``),
answers CopilotKit's ``connect()`` with the bridge's hydrate. ``tests/browser/copilotkit-threads
.test.mjs`` drives it in Chromium against a bridge keeping threads in memory, its scripted model
paced so that a reload lands in the middle of an answer.

The through-the-runtime wiring is unchanged: ``tests/test_copilotkit.py`` still drives it.
"""

from __future__ import annotations

import os

import httpx
from prometheus_client.parser import text_string_to_metric_families

from copilotkit_example import BROWSER_TESTS, example_server, ready_for_chromium, roles
from node_tools import check_tap, run
from servers import free_port, scripted_stack

MODEL = "scripted-reasoning-content"
#: Seconds between the scripted model's chunks: an answer streams for a few seconds.
PACE = 0.05
PROMPT = "Please say hello from a thread."


def test_copilotkit_restores_its_thread_on_reload_and_follows_the_answer() -> None:
    """Issue 42 point 7, the promise "a reload shows the thread again, a running answer to its
    end, no text missing or twice", in CopilotKit 1.74 wired directly. The page reloaded after
    an answer shows the conversation again; reloaded mid-answer, it shows the answer going on to
    the same end as the same prompt's answer without a reload. The model was asked once per
    conversation: the answer after the reload is the same run's, followed, not asked again."""
    node = ready_for_chromium()
    app_port = free_port()
    app_origin = f"http://127.0.0.1:{app_port}"
    with (
        scripted_stack(
            pace=PACE, cors_origins=(app_origin,), threads="memory", metrics=True
        ) as stack,
        example_server(stack.bridge_url, app_port),
    ):
        env = {**os.environ, "APP_URL": f"{app_origin}/", "MODEL": MODEL}
        output = run(
            [node, "--test", "--test-reporter=tap", "copilotkit-threads.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=120,
            what="the CopilotKit threads browser test",
        )
        requests = list(stack.upstream_requests)
        metrics = httpx.get(f"{stack.bridge_url}/metrics", timeout=10).text

    check_tap(output, "the CopilotKit threads test", 2)
    # One model request per conversation: the reloads asked the model nothing.
    assert [roles(r) for r in requests] == [["user"], ["user"]], [roles(r) for r in requests]
    counted = _samples(metrics)
    # Each reload hydrated its thread (a page opened on a new thread asks nothing) ...
    assert counted.get(("agui_bridge_thread_requests_total", "hydrate")) == 2, counted
    # ... and the one reloaded mid-answer was sent the run's events it had missed.
    assert counted.get(("agui_bridge_events_replayed_total", ""), 0) > 0, counted


def _samples(metrics: str) -> dict[tuple[str, str], float]:
    return {
        (sample.name, sample.labels.get("kind", "")): sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
    }
