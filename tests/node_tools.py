"""Running Node programs from pytest: a missing tool fails the test (never a skip), and a failing
program fails it with its whole output."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest


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


#: Debian's Chromium, which the browser tests drive (``.ci/run`` installs it).
CHROMIUM = Path("/usr/bin/chromium")


def require_chromium() -> Path:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests drive Debian's Chromium "
            "(`.ci/run` installs it with apt; by hand: apt-get install chromium)",
            pytrace=False,
        )
    return CHROMIUM
