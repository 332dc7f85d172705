"""``bridge.app:from_env`` (README "Deploy"): the app built from the environment, as
``agui-bridge serve`` builds it from its flags, served by uvicorn's own workers, gunicorn with
uvicorn's worker and granian, each for real: several workers on one port, runs streamed, the
metrics of the whole set in prometheus-client's multiprocess folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from bridge.cli.layers import argv_from_env
from bridge.cli.settings import config_from_env
from servers import free_port, post, run_input, serve

BIN = Path(sys.executable).parent


def test_every_serve_flag_has_its_variable() -> None:
    environ = {
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
        "AGUI_BRIDGE_MODEL": "qwen3",
        "AGUI_BRIDGE_MODELS": "a,b",
        "AGUI_BRIDGE_METRICS": "true",
        "AGUI_BRIDGE_METRICS_PUBLIC": "0",
        "AGUI_BRIDGE_MAX_TOOL_ROUNDS": "3",
        "AGUI_BRIDGE_APPROVE": "mail__*, files__write_*",
        "AGUI_BRIDGE_CORS_ORIGIN": '["https://a.example", "https://b.example"]',
        "AGUI_BRIDGE_LOG_FORMAT": "json",
    }
    # OPENAI_BASE_URL is not the bridge's variable: it stands in for the default, below a file.
    assert argv_from_env(environ) == [
        "--model=qwen3",
        "--models=a,b",
        "--max-tool-rounds=3",
        "--approve=mail__*",
        "--approve=files__write_*",
        "--cors-origin=https://a.example",
        "--cors-origin=https://b.example",
        "--metrics",
        "--log-format=json",
    ]
    config = config_from_env(environ)
    assert config.upstream_url == "http://127.0.0.1:8080/v1" and config.models == (
        "qwen3",
        "a",
        "b",
    )
    assert config.metrics and not config.metrics_public and config.max_tool_rounds == 3
    assert config.approve == ("mail__*", "files__write_*") and config.log_format == "json"
    assert config.cors_origins == ("https://a.example", "https://b.example")


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"OPENAI_BASE_URL": "http://h/v1"}, "AGUI_BRIDGE_MODEL"),
        ({"AGUI_BRIDGE_MODEL": "m"}, "OPENAI_BASE_URL"),
        (
            {"AGUI_BRIDGE_MODEL": "m", "OPENAI_BASE_URL": "h", "AGUI_BRIDGE_METRICS": "maybe"},
            "1 or 0",
        ),
        (
            {
                "AGUI_BRIDGE_MODEL": "m",
                "OPENAI_BASE_URL": "http://h/v1",
                "AGUI_BRIDGE_RETRIES": "x",
            },
            "AGUI_BRIDGE_RETRIES",
        ),
        ({"AGUI_BRIDGE_MODEL": "m", "AGUI_BRIDGE_APPROVE": "[1]"}, "AGUI_BRIDGE_APPROVE"),
    ],
)
def test_a_missing_or_wrong_variable_is_named(environ: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        config_from_env(environ)


@contextmanager
def served_by(command: list[str], port: int, environ: dict[str, str]) -> Iterator[str]:
    process = subprocess.Popen(
        command,
        env={**os.environ, **environ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its workers stop with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /health"
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _commands(port: int) -> dict[str, list[str]]:
    return {
        "uvicorn": [
            str(BIN / "uvicorn"),
            "bridge.app:from_env",
            "--factory",
            "--workers", "2",
            "--host", "127.0.0.1",
            "--port", str(port),
        ],
        "gunicorn": [
            str(BIN / "gunicorn"),
            "-k", "uvicorn_worker.UvicornWorker",
            "-w", "2",
            "-b", f"127.0.0.1:{port}",
            "bridge.app:from_env()",
        ],
        "granian": [
            str(BIN / "granian"),
            "--interface", "asgi",
            "--factory",
            "--workers", "2",
            "--host", "127.0.0.1",
            "--port", str(port),
            "bridge.app:from_env",
        ],
    }  # fmt: skip


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn", "granian"])
def test_from_env_under_another_servers_workers(server: str, tmp_path: Path) -> None:
    port = free_port()
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    with serve(create_scripted_upstream()) as upstream:
        environ = {
            "OPENAI_BASE_URL": f"{upstream}/v1",
            "AGUI_BRIDGE_MODEL": DEFAULT_SCRIPTED_MODEL,
            "AGUI_BRIDGE_METRICS": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
        with served_by(_commands(port)[server], port, environ) as url:
            runs = [post(url, run_input(threadId=f"t{i}")) for i in range(6)]
            text = httpx.get(f"{url}/metrics", timeout=10).text
    assert [frames[-1]["type"] for frames in runs] == ["RUN_FINISHED"] * 6
    reasoning = "".join(f["delta"] for f in runs[0] if f["type"] == "REASONING_MESSAGE_CONTENT")
    assert reasoning  # the whole stream came through, reasoning and all
    started = sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "agui_bridge_runs_started_total"
    )
    assert started == 6
