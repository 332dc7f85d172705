"""A real nginx for the tests: Debian's ``nginx`` (``.ci/run`` installs it) running
``examples/deploy/nginx.conf``, the file users copy, with its listen port and its replicas'
addresses replaced; everything else nginx writes (pid, logs, temporary files) goes to the test's
folder.

Not the apt package's service: each test starts its own server as the current user and stops
it when done.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from node_tools import require_installed
from servers import free_port

ROOT = Path(__file__).resolve().parent.parent
#: The load balancer's config users copy (an http-context file), and so the one tested.
NGINX_CONF = ROOT / "examples" / "deploy" / "nginx.conf"
#: What the tests that start one say when there is none.
WHY = (
    "no nginx found (neither `nginx` on PATH nor /usr/sbin/nginx): the load balancer test runs "
    "the bridge's replicas behind a real one. Debian/Ubuntu: apt-get install nginx "
    "(`.ci/run` does)"
)

#: The main config around the example: what a distribution's /etc/nginx/nginx.conf gives it,
#: with every path in the test's folder. ``$upstream_addr`` in the access log, and in the
#: ``X-Replica`` header of every answer, names the replica that answered.
MAIN_CONF = """\
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
{user}
events {{
    worker_connections 256;
}}
http {{
    log_format balanced '$request $status upstream=$upstream_addr';
    access_log {folder}/access.log balanced;
    add_header X-Replica $upstream_addr always;
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    include {folder}/agui-bridge.conf;
}}
"""


def require_nginx() -> str:
    """The ``nginx`` program (skipped without it; a failure in CI)."""
    return require_installed("nginx", "/usr/sbin/nginx", WHY)


def balanced_conf(listen_port: int, backends: Sequence[str]) -> str:
    """``examples/deploy/nginx.conf`` listening on 127.0.0.1:``listen_port`` in front of
    ``backends`` (host:port each), one ``server`` line per backend."""
    replicas = re.compile(r"^( *)server 127\.0\.0\.1:\d+;\n(?:\1server 127\.0\.0\.1:\d+;\n)*", re.M)
    text, blocks = replicas.subn(
        lambda found: "".join(f"{found[1]}server {backend};\n" for backend in backends),
        NGINX_CONF.read_text(),
    )
    assert blocks == 1, "examples/deploy/nginx.conf should list its replicas as server lines"
    text, listens = re.subn(
        r"^( *)listen \d+;", rf"\1listen 127.0.0.1:{listen_port};", text, flags=re.MULTILINE
    )
    assert listens == 1, "examples/deploy/nginx.conf should have one `listen PORT;`"
    return text


@dataclass
class Nginx:
    url: str
    folder: Path

    def access_log(self) -> list[str]:
        """One line per request served: ``POST /agent HTTP/1.1 200 upstream=127.0.0.1:…``."""
        path = self.folder / "access.log"
        return path.read_text().splitlines() if path.exists() else []

    def error_log(self) -> str:
        path = self.folder / "error.log"
        return path.read_text() if path.exists() else ""


@contextmanager
def nginx(folder: Path, backends: Sequence[str]) -> Iterator[Nginx]:
    """nginx balancing ``backends`` with the example config; yields once it answers."""
    program = require_nginx()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (folder / "agui-bridge.conf").write_text(balanced_conf(port, backends))
    # Started as root, nginx's workers would become `nobody` and could not write here.
    user = "user root;" if os.geteuid() == 0 else ""
    (folder / "nginx.conf").write_text(MAIN_CONF.format(folder=folder, user=user))
    process = subprocess.Popen(
        [program, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-e", "error.log"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    made = Nginx(f"http://127.0.0.1:{port}", folder)
    try:
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                stderr = process.stderr.read() if process.stderr else ""
                pytest.fail(f"nginx exited: {stderr}\n{made.error_log()}", pytrace=False)
            try:
                if httpx.get(f"{made.url}/agent/health", timeout=2).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"nginx did not answer: {made.error_log()}"
            time.sleep(0.05)
        yield made
    finally:
        if process.poll() is None:
            process.terminate()  # nginx's fast stop: open connections are closed
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()
