"""How long hydrates hold the bridge's event loop (issue 56, point 4): the latency of
``GET /health`` while the bridge answers hydrates of big threads, and what they cost its memory.

Three processes: the scripted upstream, the bridge (``agui-bridge serve --threads memory``)
and this one, which first makes two threads (a run whose user message is ``--big-mb`` MB: a
thread at about ``--max-thread-bytes``; one of ``--thread-mb`` MB), then, while a thread of its
own asks ``/health`` back to back:

- ``one big``: a hydrate of the big thread, ``--runs`` times one after another, read by another
  process at the lowest priority (the slowest ``/health`` answer is about the longest the loop
  was held: the issue's bound is 50 ms);
- ``many``: ``--many`` hydrates at once of the other thread (the bound: ``/health`` at most
  100 ms), each read whole (by threads of another process, at the lowest priority: their
  reading holds no GIL of the probe's, and takes no core the bridge wants, as a client on
  another machine would not); with the bridge's resident memory before and at its highest,
  and its CPU time.

    python benchmarks/hydrate_stall.py              # 15 MB and 6 MB threads, 40 at once
    python benchmarks/hydrate_stall.py --smoke      # 2 MB and 1 MB threads, 5 at once, one run
    PYTHONPATH=/tmp/before python benchmarks/hydrate_stall.py   # another checkout's bridge

Each hydrate's answer is checked (its thread whole). Timing never fails a run.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from harness import cpu_seconds, free_port, health_probes, rss_bytes, stall_figures
from tool_result_stall import _process

MIB = 1024 * 1024


def _body(thread: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": f"run-{time.monotonic_ns()}",
        "messages": [{"id": f"u-{thread}", "role": "user", "content": text}] if text else [],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


def _made(url: str, thread: str, size: int) -> None:
    """A thread whose first message is ``size`` bytes of words, kept."""
    text = ("many words " * (size // 11 + 1))[:size]
    answer = httpx.post(url, json=_body(thread, text), timeout=300)
    answer.raise_for_status()
    deadline = time.monotonic() + 120
    while len(_hydrate(url, thread)) < size:
        if time.monotonic() > deadline:
            raise SystemExit(f"the thread {thread} was not kept (is --max-thread-bytes too small?)")
        time.sleep(0.2)


def _hydrate(url: str, thread: str) -> bytes:
    with httpx.Client(timeout=300) as client:
        answer = client.post(url, json=_body(thread, ""))
    answer.raise_for_status()
    return answer.content


def _hydrates(url: str, thread: str, many: int) -> list[int]:
    """``many`` hydrates of ``thread`` at once, each read whole: their answers' sizes. Run in a
    process of its own, so that its readers' work holds no GIL of the probe's."""
    with ThreadPoolExecutor(many) as pool:
        return list(pool.map(lambda _: len(_hydrate(url, thread)), range(many)))


def _held_in_process(size: int, runs: int, clean: bool) -> list[float]:
    """The hydrate's own work (a thread's document read, its snapshot made, redacted and
    encoded, as ``bridge.serve.http.hydrate`` does) in a worker thread of this process, while
    its event loop sleeps 1 ms at a time: the longest the loop waited (ms), each run. The
    bridge's hold on its loop with no scheduler, network or other process in the figure.
    ``clean``: a document this process saved (its digest kept: neither hashed again nor
    scanned for secrets); else another process's (a shared store): its digest checked, its
    snapshot redacted."""
    import asyncio
    import hashlib
    import inspect

    from bridge.serve.redact import Redactor
    from bridge.serve.threads.thread import Thread, read_document, snapshot_frames

    text = ("many words " * (size // 11 + 1))[:size]
    document = Thread([{"id": "u", "role": "user", "content": text}]).document()
    redactor = Redactor(["sk-a-secret-of-the-bridge-0123"])
    intact = {"intact": clean} if "intact" in inspect.signature(read_document).parameters else {}

    def work() -> int:
        hashlib.sha256(document).digest()  # is it a document this process saved?
        thread = read_document(document, **intact)
        assert thread is not None
        frames: list[bytes | str] = list(snapshot_frames(thread))
        if not clean:
            frames = [_redacted(redactor, frame) for frame in frames]
        data = [f.encode() if isinstance(f, str) else f for f in frames]
        pieces = [piece for at, f in enumerate(data, 2) for piece in (b"id: run:%d\n" % at, f)]
        return sum(map(len, pieces))

    async def held() -> float:
        gaps, done = [0.0], False

        async def watch() -> None:
            last = time.perf_counter()
            while not done:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.02)
        assert await asyncio.to_thread(work) > size
        done = True
        await watcher
        return max(gaps) * 1e3

    return [asyncio.run(held()) for _ in range(runs)]


def _redacted(redactor: Any, frame: bytes | str) -> bytes | str:
    if isinstance(frame, str):  # an older checkout's
        return str(getattr(redactor, "redact_sliced", redactor.redact)(frame))
    return bytes(redactor.redact_sliced_bytes(frame))


def _serving(port: int) -> int:
    """The process whose command line serves ``port`` (0 when none is found)."""
    wanted = f"\0--port\0{port}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if wanted in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    return 0


def _rss_peak(pid: int, done: threading.Event, peak: list[int]) -> None:
    while not done.is_set():
        peak[0] = max(peak[0], rss_bytes(pid))
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="small threads, 5 at once, one run")
    parser.add_argument("--big-mb", type=float, default=15.0, help="the big thread (MB)")
    parser.add_argument("--thread-mb", type=float, default=6.0, help="the many's thread (MB)")
    parser.add_argument("--many", type=int, default=40, help="hydrates at once")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    big = int((2 if args.smoke else args.big_mb) * 1e6)
    size = int((1 if args.smoke else args.thread_mb) * 1e6)
    many = 5 if args.smoke else args.many
    runs = 1 if args.smoke else args.runs
    import bridge

    print(f"hydrate stall: a {big / 1e6:g} MB thread alone, {many} at once of {size / 1e6:g} MB")
    print(f"  bridge from {bridge.__file__}")
    upstream_port, bridge_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}"
    base = f"http://127.0.0.1:{bridge_port}"
    up = [sys.executable, "-m", "bridge", "scripted-upstream", "--port", str(upstream_port)]
    up += ["--log-level", "warning"]
    limit = str(max(16 * MIB, big * 2))
    command = [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", f"{upstream}/v1",
        "--model", "scripted-reasoning-content", "--port", str(bridge_port), "--threads", "memory",
        "--max-thread-bytes", limit, "--max-body-bytes", limit, "--log-level", "warning",
    ]  # fmt: skip
    for clean, whose in ((True, "this process's"), (False, "another process's")):
        held = ", ".join(f"{ms:.0f}" for ms in _held_in_process(big, max(runs, 2), clean))
        print(f"  in process: the {big / 1e6:g} MB hydrate of {whose} document held the loop")
        print(f"    at most {held} ms")
    with _process(up, upstream), _process(command, f"{base}/agent"):
        url = f"{base}/agent/"
        pid = _serving(bridge_port)
        _made(url, "big", big)
        _made(url, "thread", size)
        print("  case          /health max     p99     p50  probes  took     RSS before → peak")
        for _ in range(runs):
            with ProcessPoolExecutor(1, initializer=os.nice, initargs=(19,)) as reader:
                reader.submit(int).result()  # the reader's process up before the probes
                with health_probes(f"{base}/agent", timeout=60) as latencies:
                    started = time.perf_counter()
                    [got] = reader.submit(_hydrates, url, "big", 1).result()
                    took = time.perf_counter() - started
            assert got > big, "the big thread was not whole"
            row = stall_figures(latencies)
            print(
                f"  one big     {row['max_ms']:9.1f} ms {row['p99_ms']:6.1f} ms "
                f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {took:5.2f} s"
            )
        for _ in range(runs):
            before = rss_bytes(pid) if pid else 0
            cpu_before = cpu_seconds(pid) if pid else 0.0
            done, peak = threading.Event(), [before]
            watcher = threading.Thread(target=_rss_peak, args=(pid, done, peak), daemon=True)
            if pid:
                watcher.start()
            with health_probes(f"{base}/agent", timeout=60) as latencies:
                started = time.perf_counter()
                with ProcessPoolExecutor(1, initializer=os.nice, initargs=(19,)) as readers:
                    readers.submit(int).result()
                    answers = readers.submit(_hydrates, url, "thread", many).result()
                took = time.perf_counter() - started
            done.set()
            cpu = cpu_seconds(pid) - cpu_before if pid else 0.0
            assert all(a > size for a in answers), "a hydrate's thread was not whole"
            row = stall_figures(latencies)
            memory = f"{before / MIB:6.0f} → {peak[0] / MIB:4.0f} MiB" if pid else "      ?"
            print(
                f"  many ({many:2})  {row['max_ms']:9.1f} ms {row['p99_ms']:6.1f} ms "
                f"{row['p50_ms']:5.1f} ms {row['probes']:6.0f} {took:5.2f} s  {memory}"
                f"  bridge CPU {cpu:.2f} s"
            )


if __name__ == "__main__":
    main()
