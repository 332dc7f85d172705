"""Stores bounded in bytes and fair in eviction (issue 56, point 5; README "Threads"):
``--thread-store-bytes`` holds the memory and file stores across every owner, the owner holding
the most gives way first, and a flood of made-up tokens cannot push out an owner's one thread.
Real bridges in processes of their own (their memory measured from ``/proc``), over real
sockets, in front of the faulty upstream."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from threads_processes import ALICE, SHORT, Processes, fresh, hydrated, processes, run_body

MIB = 1024 * 1024


def _rss(bridges: Processes) -> int:
    """The bridge process's resident memory, in bytes."""
    [replica] = bridges.made
    status = Path(f"/proc/{replica.process.pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) * 1024


def _post(url: str, token: str, text: str, client: httpx.Client | None = None) -> int:
    """A short run in a thread of its own, as the owner of ``token``; its status."""
    given = run_body(fresh("t"), model=SHORT)
    given["messages"][0]["content"] = text
    headers = {"Authorization": f"Bearer {token}"}
    if client is None:
        return httpx.post(url + "/", json=given, headers=headers, timeout=120).status_code
    return client.post(url + "/", json=given, headers=headers).status_code


def _flood(jobs: list[tuple[str, str]], text: str, workers: int) -> list[int]:
    """A run for each ``(url, token)`` of ``jobs``, ``workers`` at a time, each worker with a
    client of its own (its connections kept from run to run): their statuses."""
    clients = [httpx.Client(timeout=120) for _ in range(workers)]
    mine = threading.local()
    given = iter(clients)
    lock = threading.Lock()

    def post(job: tuple[str, str]) -> int:
        if not hasattr(mine, "client"):
            with lock:
                mine.client = next(given)
        return _post(job[0], job[1], text, mine.client)

    try:
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(post, jobs))
    finally:
        for client in clients:
            client.close()


def _kept_text(url: str, thread: str, headers: dict[str, str]) -> str | None:
    """The first message's text of the thread as a hydrate shows it (``None``: unknown)."""
    snapshot = [data for _, data in hydrated(url, thread, headers) if "messages" in data]
    messages = snapshot[0]["messages"] if snapshot else []
    return messages[0]["content"] if messages else None


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_forty_threads_of_6_mb_against_a_64_mib_budget_grow_the_process_under_200_mib(
    tmp_path: Path,
) -> None:
    flags = ("--thread-store-bytes", str(64 * MIB), "--max-body-bytes", str(8 * MIB))
    with processes("one", tmp_path, None, *flags, models=SHORT) as bridges:
        url = bridges.urls[0]
        assert _post(url, "warm-up", "Hi") == 200
        before = _rss(bridges)
        text = "x" * (6 * MIB)
        statuses = _flood([(url, f"owner-{i}") for i in range(40)], text, 4)
        grown = _settled(bridges) - before
    assert statuses == [200] * 40
    assert grown < 200 * MIB, f"grew {grown / MIB:.0f} MiB"


def _settled(bridges: Processes) -> int:
    """The bridge's resident memory once its runs' last saves are done (the answers are sent
    before their threads are saved): two reads a second apart within 4 MiB of each other."""
    last = _rss(bridges)
    for _ in range(20):
        time.sleep(1)
        now = _rss(bridges)
        if abs(now - last) < 4 * MIB:
            return now
        last = now
    return last


def _folder_bytes(folder: Path) -> int:
    return sum(os.path.getsize(p) for p in folder.rglob("*") if p.is_file())


def test_three_hundred_owners_against_a_2_mb_file_budget_keep_the_folder_under_2_5_mb(
    tmp_path: Path,
) -> None:
    flags = ("--thread-store-bytes", str(2_000_000))
    with processes("file", tmp_path, None, *flags, models=SHORT) as bridges:
        text = "y" * 20_000
        jobs = [(bridges.urls[i % 3], f"owner-{i}") for i in range(300)]
        statuses = _flood(jobs, text, 6)
        held = _folder_bytes(tmp_path / "threads")
    assert statuses == [200] * 300
    assert held < 2_500_000, f"{held} bytes"


@pytest.mark.parametrize("kind", ["one", "file"])
def test_a_flood_of_made_up_tokens_cannot_evict_an_owners_one_thread(
    kind: str, tmp_path: Path
) -> None:
    """Alice keeps one thread; 1,000 made-up tokens each save one about as big against a
    budget of some thirty: Alice's is still there, whole, on every process."""
    flags = ("--thread-store-bytes", str(100_000))
    with processes(kind, tmp_path, None, *flags, models=SHORT) as bridges:
        thread = fresh("mine")
        mine = run_body(thread, model=SHORT)
        mine["messages"][0]["content"] = "m" * 2000
        answer = httpx.post(bridges.urls[0] + "/", json=mine, headers=ALICE, timeout=60)
        assert answer.status_code == 200
        jobs = [(bridges.urls[i % 3], f"made-up-{i}") for i in range(1000)]
        statuses = _flood(jobs, "f" * 2000, 12)
        kept = [_kept_text(url, thread, ALICE) for url in bridges.urls]
    assert statuses == [200] * 1000
    assert kept == ["m" * 2000] * 3
