"""What the HTTP benchmarks share: servers in their own processes, /proc readings, the report.

Every server is ``python -m uvicorn apps:<factory> --factory`` in a new process group (so a
``--workers N`` supervisor and its workers go together), on a free port of 127.0.0.1, and is
stopped in ``finally`` (SIGTERM to the group, SIGKILL if it lingers).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import IO, Any, TypeVar

import httpx
from translate import machine as _translate_machine

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
CORES_NOTE = (
    "{cores} cores: client, bridge/proxy and upstream share them (and so does any other work "
    "on the machine), so these figures are a floor for a real deployment, and noisy"
)
T = TypeVar("T")
_PACKAGES = (
    "httpx", "httpx-sse", "uvicorn", "starlette", "uvloop", "httptools", "anyio", "aiohttp",
    "prometheus-client", "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http",
)  # fmt: skip


@dataclass(frozen=True)
class ServerStack:
    """Which event loop and HTTP parser uvicorn runs with (``--loop``, ``--http``)."""

    loop: str
    http: str

    @property
    def name(self) -> str:
        return f"{self.loop}+{self.http}"


ASYNCIO = ServerStack("asyncio", "h11")
UVLOOP = ServerStack("uvloop", "httptools")


def available_stacks() -> list[ServerStack]:
    """asyncio+h11 always; uvloop+httptools when ``uvicorn[standard]`` is installed."""
    if all(importlib.util.find_spec(name) for name in ("uvloop", "httptools")):
        return [ASYNCIO, UVLOOP]
    return [ASYNCIO]


def default_stack() -> ServerStack:
    """What ``uvicorn --loop auto --http auto`` would pick: the fastest installed."""
    return available_stacks()[-1]


def stack_named(name: str | None) -> ServerStack:
    stacks = {stack.name: stack for stack in available_stacks()}
    if name is None:
        return default_stack()
    if name not in stacks:
        raise SystemExit(f"server stack {name!r} is not available; choose from {sorted(stacks)}")
    return stacks[name]


# -- servers ---------------------------------------------------------------------------------
#: Every port ``free_port`` handed out: servers started together never get the same one.
_GIVEN_PORTS: set[int] = set()
#: ``START-END``: the ports this process hands out (``smoke.py`` gives each benchmark it runs
#: at once a range of its own); unset, any free port the kernel gives.
PORT_RANGE_ENV = "AGUI_BENCH_PORTS"


def env_with_port_range(ports: range) -> dict[str, str]:
    """This process's environment, with ``ports`` as a benchmark process's own range."""
    return {**os.environ, PORT_RANGE_ENV: f"{ports.start}-{ports.stop - 1}"}


def _port_range() -> range | None:
    value = os.environ.get(PORT_RANGE_ENV, "")
    if not value:
        return None
    start, _, end = value.partition("-")
    if not (start.isdigit() and end.isdigit() and 0 < int(start) <= int(end) < 65_536):
        raise SystemExit(f"{PORT_RANGE_ENV}={value!r}: expected START-END, two port numbers")
    return range(int(start), int(end) + 1)


def free_port() -> int:
    """A free port of 127.0.0.1 that this process has not handed out before. The kernel may
    give the same free port twice in a row: two servers started at once on it, the second
    fails to bind while the first answers its ``/health`` (a benchmark's bridge URL that
    answered 404: the upstream's). With ``PORT_RANGE_ENV`` set, the next free port of that
    range: another process running a benchmark at once has a range of its own."""
    ports = _port_range()
    if ports is not None:
        for port in ports:
            if port in _GIVEN_PORTS:
                continue
            _GIVEN_PORTS.add(port)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use (another program's, or still closing)
            return port
        raise SystemExit(f"{PORT_RANGE_ENV}: every port of {ports.start}-{ports.stop - 1} used")
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A server to start: ``apps:<factory>`` on ``port`` (chosen up front, so that the bridge's
    environment can name the upstream's URL before the upstream is up)."""

    factory: str
    port: int = field(default_factory=free_port)
    env: Mapping[str, str] = field(default_factory=dict)
    workers: int = 1
    python_options: tuple[str, ...] = ()  # before ``-m uvicorn``: ("-m", "cProfile", "-o", …)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Server:
    url: str
    pid: int


@contextmanager
def serve(*specs: Spec, stack: ServerStack) -> Iterator[list[Server]]:
    """Start every server at once, wait until all answer ``/health``; stop them all after."""
    with ExitStack() as cleanup:
        # SIGTERM (a stopped `make`, say) unwinds like Ctrl-C, so the servers are stopped too.
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        cleanup.callback(signal.signal, signal.SIGTERM, previous)
        started: list[tuple[Spec, subprocess.Popen[bytes], IO[bytes]]] = []
        for spec in specs:
            log: IO[bytes] = cleanup.enter_context(tempfile.TemporaryFile())
            process = subprocess.Popen(
                _command(spec, stack),
                env={**os.environ, **spec.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: workers are stopped with it
            )
            cleanup.callback(_stop, process)
            started.append((spec, process, log))
        for spec, process, log in started:
            _wait_healthy(spec.url, process, log)
            if spec.workers > 1:
                _wait_workers(process.pid, spec.workers)
        yield [Server(spec.url, process.pid) for spec, process, _ in started]


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _command(spec: Spec, stack: ServerStack) -> list[str]:
    return [
        sys.executable, *spec.python_options, "-m", "uvicorn", f"apps:{spec.factory}", "--factory",
        "--app-dir", str(BENCH_DIR), "--host", "127.0.0.1", "--port", str(spec.port),
        "--loop", stack.loop, "--http", stack.http, "--workers", str(spec.workers),
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            output = log.read().decode(errors="replace")
            raise RuntimeError(f"server exited with {process.returncode}:\n{output}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server at {url} did not answer /health in 30 s")


def _wait_workers(supervisor: int, workers: int) -> None:
    """Until every worker process is up (a worker that is still importing takes no accepts)."""
    deadline = time.monotonic() + 30
    while len(worker_pids(supervisor)) < workers and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the last one to start still imports the app after it exists


def _stop(process: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def worker_pids(supervisor: int) -> list[int]:
    """The worker processes of a ``uvicorn --workers N`` supervisor (multiprocessing starts
    them with ``spawn_main``; its resource tracker is a child too, and no worker)."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    try:
        pids = [int(child) for child in children.read_text().split()]
    except OSError:
        return []
    return [pid for pid in pids if b"spawn_main" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# -- /proc readings --------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory now (``VmHWM``: at its peak so far)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for process {pid}")


# -- the event loop's stalls, seen from outside ------------------------------------------------
@contextmanager
def health_probes(url: str, *, timeout: float = 120) -> Iterator[list[float]]:
    """``GET {url}/health`` asked over and over (2 ms apart, one connection) in a thread while
    the block runs: the list of its answers' latencies in seconds, where the bridge's event loop
    held still shows as a slow answer. The probe's connection is up before the block starts,
    and it goes on for 0.1 s after the block."""
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=timeout) as client:
            while not done.is_set():
                started = time.perf_counter()
                client.get(f"{url}/health").raise_for_status()
                latencies.append(time.perf_counter() - started)
                time.sleep(0.002)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    time.sleep(0.2)
    try:
        yield latencies
    finally:
        time.sleep(0.1)
        done.set()
        prober.join()


def stall_figures(latencies: Sequence[float]) -> dict[str, float]:
    """What ``health_probes`` saw: the slowest answer, the 99th percentile and the median (ms),
    and how many answers there were."""
    ordered = sorted(latencies)
    return {
        "max_ms": ordered[-1] * 1e3,
        "p99_ms": ordered[int(len(ordered) * 0.99)] * 1e3,
        "p50_ms": statistics.median(ordered) * 1e3,
        "probes": len(ordered),
    }


# -- figures ---------------------------------------------------------------------------------
def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass(frozen=True, kw_only=True)
class Row:
    """One line of the combined table."""

    benchmark: str
    case: str
    figure: str
    value: str
    target: str = ""
    verdict: str = ""

    def cells(self) -> tuple[str, ...]:
        return (self.benchmark, self.case, self.figure, self.value, self.target, self.verdict)


def verdict(met: bool, *, smoke: bool) -> str:
    if smoke:
        return "(smoke: not measured)"
    return "met" if met else "NOT met"


def table(rows: Sequence[Row]) -> str:
    header = ("benchmark", "case", "figure", "value", "target", "")
    lines = [header, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def render(line: Sequence[str]) -> str:
        cells = [
            cell.rjust(width) if i == 3 else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths).rstrip()
    return "\n".join([render(header), rule, *(render(line) for line in lines[1:])])


def machine() -> dict[str, Any]:
    """translate.py's description of the machine, with the HTTP stack's package versions."""
    info = _translate_machine()
    for package in _PACKAGES:
        try:
            info["packages"][package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info["packages"][package] = None
    info["cores_note"] = CORES_NOTE.format(cores=os.cpu_count())
    info["bridge_code"] = bridge_code()
    if info["bridge_code"] != BRIDGE_CODE_AT_START:
        info["bridge_code_at_start"] = BRIDGE_CODE_AT_START  # the figures mix two versions
    return info


def bridge_code() -> dict[str, Any]:
    """bridge/ as committed (its tree) and which of its files differ from that ("-dirty" in
    the git description says only that some file in the checkout does)."""
    status = _git("status", "--porcelain", "--", str(BENCH_DIR.parent / "bridge"))
    # "XY path" (the output is stripped, so the first line may have lost X's blank)
    changed = (
        [line.split(maxsplit=1)[1] for line in status.splitlines()] if status is not None else None
    )
    return {"tree": _git("rev-parse", "--short", "HEAD:bridge"), "uncommitted": changed}


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=BENCH_DIR, capture_output=True, text=True, timeout=10, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


# Servers import the bridge when they start: a run that outlives a commit mixes versions.
BRIDGE_CODE_AT_START = bridge_code()


def report(benchmark: str, config: Mapping[str, Any], results: Any) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": dict(config),
        "results": results,
    }


def write_results(name: str, content: Mapping[str, Any]) -> Path:
    path = RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return path


def print_header(what: str) -> None:
    print(f"== {what}; {CORES_NOTE.format(cores=os.cpu_count())}")


@dataclass(kw_only=True)
class Outcome:
    """What one benchmark measured: rows for the table, details for the JSON file."""

    name: str
    config: dict[str, Any]
    results: Any
    rows: list[Row]
    problems: list[str] = field(default_factory=list)


def finish(outcome: Outcome, *, smoke: bool) -> int:
    """Print the table; a wrong output exits non-zero; a full run writes its results file."""
    print(table(outcome.rows))
    if outcome.problems:
        print("output check failed:", *outcome.problems, sep="\n  ", file=sys.stderr)
        return 1
    print("output checked: ok")
    if not smoke:
        write_results(outcome.name, report(outcome.name, outcome.config, outcome.results))
    return 0


def chosen(
    parser: argparse.ArgumentParser, args: argparse.Namespace, defaults: Mapping[str, float]
) -> dict[str, float]:
    """``defaults`` (a full run's or a smoke's), each replaced by its option when given
    (``--run-tokens`` for ``run_tokens``); one not positive is a usage error."""
    figures = dict(defaults)
    for name in figures:
        given = getattr(args, name)
        if given is not None:
            if given <= 0:
                parser.error(f"--{name.replace('_', '-')} must be positive")
            figures[name] = given
    return figures


def run_client(main: Coroutine[Any, Any, T]) -> T:
    """Run a client coroutine, on uvloop when it is installed: the client shares the cores with
    the servers, so the less it costs the better (the same client for every server stack)."""
    if UVLOOP in available_stacks():
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)
