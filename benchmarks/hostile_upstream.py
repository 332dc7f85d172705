"""What a hostile upstream costs (issue 40, findings 5 and 6), measured against the peer the
hostile tests play (``tests/hostile/peers_upstream.py``, raw asyncio on 127.0.0.1):

- **resends**: how many times one run's completion is asked for, when the upstream reads each
  request on a reused connection whole and then closes it, after the bridge pooled 1, 4, 12 or
  30 connections (each perhaps a whole generation); on both transports.
- **drip**: how long a run (``--reasoning-scope auto``) is held by a ``/props`` that sends its
  head, then a byte every ``--drip`` seconds (``--drip-size`` bytes).
- **memory**: the peak of Python's allocations (tracemalloc) while the bridge reads a ``/props``
  of 200 MB, and one of 256 MB of zeros in gzip (about 250 KB).

    python benchmarks/hostile_upstream.py            # drip: 100 bytes, one every 0.5 s
    python benchmarks/hostile_upstream.py --smoke    # 1 and 4 connections, a short drip
    PYTHONPATH=/tmp/before python benchmarks/hostile_upstream.py   # another checkout's bridge

Each run's end is checked (RUN_FINISHED with the answer's text, or the RUN_ERROR shown);
timings never fail a run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "hostile"), str(ROOT / "tests")]

from bridge.config import BridgeConfig  # noqa: E402
from bridge.serve.http.app import create_app  # noqa: E402
from bridge.serve.upstream.client import UpstreamClient  # noqa: E402
from peers_upstream import MODEL, WORDS, HostileUpstream, hostile_upstream  # noqa: E402
from servers import run_input, serve  # noqa: E402

TRANSPORTS = ("aiohttp", "httpx")


def _config(upstream: HostileUpstream, transport: str, **overrides: Any) -> BridgeConfig:
    settings: dict[str, Any] = {
        "upstream_url": upstream.url,
        "model": MODEL,
        "upstream_transport": transport,
        "reasoning_scope": "current-turn",
        **overrides,
    }
    return BridgeConfig(**settings)


def _run(bridge: str, name: str, timeout: float = 600) -> str:
    """One run: ``""`` when it finished with the whole answer, else its error's code."""
    body = run_input([{"id": "u", "role": "user", "content": name}])
    text = httpx.post(bridge, json=body, timeout=timeout).text
    if '"type":"RUN_FINISHED"' in text:
        assert all(word.strip() in text for word in WORDS), text[-300:]
        return ""
    assert '"type":"RUN_ERROR"' in text, text[-300:]
    return text.rpartition('"code":"')[2].partition('"')[0]


def resends(pooled: int, transport: str) -> str:
    with hostile_upstream(fill=pooled) as upstream:
        with serve(create_app(_config(upstream, transport))) as bridge:
            with ThreadPoolExecutor(pooled) as pool:
                assert not any(pool.map(lambda i: _run(bridge, f"fill-{i}"), range(pooled)))
            code = _run(bridge, "probe")
        asked = upstream.completions_of("probe")
        return f"{asked} (RUN_ERROR {code})" if code else str(asked)


def drip(transport: str, every: float, size: int) -> float:
    with hostile_upstream(props="drip", drip=every, drip_size=size, reused="answer") as upstream:
        config = _config(upstream, transport, reasoning_scope="auto")
        with serve(create_app(config)) as bridge:
            began = time.perf_counter()
            assert not _run(bridge, "held")
            return time.perf_counter() - began


def memory(mode: str, transport: str) -> tuple[float, str]:
    """The peak (MB) while ``/props`` is read, and how the read ended."""

    async def read(upstream: HostileUpstream) -> str:
        reader = UpstreamClient(_config(upstream, transport))
        try:
            props = await reader.llama_cpp_props(MODEL)
            return "read" if props is not None else "none"
        except Exception as exc:  # what the read said, for the table
            return f"refused: {type(exc).__name__}"
        finally:
            await reader.aclose()

    with hostile_upstream(props=mode) as upstream:
        tracemalloc.start()
        try:
            ended = asyncio.run(read(upstream))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak / 1e6, ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few seconds")
    parser.add_argument("--drip", type=float, default=0.5, help="seconds between bytes")
    parser.add_argument("--drip-size", type=int, default=100, help="the dripped body's size")
    args = parser.parse_args()
    pools = (1, 4) if args.smoke else (1, 4, 12, 30)
    size, every = (6, 0.1) if args.smoke else (args.drip_size, args.drip)
    print("completions asked for one run, by connections pooled:")
    for transport in TRANSPORTS:
        counts = {pooled: resends(pooled, transport) for pooled in pools}
        print(f"  {transport:8} " + "  ".join(f"{p}: {n}" for p, n in counts.items()))
    print(f"a run held by /props dripping a byte every {every:g} s ({size} bytes and a few):")
    for transport in TRANSPORTS:
        print(f"  {transport:8} {drip(transport, every, size):.1f} s")
    if args.smoke:
        return
    print("peak of Python's allocations while /props is read:")
    for mode in ("huge", "gzip_bomb"):
        for transport in TRANSPORTS:
            peak, ended = memory(mode, transport)
            print(f"  {mode:10} {transport:8} {peak:8.1f} MB  {ended}")


if __name__ == "__main__":
    main()
