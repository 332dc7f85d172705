"""Each owner's runs and threads are theirs on every process (issue 56, points 1 and 2; README
"Threads that survive a reload"): a run is its owner's and its id's in every store, so another
owner's run of the same id is another run, and another owner's id reads as unknown for a
follow, a cancel, the list and the "already exists" answer; a thread deleted while its run goes
on stays deleted. Each held on one process (memory) and on three processes sharing Redis or a
folder, Alice's requests and Bob's sent to the processes each case names, over real sockets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from threads_processes import (
    ALICE,
    BOB,
    SHORT,
    TOPOLOGIES,
    Frame,
    Processes,
    cancel,
    follow,
    fresh,
    hydrated,
    leave_after,
    listed,
    read_in_background,
    run_body,
    topology,
)
from threads_tools import checked, numbers, sse, wait_until


@pytest.fixture(scope="module", params=TOPOLOGIES)
def bridges(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Processes]:
    with topology(request, tmp_path_factory) as made:
        yield made


def _whole(before: list[Frame], rest: list[Frame]) -> list[dict[str, Any]]:
    whole = [*before, *rest]
    assert numbers(whole) == list(range(1, len(whole) + 1))
    return checked([frame for _, frame in whole])


def _cancelled(end: dict[str, Any]) -> bool:
    return bool(end.get("outcome") == {"type": "cancelled"})


def _message_ids(frames: list[Frame]) -> set[str]:
    return {f["messageId"] for _, f in frames if "messageId" in f}


def test_another_owners_run_id_reads_as_unknown_on_every_process(bridges: Processes) -> None:
    """Bob knows Alice's run id and thread id: following, cancelling, hydrating and listing
    find nothing of hers on any process (404, an empty thread, an empty list), and her run goes
    on to its end, followed again by her from another process."""
    p1, _, p3 = bridges.urls
    thread, run = fresh("th-alice"), fresh("run-alice")
    before = leave_after(p1, run_body(thread, run), 3, ALICE)
    for url in bridges.urls:
        assert follow(url, run, BOB).status_code == 404
        assert follow(url, run, BOB, f"{run}:3").status_code == 404
        assert cancel(url, run, BOB).status_code == 404
        assert thread not in listed(url, BOB)
        snapshot = [f for _, f in hydrated(url, thread, BOB) if f["type"] == "MESSAGES_SNAPSHOT"]
        assert snapshot[0]["messages"] == []
    rest = follow(p3, run, ALICE, before[-1][0])
    assert rest.status_code == 200
    frames = _whole(before, sse(rest.text))
    assert frames[-1]["type"] == "RUN_FINISHED" and not _cancelled(frames[-1])


def test_two_owners_runs_of_one_id_are_two_runs_on_every_process(bridges: Processes) -> None:
    """Alice and Bob each post a run of the id X (on two processes): both are admitted, each
    followed (and hydrated) from a third gets only its own frames, Bob's cancel stops his run
    and not hers, and Alice's own second X while hers goes on is refused (409)."""
    p1, p2, p3 = bridges.urls
    run = fresh("run-x")
    alice_thread, bob_thread = fresh("th-a"), fresh("th-b")
    alice_before = leave_after(p1, run_body(alice_thread, run), 3, ALICE)
    bob_before = leave_after(p2, run_body(bob_thread, run), 3, BOB)
    again = httpx.post(p1 + "/", json=run_body(alice_thread, run), headers=ALICE, timeout=30)
    assert (again.status_code, again.json()["error"]["code"]) == (409, "run_exists")
    bob_hydrate = read_in_background(
        "POST", p3 + "/", json=run_body(bob_thread, messages=[]), headers=BOB
    )
    wait_until(lambda: bob_hydrate.status or bob_hydrate.done.is_set(), "Bob's hydrate began")
    assert cancel(p1, run, BOB).status_code == 202  # Bob's own X, on another process
    alice = read_in_background(
        "GET", f"{p3}/runs/{run}/events", headers={**ALICE, "Last-Event-ID": alice_before[-1][0]}
    )
    bob = read_in_background(
        "GET", f"{p3}/runs/{run}/events", headers={**BOB, "Last-Event-ID": bob_before[-1][0]}
    )
    assert alice.done.wait(120) and bob.done.wait(120)
    assert (alice.status, bob.status) == (200, 200)
    alice_frames = _whole(alice_before, alice.frames())
    bob_frames = _whole(bob_before, bob.frames())
    assert alice_frames[0]["threadId"] == alice_thread and bob_frames[0]["threadId"] == bob_thread
    assert alice_frames[-1]["type"] == "RUN_FINISHED" and not _cancelled(alice_frames[-1])
    assert _cancelled(bob_frames[-1])
    assert not _message_ids([*alice_before, *alice.frames()]) & _message_ids(
        [*bob_before, *bob.frames()]
    )
    # Bob's hydrate followed his run: the frames he was sent, and none of hers.
    assert bob_hydrate.done.wait(120) and bob_hydrate.status == 200
    shown = [frame for frame in bob_hydrate.frames() if frame[0] is not None]
    assert [f for _, f in shown] == bob_frames


def test_the_list_names_the_callers_runs_only(bridges: Processes) -> None:
    """A thread id both use: Bob's list shows his thread with no run going on, on every
    process, while Alice's run goes on in hers (her list names it)."""
    p1, _, _ = bridges.urls
    thread, run = fresh("th-both"), fresh("run-alice")
    answer = httpx.post(p1 + "/", json=run_body(thread, model=SHORT), headers=BOB, timeout=60)
    assert answer.status_code == 200 and sse(answer.text)[-1][1]["type"] == "RUN_FINISHED"
    wait_until(lambda: listed(p1, BOB).get(thread, "missing") is None, "Bob's run saved")
    leave_after(p1, run_body(thread, run), 3, ALICE)
    for url in bridges.urls:
        bobs = listed(url, BOB)
        assert bobs[thread] is None and run not in bobs.values()
    wait_until(lambda: listed(p1, ALICE).get(thread) == run, "Alice's run listed")
    cancel(p1, run, ALICE)


def test_a_thread_deleted_while_its_run_goes_on_stays_deleted(bridges: Processes) -> None:
    """Alice deletes her thread from another process than her run's: the run is cancelled,
    and its end's save (which comes after the delete) keeps nothing: the thread reads as
    unknown on every process once the run's process said so (on one process, the delete
    answers once the run's saves are done, and the thread goes after them)."""
    p1, p2, _ = bridges.urls
    thread, run = fresh("th-deleted"), fresh("run-deleted")
    before = leave_after(p1, run_body(thread, run), 3, ALICE)
    wait_until(lambda: thread in listed(p2, ALICE), "the thread saved as the run began")
    assert httpx.delete(f"{p2}/threads/{thread}", headers=ALICE, timeout=30).status_code == 204
    rest = follow(p1, run, ALICE, before[-1][0])
    assert _cancelled(_whole(before, sse(rest.text))[-1])
    if bridges.kind != "one":  # on its own process, the delete waited for the run's saves
        wait_until(
            lambda: any(run in line["message"] for line in bridges.log("was deleted as it ran")),
            "the run's end not kept",
        )
    for url in bridges.urls:
        assert thread not in listed(url, ALICE)
        snapshot = [f for _, f in hydrated(url, thread, ALICE) if f["type"] == "MESSAGES_SNAPSHOT"]
        assert snapshot[0]["messages"] == []
