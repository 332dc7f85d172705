"""``serve``'s process keeps what it is made of at start out of the garbage collector's full
passes (issue 56, point 4: a full pass over some 70,000 objects held the event loop ~50 ms
while forty hydrates came at once; ``benchmarks/hydrate_stall.py``). An app that mounts the
bridge is left its own collector."""

from __future__ import annotations

import gc

import pytest
from starlette.testclient import TestClient

from bridge import create_app
from bridge.cli.serving import _lifespans
from bridge.config import BridgeConfig

CONFIG = BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model="m")


@pytest.fixture(autouse=True)
def unfrozen() -> object:
    gc.unfreeze()
    yield None
    gc.unfreeze()


def test_serve_freezes_what_the_started_process_holds() -> None:
    from starlette.applications import Starlette

    app = create_app(CONFIG)
    parent = Starlette(lifespan=_lifespans([("/agent", app)]))
    assert gc.get_freeze_count() == 0
    with TestClient(parent):
        assert gc.get_freeze_count() > 10_000


def test_a_mounted_bridge_leaves_the_apps_collector_alone() -> None:
    with TestClient(create_app(CONFIG)):
        assert gc.get_freeze_count() == 0
