"""The command as a user meets it: its version, and errors that say what to do in one line."""

from __future__ import annotations

import importlib.metadata
import json
import re
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

import bridge
from bridge.serve.upstream.record import FORMAT
from servers import free_port

#: Runs the command as ``python -m bridge``, with ``mcp`` made unimportable when asked.
_WITHOUT_MCP = "import sys, runpy; sys.modules['mcp'] = None; sys.argv[0] = 'agui-bridge'; runpy.run_module('bridge', run_name='__main__')"


def _agui_bridge(
    *args: str, without_mcp: bool = False, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    command: Sequence[str] = (
        [sys.executable, "-c", _WITHOUT_MCP, *args]
        if without_mcp
        else [sys.executable, "-m", "bridge", *args]
    )
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def test_version_is_the_installed_distributions() -> None:
    assert bridge.__version__ == importlib.metadata.version("agui-bridge")
    done = _agui_bridge("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"agui-bridge {bridge.__version__}"


@pytest.mark.parametrize(
    "command",
    [
        ["demo"],
        ["serve", "--upstream-url", "http://127.0.0.1:9/v1", "--model", "m"],
        ["scripted-upstream"],
        ["replay", "RECORDING"],
    ],
    ids=["demo", "serve", "scripted-upstream", "replay"],
)
def test_a_port_in_use_is_one_line_naming_the_fix_before_anything_else(
    command: list[str], tmp_path: Path
) -> None:
    if "RECORDING" in command:  # a record of a run that asked nothing upstream
        header = {"type": "run", "format": FORMAT, "t": 0.0, "config": {"model": "m"}}
        (tmp_path / "run.jsonl").write_text(json.dumps(header) + "\n")
        command = [part.replace("RECORDING", str(tmp_path)) for part in command]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _agui_bridge(*command, "--port", str(port))
    assert done.returncode == 2
    assert done.stdout == ""  # no "open http://…" line for a server that never listened
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"port {port} on 127.0.0.1 is in use" in lines[0]
    assert "--port" in lines[0]


def test_a_host_that_is_not_this_machines_is_one_line() -> None:
    done = _agui_bridge("demo", "--host", "192.0.2.1", "--port", "0")
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot listen on 192.0.2.1" in done.stderr and "--host" in done.stderr


def test_port_0_serves_on_the_free_port_it_prints() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", "demo", "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        # The demo's send_email waits for approval: the note on the per-process secret may come first.
        first = process.stdout.readline()
        if "interrupt secret" in first:
            first = process.stdout.readline()
        found = re.search(r"open (http://127\.0\.0\.1:(\d+))/ ", first)
        assert found, first
        assert int(found.group(2)) != 0
        health = httpx.get(f"{found.group(1)}/agent/health", timeout=10)
        assert health.json() == {"status": "ok"}
    finally:
        process.terminate()
        process.wait(timeout=15)


@pytest.mark.parametrize(
    "command",
    [
        ["demo", "--mcp", "files=python server.py"],
        [
            "serve",
            "--upstream-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--mcp",
            "x=http://127.0.0.1:9/mcp",
        ],
    ],
    ids=["demo", "serve"],
)
def test_mcp_without_the_sdk_fails_reading_the_flags(command: list[str]) -> None:
    port = free_port()
    done = _agui_bridge(*command, "--port", str(port), without_mcp=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install 'agui-bridge[mcp]'" in lines[0]
    with pytest.raises(httpx.TransportError):  # it never listened
        httpx.get(f"http://127.0.0.1:{port}/agent/health", timeout=2)


def test_serve_shows_its_upstream_without_credentials() -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "bridge", "serve", "--model", "m", "--port", "0",
            "--upstream-url", "http://alice:s3cret-pass@127.0.0.1:9/v1?key=k-123",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
    finally:
        process.terminate()
        process.wait(timeout=15)
    assert "-> http://127.0.0.1:9/v1" in first
    assert "s3cret" not in first and "alice" not in first and "k-123" not in first
