"""The CopilotKit example (``examples/copilotkit``) for the tests that drive it: built when its
sources are newer than its build, its server (``server.mjs``, what ``npm start`` runs) started
in front of a bridge, and how a test reads the upstream requests of its conversations."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from node_tools import npm_install, require, require_chromium, require_node, run, stop

WHY = "the CopilotKit test needs Node.js 20 or newer with npm, and Chromium"
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "copilotkit"
BROWSER_TESTS = ROOT / "tests" / "browser"
ARTIFACTS = ROOT / "tests" / "artifacts"
#: What the example is built from: a change to any of them rebuilds it.
EXAMPLE_SOURCES = ("src", "index.html", "build.mjs", "package-lock.json")


def question(request: dict[str, Any]) -> str:
    """The first user message's text: which case a request belongs to."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def roles(request: dict[str, Any]) -> list[str]:
    return [m["role"] for m in request["messages"] if m["role"] not in ("system", "developer")]


#: What turns CopilotKit's usage telemetry off (its runtime reads either).
_TELEMETRY_VARIABLES = ("COPILOTKIT_TELEMETRY_DISABLED", "DO_NOT_TRACK")


@contextmanager
def example_server(bridge_url: str, port: int, **settings: str) -> Iterator[None]:
    """The example's server (``server.mjs``, what ``npm start`` runs) on ``port``, its agent the
    bridge at ``bridge_url``, with ``settings`` in its environment. CopilotKit's telemetry
    variables are left as the example sets them (off) unless ``settings`` names them."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in _TELEMETRY_VARIABLES},
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "AGUI_BRIDGE_URL": f"{bridge_url}/",
        **settings,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / "copilotkit-server.log").open("w+b") as log:
        process = subprocess.Popen(
            [require_node(WHY), "server.mjs"],
            cwd=EXAMPLE,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(
                        f"the example's server did not start:\n{log.read().decode()}",
                        pytrace=False,
                    )
                try:
                    info = httpx.get(f"http://127.0.0.1:{port}/api/copilotkit/info", timeout=1)
                    if info.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            yield
        finally:
            stop(process)
            log.seek(0)
            if b"Error" in log.read():
                log.seek(0)
                pytest.fail(
                    f"the example's server logged an error:\n{log.read().decode()}", pytrace=False
                )


def build_example() -> None:
    """Builds examples/copilotkit/dist when it is missing or older than what it is built from."""
    built = EXAMPLE / "dist" / "index.html"
    sources = [
        file
        for name in EXAMPLE_SOURCES
        for file in (
            [EXAMPLE / name] if (EXAMPLE / name).is_file() else (EXAMPLE / name).rglob("*")
        )
        if file.is_file()
    ]
    if built.is_file() and max(f.stat().st_mtime for f in sources) <= built.stat().st_mtime:
        return
    npm_install_example(EXAMPLE, EXAMPLE / "node_modules" / "esbuild" / "package.json")
    npm = require("npm", WHY)
    run([npm, "run", "build"], cwd=EXAMPLE, env=None, timeout=300, what="npm run build")


def npm_install_example(directory: Path, marker: Path) -> None:
    npm_install(directory, marker, WHY)


def ready_for_chromium() -> str:
    """What a test of the example in Chromium needs: Node (its program, returned), Chromium,
    the example built and Playwright installed."""
    node = require_node(WHY)
    require_chromium()
    build_example()
    npm_install_example(
        BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json"
    )
    return node
