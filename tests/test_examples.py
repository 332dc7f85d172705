"""The mounting examples, run for real against the scripted upstream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agui_rules import check_frames, parse_body
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from examples import fastapi_app, starlette_app
from servers import serve


@pytest.mark.parametrize(
    "build", [starlette_app.build, fastapi_app.build], ids=["starlette", "fastapi"]
)
def test_example_serves_the_agent_under_agent(build: Callable[[str, str], Any]) -> None:
    with (
        serve(create_scripted_upstream()) as upstream,
        serve(build(f"{upstream}/v1", DEFAULT_SCRIPTED_MODEL)) as url,
    ):
        assert httpx.get(f"{url}/").status_code == 200
        assert httpx.get(f"{url}/agent/health").json() == {"status": "ok"}
        for path in ("/agent", "/agent/"):
            body = {
                "threadId": "t",
                "runId": f"r{path}",
                "messages": [{"id": "u", "role": "user", "content": "Hi"}],
                "tools": [],
                "context": [],
                "state": {},
                "forwardedProps": {},
            }
            response = httpx.post(url + path, json=body, timeout=30)
            frames = check_frames(parse_body(response.text))
            assert frames[0]["type"] == "RUN_STARTED"
            assert frames[-1]["type"] == "RUN_FINISHED"
