"""Peers for ``test_hostile_config_file.py``: ``agui-bridge`` as a process (its own
environment, its own working directory), and the text of a module of Python tools that a test
writes to a temporary folder."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: A module of tools as an operator writes one: two plain functions, one waiting for approval,
#: and a helper the module does not serve (not in ``__all__``).
TOOLS_MODULE = '''
from bridge import requires_approval

__all__ = ["get_weather", "delete_file"]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, says the module"


@requires_approval
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def helper() -> str:
    return "not a tool"
'''


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without any of the bridge's variables, and ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGUI_BRIDGE_", "OTEL_", "OPENAI_"))
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def command(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``agui-bridge ARGS`` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=cwd, env=env,
    )  # fmt: skip


@dataclass
class Running:
    url: str
    process: subprocess.Popen[str]
    opened: str = ""
    stderr: list[str] = field(default_factory=list)


@contextmanager
def serving(*args: str, cwd: Path, env: dict[str, str]) -> Iterator[Running]:
    """``agui-bridge serve ARGS --port 0`` until it says where it serves; SIGTERM after."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", "serve", *args, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    err = process.stderr
    running = Running("", process)
    reader = threading.Thread(target=lambda: running.stderr.append(err.read()))
    reader.start()
    try:
        opened = process.stdout.readline()
        found = re.search(r"open (http://[\d.]+:\d+)/ ", opened)
        assert found, (opened, running.stderr)
        running.url, running.opened = found.group(1), opened
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)
