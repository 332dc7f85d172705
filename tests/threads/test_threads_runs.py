"""Threads kept over real HTTP (issue 42, README "Threads"), against each store (a real
``redis-server`` for Redis): a hydrate gives the thread back and calls no model; every frame of
a kept run has an id, and a client that comes back after any of them gets the rest exactly
once; a run outlives its connection, and one nobody comes back for is cancelled after the
grace; a cancel ends the run with what was said kept; another owner reads nothing."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from threads_tools import (
    body,
    checked,
    events,
    follow,
    hydrate_body,
    numbers,
    post_run,
    read_some,
    scripted_bridge,
    sse,
    store_url,
    wait_until,
)

from bridge.cli.demo import create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from faulty_upstream import fault_model, faulty_upstream
from servers import TOOLS, scripted_config, serve

ASK_TOOLS = "What's the weather in Paris? And make the background lightblue."


@pytest.fixture(params=["memory", "file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    redis_url = request.getfixturevalue("redis").url if request.param == "redis" else None
    return store_url(request.param, tmp_path, redis_url)


def _texts(frames: list[dict[str, Any]]) -> dict[str, str]:
    """Every delta of the stream, by kind, joined: what the client shows."""
    out: dict[str, str] = {}
    for frame in frames:
        if "delta" in frame and isinstance(frame["delta"], str):
            out[frame["type"]] = out.get(frame["type"], "") + frame["delta"]
    return out


def test_a_hydrate_answers_the_thread_and_calls_no_model(store: str) -> None:
    upstream_app = create_scripted_upstream()
    with serve(upstream_app) as upstream:
        config = replace(scripted_config(upstream), threads=store)
        with serve(create_app(config)) as url:
            first = body("th-hydrate", "Hi")
            ran = events(post_run(url, first))
            asked = len(upstream_app.state.requests)
            wait_until(lambda: _running(url, "th-hydrate") is None, "the run's end kept")
            answer = post_run(url, hydrate_body("th-hydrate"))
            assert len(upstream_app.state.requests) == asked  # no model was called
    frames = sse(answer)
    kinds = [frame["type"] for _, frame in frames]
    assert kinds == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert numbers(frames) == [1, 2, 3, 4]
    checked([frame for _, frame in frames])
    messages = frames[1][1]["messages"]
    assert messages[0] == first["messages"][0]
    said = _texts(ran)
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        said["TEXT_MESSAGE_CONTENT"]
    ]
    assert [m["content"] for m in messages if m["role"] == "reasoning"] == [
        said["REASONING_MESSAGE_CONTENT"]
    ]


def _running(url: str, thread: str, headers: dict[str, str] | None = None) -> str | None:
    listed = httpx.get(url + "/threads", headers=headers or {}, timeout=10).json()["threads"]
    found = [t for t in listed if t["id"] == thread]
    if not found:
        return "(not kept yet)"
    running: str | None = found[0]["running"]
    return running


def test_an_unknown_thread_hydrates_empty_and_calls_no_model() -> None:
    upstream_app = create_scripted_upstream()
    with serve(upstream_app) as upstream:
        config = replace(scripted_config(upstream), threads="memory")
        with serve(create_app(config)) as url:
            answer = events(post_run(url, hydrate_body("never-seen")))
            assert upstream_app.state.requests == []
    assert [f["type"] for f in answer] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert answer[1]["messages"] == []


def _cut_points(reference: list[dict[str, Any]]) -> dict[str, int]:
    """Where to leave a run: after its first frame (before any token), in its reasoning, in a
    tool call's arguments, and after its end."""
    kinds = [frame["type"] for frame in reference]
    return {
        "before the first token": 1,
        "mid-reasoning": kinds.index("REASONING_MESSAGE_CONTENT") + 2,
        "mid-tool-call arguments": kinds.index("TOOL_CALL_ARGS") + 2,
        "after the end": len(kinds),
    }


def test_a_client_that_comes_back_gets_every_event_after_its_last_exactly_once(
    store: str,
) -> None:
    with scripted_bridge(store, pace=0.01) as url:
        reference = events(post_run(url, body("th-ref", ASK_TOOLS, tools=TOOLS)))
        for point, count in _cut_points(reference).items():
            given = body(f"th-cut-{count}", ASK_TOOLS, tools=TOOLS)
            before = read_some(url, given, count)
            last = before[-1][0]
            assert last is not None
            after = sse(follow(url, given["runId"], last).text)
            whole = [*before, *after]
            assert numbers(whole) == list(range(1, len(whole) + 1)), point
            frames = checked([frame for _, frame in whole])
            assert [f["type"] for f in frames] == [f["type"] for f in reference], point
            assert _texts(frames) == _texts(reference), point


def test_a_run_outlives_its_connection_and_its_thread_holds_all_of_it(store: str) -> None:
    with scripted_bridge(store, pace=0.01) as url:
        reference = events(post_run(url, body("th-ref", "Hi")))
        given = body("th-left", "Hi")
        read_some(url, given, 3)  # the tab reloads
        wait_until(lambda: _running(url, "th-left") is None, "the run's end")
        thread = events(post_run(url, hydrate_body("th-left")))[1]["messages"]
    said = _texts(reference)
    assert [m["content"] for m in thread if m["role"] == "assistant"] == [
        said["TEXT_MESSAGE_CONTENT"]
    ]


def test_a_hydrate_while_the_run_goes_on_follows_it_to_its_end() -> None:
    with scripted_bridge("memory", pace=0.02) as url:
        reference = events(post_run(url, body("th-ref", "Hi")))
        given = body("th-going", "Hi")
        read_some(url, given, 4)
        frames = sse(post_run(url, hydrate_body("th-going")))
    kinds = [frame["type"] for _, frame in frames]
    assert kinds[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert frames[0][1]["runId"] == given["runId"]  # the run going on, from its start
    assert frames[1][1]["messages"] == given["messages"]  # the thread as the run began
    assert frames[1][0] is None  # not one of the run's frames: no id
    checked([frame for _, frame in frames])
    assert _texts([f for _, f in frames]) == _texts(reference)


def test_a_run_over_counts_no_more_among_the_runs_going_on(store: str) -> None:
    """A client's next run may come as soon as it has its run's end: the run no longer counts
    against --max-concurrent-runs (1 here) though its last frames are still being handed to a
    shared store (up to 100 ms later), and neither do its thread's saves."""
    with serve(create_scripted_upstream()) as upstream:
        config = replace(scripted_config(upstream), threads=store, max_concurrent_runs=1)
        with serve(create_app(config)) as url, httpx.Client(timeout=30) as client:
            ends = []
            for turn in range(5):
                answer = client.post(url + "/", json=body(f"th-next-{turn}", "Hi"))
                assert answer.status_code == 200, answer.text
                ends.append(events(answer.text)[-1]["type"])
    assert ends == ["RUN_FINISHED"] * 5


def test_another_owner_reads_nothing_of_a_thread(store: str) -> None:
    alice = {"Authorization": "Bearer alice-token"}
    bob = {"Authorization": "Bearer bob-token"}
    with scripted_bridge(store, pace=0.01) as url:
        given = body("th-shared-id", "Hi")
        read_some(url, given, 3, alice)
        run_id = given["runId"]
        assert follow(url, run_id, None, bob).status_code == 404
        assert httpx.post(f"{url}/runs/{run_id}/cancel", headers=bob).status_code == 404
        wait_until(lambda: _running(url, "th-shared-id", alice) is None, "alice's run's end")
        seen = events(post_run(url, hydrate_body("th-shared-id"), bob))
        assert seen[1]["messages"] == []
        assert httpx.get(url + "/threads", headers=bob).json() == {"threads": []}
        assert httpx.delete(url + "/threads/th-shared-id", headers=bob).status_code == 404
        kept = events(post_run(url, hydrate_body("th-shared-id"), alice))[1]["messages"]
    assert kept[0] == given["messages"][0]


SLOW = fault_model("ok", n=400, delay=0.05)


def _slow(upstream_url: str, **overrides: Any) -> BridgeConfig:
    """A bridge keeping threads in front of the faulty upstream, streaming slowly (20 s)."""
    return BridgeConfig(upstream_url=upstream_url, model=SLOW, threads="memory", **overrides)


def test_a_cancel_ends_the_run_keeping_what_was_said() -> None:
    with faulty_upstream() as upstream:
        config = _slow(upstream.url)
        with serve(create_app(config)) as url:
            given = body("th-cancel", "Hi")
            got: list[str] = []
            reader = threading.Thread(target=lambda: got.append(post_run(url, given)))
            reader.start()
            wait_until(lambda: upstream.requests and upstream.requests[0].chunks_sent > 12, "text")
            answer = httpx.post(f"{url}/runs/{given['runId']}/cancel", timeout=10)
            reader.join(30)
            assert answer.status_code == 202
            wait_until(lambda: upstream.requests[0].peer_closed_at is not None, "upstream closed")
            assert not upstream.requests[0].finished
            thread = events(post_run(url, hydrate_body("th-cancel")))[1]["messages"]
            again = httpx.post(f"{url}/runs/{given['runId']}/cancel", timeout=10)
    frames = checked(events(got[0]))
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert frames[-1]["outcome"] == {"type": "cancelled"}
    said = _texts(frames)["TEXT_MESSAGE_CONTENT"]
    assert [m["content"] for m in thread if m["role"] == "assistant"] == [said]
    assert again.status_code == 409


def test_a_run_nobody_comes_back_for_is_cancelled_after_the_grace() -> None:
    with faulty_upstream() as upstream:
        config = _slow(upstream.url, run_grace=0.5)
        with serve(create_app(config)) as url:
            given = body("th-gone", "Hi")
            read_some(url, given, 4)
            wait_until(lambda: upstream.requests[0].peer_closed_at is not None, "upstream closed")
            assert not upstream.requests[0].finished
            wait_until(lambda: _running(url, "th-gone") is None, "the run's end kept")
            thread = events(post_run(url, hydrate_body("th-gone")))[1]["messages"]
    assert [m["role"] for m in thread] == ["user", "reasoning", "assistant"]
    assert thread[2]["content"]  # what was said before the grace ran out


def test_without_threads_nothing_changes() -> None:
    with serve(create_scripted_upstream()) as upstream:
        config = scripted_config(upstream)
        with serve(create_app(config)) as url:
            text = post_run(url, body("th", "Hi"))
            assert "\nid: " not in text and not text.startswith("id: ")
            assert httpx.get(url + "/threads").status_code == 404
            assert httpx.get(url + "/runs/x/events").status_code == 404


def test_threads_are_listed_newest_first_and_forgotten(store: str) -> None:
    me = {"Authorization": f"Bearer lister-{time.monotonic_ns()}"}  # threads of its own

    def listed() -> list[dict[str, Any]]:
        threads: list[dict[str, Any]] = httpx.get(url + "/threads", headers=me).json()["threads"]
        return threads

    with scripted_bridge(store) as url:
        post_run(url, body("th-a", "first thread"), me)
        wait_until(lambda: _running(url, "th-a", me) is None, "the first run's end kept")
        post_run(url, body("th-b", "second   thread\nhere"), me)
        wait_until(lambda: _running(url, "th-b", me) is None, "the second run's end kept")
        assert [t["id"] for t in listed()] == ["th-b", "th-a"]
        assert listed()[0]["title"] == "second thread here"
        assert httpx.delete(url + "/threads/th-a", headers=me).status_code == 204
        assert [t["id"] for t in listed()] == ["th-b"]
        assert events(post_run(url, hydrate_body("th-a"), me))[1]["messages"] == []


def test_a_run_past_the_threads_limit_says_so_goes_on_and_is_not_kept() -> None:
    with scripted_bridge("memory", max_thread_bytes=2000) as url:
        first = body("th-big", "Hi")
        frames = events(post_run(url, first))  # its frames pass 2000 bytes
        said = [f for f in frames if f["type"] == "CUSTOM"]
        assert [f["name"] for f in said] == ["agui_bridge.thread_not_kept"]
        assert said[0]["value"]["code"] == "thread_too_large"
        checked(frames)
        assert frames[-1]["type"] == "RUN_FINISHED"  # the run went on to its end
        wait_until(lambda: _running(url, "th-big") is None, "the run's end")
        kept = events(post_run(url, hydrate_body("th-big")))[1]["messages"]
        gone = follow(url, first["runId"], f"{first['runId']}:1")
    assert kept == first["messages"]  # the thread as it was before the run
    assert gone.status_code == 410
    assert gone.json()["error"]["code"] == "run_not_kept"


def test_a_run_longer_than_the_run_timeout_ends_with_run_timeout() -> None:
    with (
        faulty_upstream() as upstream,
        serve(create_app(_slow(upstream.url, run_timeout=1.0))) as url,
    ):
        frames = events(post_run(url, body("th-long", "Hi")))
        wait_until(lambda: upstream.requests[0].peer_closed_at is not None, "upstream closed")
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "run_timeout"
    assert not upstream.requests[0].finished


def test_an_apps_owner_function_and_a_proxys_header_tell_owners_apart() -> None:
    with serve(create_scripted_upstream()) as upstream:
        config = replace(scripted_config(upstream), threads="memory")

        def owner(request: Any) -> str | None:
            user: str | None = request.headers.get("x-app-user")
            return user

        headed = replace(config, thread_owner_header="X-Forwarded-User")
        with (
            serve(create_app(config, owner=owner)) as by_app,
            serve(create_app(headed)) as by_header,
        ):
            for url, name in ((by_app, "x-app-user"), (by_header, "x-forwarded-user")):
                ann, ben = {name: "ann"}, {name: "ben"}
                given = body("th-mine", "Hi")
                post_run(url, given, ann)
                wait_until(lambda: _running(url, "th-mine", ann) is None, "kept")  # noqa: B023
                assert events(post_run(url, hydrate_body("th-mine"), ben))[1]["messages"] == []
                mine = events(post_run(url, hydrate_body("th-mine"), ann))[1]["messages"]
                assert mine[0] == given["messages"][0]
                nobody = httpx.post(url + "/", json=hydrate_body("th-mine"), timeout=10)
                assert nobody.status_code == 401  # the identity this bridge keeps threads by


def test_threads_kept_for_everyone_beyond_loopback_are_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from bridge.cli.threads import check_threads

    config = replace(scripted_config("http://127.0.0.1:1"), threads="memory")
    with caplog.at_level("WARNING", logger="agui_bridge"):
        check_threads(config, "127.0.0.1")
        assert caplog.records == []
        check_threads(replace(config, auth_token="t" * 20), "0.0.0.0")
        assert caplog.records == []
        check_threads(config, "0.0.0.0")
    assert "every caller as one owner" in caplog.text
    with pytest.raises(ValueError, match="--threads file:///FOLDER"):
        check_threads(config, "127.0.0.1", workers=2)
