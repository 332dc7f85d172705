"""A real Redis for the tests: Debian's ``redis-server`` (``.ci/run`` installs it) on 127.0.0.1
and a free port, with no persistence, started and stopped by the test (a module's fixture, or
by hand to take it away mid-test and bring it back on the same port).

Not the apt package's service: each test module starts its own server.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from node_tools import require_installed, stop
from servers import free_port

WHY = (
    "no redis-server found (neither on PATH nor /usr/bin/redis-server): the approval store "
    "tests run a real one. Debian/Ubuntu: apt-get install redis-server (`.ci/run` does)"
)


class RedisServer:
    """One ``redis-server`` on loopback; ``url`` names it (with the ``password`` it requires,
    if any), ``stop()`` and ``start()`` take it away and bring it back on the same port (empty:
    nothing is saved)."""

    def __init__(self, folder: Path, *, password: str | None = None) -> None:
        self.program = require_installed("redis-server", "/usr/bin/redis-server", WHY)
        self.folder = folder
        self.port = free_port()
        self.password = password
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.folder / f"redis-{self.port}.log").open("ab")
        command = [self.program, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        if self.password:
            command += ["--requirepass", self.password]
        self._process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {log.name}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._process is not None:
            stop(self._process)
            self._process = None

    def __enter__(self) -> RedisServer:
        """Started for the block, stopped after it (``with RedisServer(folder) as redis``)."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                if self.password:
                    sock.sendall(f"AUTH {self.password}\r\n".encode())
                    sock.recv(64)
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False
