"""The operator's own request fields (issue 57, point 4): ``--upstream-body JSON`` (a TOML table
in the config file; per agent) merged into every request upstream, the fields the bridge makes
refused at start, a client's allowed ``forwardedProps`` over them. Real ``agui-bridge``
processes and a real scripted upstream."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_load_balancer import started

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from servers import post, run_input, serve

THINKING = {
    "enable_thinking": True,
    "extra_body": {"google": {"thinking_config": {"include_thoughts": True}}},
}


class _Recorded:
    """The scripted upstream, and every request body it took."""

    def __init__(self) -> None:
        self.app = create_scripted_upstream()
        self.requests: list[dict[str, Any]] = self.app.state.requests


def _serve_command(upstream: str, *flags: str) -> list[str]:
    return [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", f"{upstream}/v1",
        "--model", DEFAULT_SCRIPTED_MODEL, "--port", "0", "--log-format", "json", *flags,
    ]  # fmt: skip


def test_the_operators_fields_reach_every_request_of_a_run_from_the_flag() -> None:
    upstream = _Recorded()
    with serve(upstream.app) as url:
        command = _serve_command(
            url, "--upstream-body", json.dumps({**THINKING, "temperature": 0.1})
        )
        with started([command], {}) as made:
            bridge = f"http://{made[0].address}/agent/"
            ask = run_input([{"id": "u", "role": "user", "content": "Why is the sky blue?"}])
            assert post(bridge, ask)[-1]["type"] == "RUN_FINISHED"
            # A client's allowed parameter goes over the operator's.
            warmer = run_input(
                [{"id": "u", "role": "user", "content": "Why?"}],
                forwardedProps={"temperature": 0.9},
            )
            assert post(bridge, warmer)[-1]["type"] == "RUN_FINISHED"
    first, second = upstream.requests[-2:]
    for request in (first, second):
        assert request["enable_thinking"] is True
        assert request["extra_body"] == THINKING["extra_body"]
        assert request["model"] == DEFAULT_SCRIPTED_MODEL and request["stream"] is True
    assert first["temperature"] == 0.1 and second["temperature"] == 0.9


def test_a_server_tool_loops_second_request_carries_them_too() -> None:
    upstream = _Recorded()

    def get_time() -> str:
        """The current time."""
        return "12:00"

    with serve(upstream.app) as url:
        config = BridgeConfig(
            upstream_url=f"{url}/v1", model=DEFAULT_SCRIPTED_MODEL, upstream_body=THINKING
        )
        with serve(create_app(config, tools=[get_time])) as bridge:
            frames = post(
                f"{bridge}/",
                run_input([{"id": "u", "role": "user", "content": "What time is it?"}]),
            )
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert len(upstream.requests) == 2
    assert all(r["enable_thinking"] is True for r in upstream.requests)


def test_a_config_files_table_per_agent(tmp_path: Path) -> None:
    upstream = _Recorded()
    with serve(upstream.app) as url:
        config = tmp_path / "bridge.toml"
        config.write_text(
            f'upstream-url = "{url}/v1"\n'
            f'model = "{DEFAULT_SCRIPTED_MODEL}"\n'
            "[upstream-body]\n"
            "enable_thinking = true\n"
            "[agents.plain]\n"
            "[agents.thinking.upstream-body]\n"
            "reasoning_split = true\n"
        )
        command = [sys.executable, "-m", "bridge", "serve", "--config", str(config), "--port", "0"]
        with started([command], {}) as made:
            base = f"http://{made[0].address}"
            ask = run_input([{"id": "u", "role": "user", "content": "Hi"}])
            assert post(f"{base}/plain/", ask)[-1]["type"] == "RUN_FINISHED"
            assert post(f"{base}/thinking/", ask)[-1]["type"] == "RUN_FINISHED"
    plain, thinking = upstream.requests[-2:]
    assert plain["enable_thinking"] is True and "reasoning_split" not in plain
    # An agent's table replaces the file's (as every key of an agent's table does).
    assert thinking["reasoning_split"] is True and "enable_thinking" not in thinking


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ('{"model": "other"}', "sets model: the bridge makes that field itself"),
        (
            '{"messages": [], "stream": false}',
            "sets messages, stream: the bridge makes those fields",
        ),
        ("[1, 2]", "--upstream-body must be a JSON object"),
        ("{not json", "--upstream-body is not JSON"),
        (json.dumps({"x": "y" * 70_000}), "is over 65536 bytes"),
    ],
)
def test_a_body_the_bridge_cannot_send_stops_the_start_with_one_line(given: str, said: str) -> None:
    done = subprocess.run(
        _serve_command("http://127.0.0.1:9", "--upstream-body", given),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr
