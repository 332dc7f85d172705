"""An upstream that writes back to back, forever, on both upstream transports: the bridge still
serves everyone else, and a client that leaves (or a SIGTERM) ends the run and the upstream
request. The bridge runs as its own process, so its CPU time can be read."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agui_rules import parse_body
from servers import run_input

HERE = Path(__file__).resolve().parent
TRANSPORTS = ["aiohttp", "httpx"]
#: Long enough that a bridge which never lets go is caught, far longer than a working one needs.
DEADLINE = 5.0


@contextmanager
def _process(command: list[str], pattern: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A process whose first line matches ``pattern``; yields it and the match's group 1."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(pattern, first)
        assert found, first + (process.stdout.read() if process.poll() is not None else "")
        threading.Thread(target=process.stdout.read, daemon=True).start()  # drain the log
        yield process, found.group(1)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=15)


@contextmanager
def _firehose() -> Iterator[str]:
    with _process([sys.executable, str(HERE / "firehose_upstream.py")], r"port (\d+)") as (_, port):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def _bridge(
    upstream: str, transport: str, *extra: str
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    command = [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", f"{upstream}/v1",
        "--model", "firehose", "--models", "paced", "--upstream-transport", transport,
        "--port", "0", "--log-level", "warning", *extra,
    ]  # fmt: skip
    with _process(command, r"open (http://127\.0\.0\.1:\d+)/ ") as (process, url):
        yield process, f"{url}/agent"


def _open_streams(upstream: str) -> int:
    return int(httpx.get(f"{upstream}/status", timeout=5).json()["open"])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _firehose_run(agent: str, seen: threading.Event, stop: threading.Event) -> None:
    """Reads a firehose run as fast as it comes until ``stop``; ``seen`` once it streams."""
    with httpx.stream("POST", agent, json=run_input(), timeout=30) as response:
        count = 0
        for line in response.iter_lines():
            count += "REASONING_MESSAGE_CONTENT" in line
            if count >= 50:
                seen.set()
            if stop.is_set():
                return


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc")
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_firehose_starves_no_one_and_ends_when_its_client_leaves(transport: str) -> None:
    with _firehose() as upstream, _bridge(upstream, transport) as (bridge, agent):
        seen, stop = threading.Event(), threading.Event()
        reader = threading.Thread(target=_firehose_run, args=(agent, seen, stop))
        reader.start()
        try:
            assert seen.wait(DEADLINE), "the firehose run did not stream"
            # While it runs, the process serves a health check and a paced run to its end.
            health = httpx.get(f"{agent}/health", timeout=DEADLINE)
            assert health.json() == {"status": "ok"}
            paced = httpx.post(
                agent, json=run_input(forwardedProps={"model": "paced"}), timeout=DEADLINE * 4
            )
            frames = parse_body(paced.text)
            assert frames[-1]["type"] == "RUN_FINISHED"
            text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
            assert text == "".join(f"{n} " for n in range(100))
            assert _open_streams(upstream) == 1  # the paced one ended; the firehose goes on
        finally:
            stop.set()
            reader.join(DEADLINE)
        assert not reader.is_alive()

        # The client left: the upstream connection is closed and the bridge goes idle.
        deadline = time.monotonic() + DEADLINE
        while _open_streams(upstream) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _open_streams(upstream) == 0, "the bridge still reads the upstream for nobody"
        before = _cpu_seconds(bridge.pid)
        time.sleep(1.0)
        assert _cpu_seconds(bridge.pid) - before < 0.2, "the bridge still burns CPU"
        assert httpx.get(f"{agent}/health", timeout=DEADLINE).status_code == 200


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sigterm_grace_holds_against_a_firehose_with_server_tools(transport: str) -> None:
    mcp = f"clock={sys.executable} {HERE.parent / 'examples' / 'mcp_server.py'}"
    with (
        _firehose() as upstream,
        _bridge(upstream, transport, "--shutdown-grace", "1", "--mcp", mcp) as (bridge, agent),
    ):
        with httpx.stream("POST", agent, json=run_input(), timeout=30) as response:
            lines = response.iter_lines()
            assert "RUN_STARTED" in next(line for line in lines if line)
            assert "REASONING_MESSAGE_CONTENT" in next(
                line for line in lines if "REASONING_MESSAGE_CONTENT" in line
            )
            bridge.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            last = ""
            for line in lines:
                if line.startswith("data:"):
                    last = line
        frame = json.loads(last[5:])
        assert (frame["type"], frame["code"]) == ("RUN_ERROR", "shutting_down")
        assert bridge.wait(timeout=DEADLINE * 2) in (0, -signal.SIGTERM)
        assert time.monotonic() - signalled < DEADLINE * 2
        deadline = time.monotonic() + DEADLINE
        while _open_streams(upstream) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _open_streams(upstream) == 0
