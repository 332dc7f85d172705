"""Replicas behind a real load balancer (README "Deploy"): two ``agui-bridge serve`` processes on
ports of their own behind Debian's nginx running ``examples/deploy/nginx.conf``. Runs stream
through it round-robin, an approval's interrupt made at one replica is resumed at the other (the
same secret, nothing shared), and when a replica is killed its runs end cut, as the official
client reports, while new runs go to the other. Real processes, real sockets; the run lines
(``--log-format json``) say which replica served what. And ``examples/deploy/agui-bridge.service``:
its command serves and stops as the unit says."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_rules import check_frames, parse_body
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from nginx_server import Nginx, nginx, require_nginx
from node_tools import npm_install, require_node
from servers import messages_from, run_input, serve

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "tests" / "node"
MCP_SERVER = f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}"
#: What every replica is given, as a deployment gives them all one environment file.
ENVIRONMENT = {
    "AGUI_BRIDGE_SECRET": "load-balancer-secret-Qx7Vb2Kp9Lm4",
    "AGUI_BRIDGE_AUTH_TOKEN": "load-balancer-token-Zt5Rw8Hn3Jc1",
}
AUTHORIZATION = {"Authorization": f"Bearer {ENVIRONMENT['AGUI_BRIDGE_AUTH_TOKEN']}"}
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


@dataclass
class Replica:
    process: subprocess.Popen[str]
    address: str = ""
    stderr: list[str] = field(default_factory=list)

    def run_lines(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for line in self.stderr
            if line.startswith("{") and '"event":"run"' in line.replace(" ", "")
        ]


@contextmanager
def replicas(upstream: str, count: int, *flags: str) -> Iterator[list[Replica]]:
    """``count`` bridges on free ports of their own, started at once, with one environment."""
    command = [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", f"{upstream}/v1",
        "--model", DEFAULT_SCRIPTED_MODEL, "--port", "0", "--log-format", "json", *flags,
    ]  # fmt: skip
    with started([command] * count, ENVIRONMENT) as made:
        yield made


@contextmanager
def started(commands: list[list[str]], environment: dict[str, str]) -> Iterator[list[Replica]]:
    """A bridge per ``agui-bridge serve`` command, started at once; yields once each serves,
    SIGTERM to those still running at the end."""
    made: list[Replica] = []
    readers: list[threading.Thread] = []
    try:
        for command in commands:
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **environment},
            )
            made.append(replica := Replica(process))
            stderr = process.stderr
            readers.append(threading.Thread(target=lambda r=replica, s=stderr: r.stderr.extend(s)))
            readers[-1].start()
        for replica in made:
            assert replica.process.stdout is not None
            opened = replica.process.stdout.readline()
            found = re.search(r"open http://([\d.]+:\d+)/ ", opened)
            assert found, (opened, replica.stderr)
            replica.address = found.group(1)
            # The rest of stdout (uvicorn's access log) read as it comes: a pipe left full
            # stops the bridge's event loop in its next log line.
            readers.append(threading.Thread(target=lambda s=replica.process.stdout: s.read()))
            readers[-1].start()
        yield made
    finally:
        for replica in made:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in made:
            replica.process.wait(timeout=60)
        for reader in readers:
            reader.join(timeout=10)


@contextmanager
def balanced(folder: Path, *flags: str, pace: float = 0.0) -> Iterator[tuple[Nginx, list[Replica]]]:
    """A scripted upstream, two replicas in front of it, nginx in front of them."""
    require_nginx()  # skipped (or failed under $CI) before anything starts
    with ExitStack() as stack:
        upstream = stack.enter_context(serve(create_scripted_upstream(pace=pace)))
        made = stack.enter_context(replicas(upstream, 2, *flags))
        balancer = stack.enter_context(nginx(folder, [replica.address for replica in made]))
        yield balancer, made


def post(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(f"{url}/agent", json=body, headers=AUTHORIZATION, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return check_frames(parse_body(response.text))


def served_by(
    made: list[Replica], threads: set[str], runs: int = 1
) -> dict[str, list[tuple[int, str]]]:
    """Per thread, each of its runs' (index of the replica that served it, outcome), once each of
    ``threads`` has ``runs`` run lines (a run's line follows its stream's end)."""
    deadline = time.monotonic() + 15
    while True:
        served: dict[str, list[tuple[int, str]]] = {}
        for index, replica in enumerate(made):
            for line in replica.run_lines():
                served.setdefault(line["thread"], []).append((index, line["outcome"]))
        done = all(len(served.get(thread, ())) >= runs for thread in threads)
        if done or time.monotonic() > deadline:
            return served
        time.sleep(0.05)


@pytest.fixture(scope="module")
def approving(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Nginx, list[Replica]]]:
    """Replicas with the clock MCP server's tools, every call of them waiting for approval."""
    flags = ("--mcp", f"clock={MCP_SERVER}", "--approve", "clock__*", "--connect-timeout", "60")
    with balanced(tmp_path_factory.mktemp("nginx"), *flags) as both:
        yield both


def test_runs_stream_through_nginx_round_robin(approving: tuple[Nginx, list[Replica]]) -> None:
    balancer, made = approving
    bodies = [run_input(threadId=f"round-robin-{i}") for i in range(6)]
    for body in bodies:
        frames = post(balancer.url, body)
        assert frames[-1]["type"] == "RUN_FINISHED", frames[-1]
    served = served_by(made, {body["threadId"] for body in bodies})
    order = [served[body["threadId"]] for body in bodies]
    assert order in (
        [[(0, "finished")], [(1, "finished")]] * 3,
        [[(1, "finished")], [(0, "finished")]] * 3,
    ), (order, balancer.access_log())

    # Authorization reaches the replicas as it came (the runs above needed it) …
    refused = httpx.post(f"{balancer.url}/agent", json=run_input(), timeout=30)
    assert refused.status_code == 401 and "unauthorized" in refused.text
    # … a history past nginx's default 1 MiB limit goes through …
    long = [{"id": "u", "role": "user", "content": "Hi " + "x" * 2_000_000}]
    assert post(balancer.url, run_input(long))[-1]["type"] == "RUN_FINISHED"
    # … and one replica's metrics are not served as if they were the whole set's.
    assert httpx.get(f"{balancer.url}/agent/metrics", timeout=10).status_code == 404


def test_an_interrupt_made_at_one_replica_is_resumed_at_the_other(
    approving: tuple[Nginx, list[Replica]],
) -> None:
    balancer, made = approving
    ask = [{"id": "u1", "role": "user", "content": "What time is it?"}]
    first = run_input(ask, threadId="approval")
    frames = post(balancer.url, first)
    [interrupt] = frames[-1]["outcome"]["interrupts"]
    answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    again = run_input(
        [*ask, *messages_from(frames)],
        threadId=first["threadId"],
        runId=first["runId"],
        resume=[answer],
    )
    resumed = post(balancer.url, again)
    assert resumed[-1]["type"] == "RUN_FINISHED", resumed[-1]
    results = [f for f in resumed if f["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == [interrupt["toolCallId"]]
    lines = sorted(served_by(made, {"approval"}, runs=2)["approval"])
    assert lines in ([(0, "interrupted"), (1, "finished")], [(0, "finished"), (1, "interrupted")])


def test_a_killed_replicas_runs_end_cut_and_new_runs_go_to_the_other(tmp_path: Path) -> None:
    """Two runs stream at once, one through each replica, and one replica is killed (SIGKILL: no
    drain): the official client reports its run failed, with neither RUN_FINISHED nor RUN_ERROR;
    the other run finishes; new runs succeed, nginx taking the one it sent to the dead replica to
    the other."""
    why = "the cut run is reported by the official AG-UI client (@ag-ui/client)"
    node = require_node(why)
    npm_install(NODE_DIR, NODE_DIR / "node_modules" / "ag-ui-client-1.0.0" / "package.json", why)
    threads = ["held-0", "held-1"]
    after = [run_input(threadId=f"after-{i}") for i in range(4)]
    with balanced(tmp_path / "nginx", pace=0.01) as (balancer, made):
        output = killed_while_streaming(node, balancer.url, threads, made[0])
        reports = {report["threadId"]: report for report in json.loads(output)["reports"]}
        finished = [t for t in threads if reports[t]["types"][-1:] == ["RUN_FINISHED"]]
        assert len(finished) == 1, (output, balancer.error_log())
        with ThreadPoolExecutor(len(after)) as pool:
            ends = [frames[-1]["type"] for frames in pool.map(partial(post, balancer.url), after)]
        assert ends == ["RUN_FINISHED"] * len(after)
        served = served_by(made, {finished[0], *(body["threadId"] for body in after)})
        log = [*balancer.access_log(), balancer.error_log()]

    [cut] = set(threads) - set(finished)
    report = reports[cut]
    assert report["types"][0] == "RUN_STARTED" and not TERMINAL & set(report["types"]), report
    assert report["failed"] and report["rejected"], report
    # Only the replica left wrote run lines: the finished run, then every run after the kill …
    assert served == {
        thread: [(1, "finished")] for thread in [*finished, *(b["threadId"] for b in after)]
    }, log
    # … one of which nginx sent to the dead replica first (refused: nothing was sent).
    dead, alive = (replica.address for replica in made)
    assert any(f"upstream={dead}, {alive}" in line for line in log), log


def killed_while_streaming(node: str, url: str, threads: list[str], victim: Replica) -> str:
    """``tests/node/cut_stream.mjs``'s runs through ``url``, ``victim`` killed while they
    stream; the client's report (a JSON line)."""
    client = subprocess.Popen(
        [node, "cut_stream.mjs"],
        cwd=NODE_DIR,
        env={
            **os.environ,
            "AGUI_BRIDGE_URL": f"{url}/agent",
            "AGUI_TOKEN": ENVIRONMENT["AGUI_BRIDGE_AUTH_TOKEN"],
            "AGUI_THREADS": ",".join(threads),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the client logs the failed run to stderr
        text=True,
    )
    watchdog = threading.Timer(60, client.kill)
    watchdog.start()
    try:
        assert client.stdout is not None
        started = client.stdout.readline()
        assert started == "streaming\n", started + client.stdout.read()
        # Every run streams through nginx (each takes about a second at this pace: had nginx
        # held the events back, none would be here yet), one per replica: the victim dies with
        # one of them.
        victim.process.send_signal(signal.SIGKILL)
        output = client.stdout.read()
        assert client.wait(timeout=60) == 0, output
    finally:
        watchdog.cancel()
        if client.poll() is None:
            client.kill()
            client.wait(timeout=10)
    assert victim.process.wait(timeout=10) == -signal.SIGKILL
    return output.splitlines()[-1]


UNIT = ROOT / "examples" / "deploy" / "agui-bridge.service"


def unit_settings() -> dict[str, str]:
    """``[Service]``'s settings in the example unit (each key once)."""
    section, settings = "", {}
    for line in UNIT.read_text().splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


def test_the_systemd_units_command_serves_and_stops_on_its_kill_signal() -> None:
    """The unit's ExecStart (the venv's ``agui-bridge`` as ``python -m bridge``, the model the
    scripted one's, a free port), with the variables its comment says the environment file holds,
    serves runs, and stops on KillSignal within TimeoutStopSec."""
    settings = unit_settings()
    program, *arguments = shlex.split(settings["ExecStart"])
    assert program.endswith("/bin/agui-bridge") and arguments[0] == "serve", program
    for flag, value in (("--port", "0"), ("--model", DEFAULT_SCRIPTED_MODEL)):
        arguments[arguments.index(flag) + 1] = value
    with serve(create_scripted_upstream()) as upstream:
        environment = {
            **ENVIRONMENT,
            "OPENAI_BASE_URL": f"{upstream}/v1",
            "AGUI_BRIDGE_WORKERS": "2",
        }
        for name in environment:
            assert f"#   {name}=" in UNIT.read_text(), f"the unit does not say to set {name}"
        with started([[sys.executable, "-m", "bridge", *arguments]], environment) as [bridge]:
            assert post(f"http://{bridge.address}", run_input())[-1]["type"] == "RUN_FINISHED"
            bridge.process.send_signal(getattr(signal, settings["KillSignal"]))
            assert bridge.process.wait(timeout=float(settings["TimeoutStopSec"])) == 0
    assert [line["outcome"] for line in bridge.run_lines()] == ["finished"]


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """Its paths (the program, the environment file) made real ones here."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze to check examples/deploy/agui-bridge.service with")
    program = shutil.which("agui-bridge", path=str(Path(sys.executable).parent))
    assert program, "agui-bridge is not installed beside this Python"
    (tmp_path / "env").write_text("")
    text = UNIT.read_text()
    text = text.replace("/opt/agui-bridge/bin/agui-bridge", program)
    text = text.replace("EnvironmentFile=/etc/agui-bridge/env", f"EnvironmentFile={tmp_path}/env")
    (tmp_path / UNIT.name).write_text(text)
    done = subprocess.run(
        [analyze, "verify", str(tmp_path / UNIT.name)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
