"""Running Node programs from pytest: a missing tool fails the test (never a skip), and a failing
program fails it with its whole output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest


def require_installed(program: str, fallback: str, why: str) -> str:
    """A program the suite needs from the system's packages (``prometheus``, ``nginx``): on
    PATH or at ``fallback``; where there is none the test is skipped, or fails when ``$CI`` is
    set (a CI machine must have it, as it must have Chromium; ``.ci/run`` installs them)."""
    found = shutil.which(program) or fallback
    if os.access(found, os.X_OK):
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{why}; $CI is set, so this is a failure, not a skip", pytrace=False)
    pytest.skip(why)


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if it is not gone within 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


def require(program: str, why: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"{program} is not on PATH: {why}", pytrace=False)
    return path


def run(
    command: Sequence[str], *, cwd: Path, env: dict[str, str] | None, timeout: float, what: str
) -> str:
    """Run ``command``; its combined output, or a test failure showing it."""
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        partial = (exc.output or b"").decode(errors="replace")  # always bytes here
        pytest.fail(f"{what} did not finish within {timeout} s:\n{partial}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"{what} exited with {done.returncode}:\n{done.stdout}", pytrace=False)
    return done.stdout


def check_tap(output: str, what: str, passes: int | None = None) -> None:
    """The TAP summary of ``node --test``, not only its exit code (a file that defines no test
    exits 0 too): nothing failed, cancelled or skipped, and ``passes`` tests passed (at least one
    when ``None``)."""
    for line in ("# fail 0", "# cancelled 0", "# skipped 0"):
        if not re.search(rf"^{line}$", output, re.MULTILINE):
            pytest.fail(f"{what} did not report {line!r}:\n{output}", pytrace=False)
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    count = int(passed.group(1)) if passed else 0
    if count < 1 or (passes is not None and count != passes):
        pytest.fail(f"{what} passed {count} tests, not {passes or 'any'}:\n{output}", pytrace=False)


def require_node(why: str) -> str:
    """The ``node`` program, version 20 or newer (a test failure otherwise)."""
    node = require("node", why)
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    if int(version.stdout.strip().lstrip("v").split(".")[0]) < 20:
        pytest.fail(f"Node.js 20 or newer is needed, not {version.stdout}: {why}", pytrace=False)
    return node


def npm_install(directory: Path, marker: Path, why: str) -> None:
    """``npm ci`` in ``directory`` unless ``marker`` (a file npm installs) is there already."""
    if marker.is_file():
        return
    npm = require("npm", why)
    run([npm, "ci", "--no-audit", "--no-fund"], cwd=directory, env=None, timeout=600, what="npm ci")


#: Chromium's names on PATH, in the order tried.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Where a Playwright install keeps its own Chromium (``npx playwright install chromium``), per
#: platform, under its browsers folder.
PLAYWRIGHT_CHROMIUMS = (
    "chromium-*/chrome-linux*/chrome",
    "chromium-*/chrome-mac*/Chromium.app/Contents/MacOS/Chromium",
    "chromium-*/chrome-mac*/Google Chrome for Testing.app/Contents/MacOS/Google Chrome for Testing",
    "chromium_headless_shell-*/chrome-*/headless_shell",
    "chromium_headless_shell-*/chrome-*/chrome-headless-shell",
)


def find_chromium() -> Path | None:
    """The Chromium to drive: ``$CHROMIUM``, then one on PATH, then Playwright's own."""
    if os.environ.get("CHROMIUM"):
        return Path(os.environ["CHROMIUM"])
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    folders = [os.environ.get("PLAYWRIGHT_BROWSERS_PATH", "")]
    home = Path.home()
    folders += [
        str(home / ".cache" / "ms-playwright"),
        str(home / "Library" / "Caches" / "ms-playwright"),
    ]
    for folder in filter(None, folders):
        for pattern in PLAYWRIGHT_CHROMIUMS:
            for candidate in sorted(Path(folder).glob(pattern), reverse=True):
                if os.access(candidate, os.X_OK):
                    return candidate
    return None


def require_chromium() -> Path:
    """The Chromium found, also set as ``$CHROMIUM`` for the Node tests that launch it (a test
    failure naming the ways to provide one otherwise)."""
    found = find_chromium()
    if found is None or not found.is_file():
        pytest.fail(
            f"no Chromium found ({'$CHROMIUM is ' + str(found) if found else 'none on PATH'}): "
            "the browser tests need one. Debian/Ubuntu: apt-get install chromium (`.ci/run` does); "
            "macOS: brew install --cask chromium; anywhere: npx playwright install chromium; "
            "or set CHROMIUM=/path/to/chrome",
            pytrace=False,
        )
    os.environ["CHROMIUM"] = str(found)
    return found


#: The official clients' folder (``tests/node``: ``run_agent.mjs``, ``client.test.mjs``).
NODE_DIR = Path(__file__).resolve().parent / "node"


def official(runs: Sequence[dict[str, Any]], *, client: str = "1.0.0") -> list[dict[str, Any]]:
    """The runs, at once, through the official client (``tests/node/run_agent.mjs``): per run the
    events its subscriber saw, its messages and state at the end, ``failed`` (onRunFailed) and
    ``rejected``. Anything the client logged as a warning or error fails the test."""
    node = require_node("the live tests judge the events with the official AG-UI client")
    npm_install(
        NODE_DIR,
        NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json",
        "the official AG-UI client",
    )
    spec = {"client": client, "runs": list(runs)}
    try:
        done = subprocess.run(
            [node, "run_agent.mjs"],
            cwd=NODE_DIR,
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the official client did not finish within 300 s: {exc.stderr}")
    if done.returncode != 0:
        pytest.fail(f"the official client exited with {done.returncode}:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["logged"] == [], f"the official client complained: {result['logged']}"
    reports: list[dict[str, Any]] = result["reports"]
    return reports
