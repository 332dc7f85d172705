"""``GET /capabilities`` says whether the bridge keeps threads (``custom.threads``): the demo page
asks there before it lists threads, since a bridge without ``--threads`` answers ``/threads``
with a 404 that the browser logs as an error (issue 42, point 7)."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from bridge.cli.demo import create_scripted_upstream
from bridge.serve.http.app import create_app
from servers import scripted_config, serve


@pytest.mark.parametrize(("threads", "kept"), [(None, False), ("memory", True)])
def test_the_capabilities_say_whether_threads_are_kept(threads: str | None, kept: bool) -> None:
    with serve(create_scripted_upstream()) as upstream:
        config = replace(scripted_config(upstream), threads=threads)
        with serve(create_app(config)) as url:
            custom = httpx.get(f"{url}/capabilities", timeout=10).json()["custom"]
            listed = httpx.get(f"{url}/threads", timeout=10).status_code
    assert custom["threads"] is kept
    assert listed == (200 if kept else 404)
