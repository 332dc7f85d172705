"""The upstream client against a live llama-server, which closes its connection after each
streamed answer while it answers ``Keep-Alive: timeout=5, max=100``: requests sent at once, one
after another, go through with no retry and no backoff, on both transports (issue 30's first
defect: the third of four such requests waited 600 ms, and failed outright with no retries)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import llama_server
from bridge.config import BridgeConfig
from bridge.core.translate import DONE
from bridge.serve.upstream.client import UpstreamClient
from helpers import CountedObservation
from live_tools import DETERMINISTIC, llama


@pytest.fixture(scope="module")
def server(bed: llama_server.Bed) -> Iterator[llama_server.Running]:
    with llama(bed, template=None) as running:
        yield running


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_streamed_requests_back_to_back_need_no_retry(
    server: llama_server.Running, transport: str
) -> None:
    config = BridgeConfig(
        upstream_url=server.url,
        model=llama_server.MODEL_ALIAS,
        upstream_transport=transport,  # type: ignore[arg-type]
        retries=0,
    )
    body = {
        "model": llama_server.MODEL_ALIAS,
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "max_tokens": 4,
        **DETERMINISTIC,
    }
    client = UpstreamClient(config)
    counted = CountedObservation()
    try:
        for _ in range(6):
            items = [item async for item in client.stream(body, observe=counted)]  # type: ignore[arg-type]
            assert items[-1] == DONE
            await client.get("/models")  # a GET right after a stream, as the doctor sends
    finally:
        await client.aclose()
    assert counted.statuses == [200] * 6
    assert counted.retries == 0
