"""How long ``GET /health`` takes when the approval store is blocked (issue 40, finding 9): a
Redis that takes connections and never answers (a peer here that reads and stays silent).

The bridge (uvicorn, in a thread of this process) has a tool under ``--approve``, so
``/health`` reports the store; this process asks ``/health`` ``--probes`` times back to back and
prints each answer's latency and how many connections the store was opened. Before the fix
each probe waited for redis-py's command timeout (3 s); after it, ``/health`` waits for the
store's answer at most ``HEALTH_WAIT`` (0.5 s) and asks it one question at a time.

    python benchmarks/health_blocked_store.py             # 5 probes
    python benchmarks/health_blocked_store.py --smoke     # 2 probes
    PYTHONPATH=/tmp/before python benchmarks/health_blocked_store.py   # another checkout's bridge

The answers are checked (``degraded``, the store ``unavailable``); timing never fails a run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from harness import free_port


@contextmanager
def mute_store() -> Iterator[tuple[int, list[int]]]:
    """A TCP server that reads and never answers; its port, and a one-item list counting the
    connections it took."""
    loop = asyncio.new_event_loop()
    connections = [0]
    port = free_port()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections[0] += 1
        try:
            while await reader.read(65536):
                pass
        except asyncio.CancelledError:
            pass  # stopped with the benchmark (a cancelled handler would be logged as failed)
        finally:
            writer.close()

    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", port))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, connections
    finally:

        async def stop() -> None:  # the connections' handlers too: none left pending
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)  # after the cancelled handlers' last steps
        thread.join(10)
        loop.close()


@contextmanager
def bridge(store_port: int) -> Iterator[str]:
    import uvicorn

    from bridge.config import BridgeConfig
    from bridge.serve.http.app import create_app

    config = BridgeConfig(
        upstream_url="http://127.0.0.1:9/v1",
        model="m",
        approve=("send_*",),
        approval_store=f"redis://127.0.0.1:{store_port}/0",
        secret="Zq8vT2mW9xL4nB7cKp3Rd6Yh",
    )

    def send_mail(to: str) -> str:
        return to

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config, tools=[send_mail]), host="127.0.0.1", port=port, log_level="error"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="2 probes")
    args = parser.parse_args()
    probes = 2 if args.smoke else args.probes
    took: list[float] = []
    with mute_store() as (store_port, connections), bridge(store_port) as url:
        for _ in range(probes):
            started = time.perf_counter()
            answer = httpx.get(f"{url}/health", timeout=60).json()
            took.append(time.perf_counter() - started)
            assert answer == {"status": "degraded", "approval_store": "unavailable"}, answer
        opened = connections[0]
    print(f"/health with a blocked store, {probes} probes back to back:")
    print("  each (s): " + ", ".join(f"{t:.2f}" for t in took))
    print(f"  median {statistics.median(took):.2f} s, slowest {max(took):.2f} s")
    print(f"  connections the store was opened: {opened}")


if __name__ == "__main__":
    main()
