"""``serve --workers N``: N processes serving one port, each with the same configuration.

The parent binds the socket, then starts each worker (a fresh interpreter: the spawn method)
with the socket and the parsed flags; each builds its own ``BridgeConfig``, app and MCP servers
from them and serves until told to stop. The parent:

- shares what must be one for all: the interrupt secret (one is made when the environment has
  none, so a worker accepts another's interrupts), the store of used approvals and, with
  ``--metrics``, prometheus-client's multiprocess files (each worker's ``/metrics`` reports the
  whole set), the last two in a scratch folder (``bridge.cli.scratch``) that goes with the
  bridge however it ends;
- prints the line that says where once every worker serves, or exits 2 if one could not start
  (its own error is above);
- replaces a worker that dies;
- on SIGTERM, SIGINT or SIGHUP sends each worker SIGTERM, which drains it as one process
  drains (``--shutdown-grace``), and waits for them all.

A worker whose parent is gone stops too, the same way.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from types import FrameType

from bridge.cli.agents import agent_apps
from bridge.cli.scratch import Scratch
from bridge.cli.serving import configure_logging, opened_line, server_for, web_demo
from bridge.core.oneline import say_refused
from bridge.serve.tools.mcp_tools import McpStartError

logger = logging.getLogger("agui_bridge")

#: The folder prometheus-client's multiprocess mode keeps the workers' values in.
METRICS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

_spawn = multiprocessing.get_context("spawn")
multiprocessing.allow_connection_pickling()  # the listening socket goes to each worker

#: Longest a worker may take to start serving (its MCP servers connect first).
_START_TIMEOUT = 120.0
#: A worker that dies is replaced at most this often (one that cannot start does not spin).
_RESTART_EVERY = 1.0


class WorkerFailed(Exception):
    """A worker could not start."""


def worker_count(value: str) -> int:
    """``--workers``: a number, or ``auto`` (the cores this process may run on)."""
    if value.strip().lower() == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"--workers wants a number or auto, not {value!r}") from None
    if count < 1:
        raise ValueError("--workers must be at least 1")
    return count


def run_workers(
    args: argparse.Namespace,
    listener: socket.socket,
    count: int,
    paths: Sequence[str],
    note: str,
) -> int:
    """Serve with ``count`` workers until SIGTERM, SIGINT or SIGHUP; 0 once they all
    stopped."""
    scratch = _share(args)
    supervisor = _Supervisor(args, listener, count, scratch)
    try:
        supervisor.start()
        print(f"{opened_line(args, listener, paths, note)} [{count} workers]", flush=True)
        supervisor.watch()
    finally:
        supervisor.stop()
        if scratch is not None:
            scratch.leave()
    return 0


def _share(args: argparse.Namespace) -> Scratch | None:
    """Put in the environment (and the flags) the workers inherit what they must share: the
    interrupts' secret, the metrics folder, and the store of used approvals (a folder of this
    machine's, unless one is named: a worker's memory is its own). The scratch folder that
    holds those folders, if one was needed."""
    if not os.environ.get(args.secret_env):
        os.environ[args.secret_env] = secrets.token_urlsafe(32)
    metrics = (args.metrics or args.metrics_public) and not os.environ.get(METRICS_DIR_VARIABLE)
    approvals = args.approval_store.strip().lower() == "memory"
    if not (metrics or approvals):
        return None
    scratch = Scratch.make()
    if metrics:
        folder = Path(scratch.folder, "metrics")
        folder.mkdir()
        os.environ[METRICS_DIR_VARIABLE] = str(folder)
    if approvals:
        folder = Path(scratch.folder, "approvals")
        folder.mkdir()
        args.approval_store = folder.as_uri()
    return scratch


class _Supervisor:
    def __init__(
        self, args: argparse.Namespace, listener: socket.socket, count: int, scratch: Scratch | None
    ) -> None:
        self._args = args
        self._listener = listener
        self._scratch = None if scratch is None else scratch.folder
        self._workers: list[SpawnProcess | None] = [None] * count
        self._started_at = [0.0] * count
        # Each worker's "serving" flag, kept while it lives (a flag collected too early is gone
        # before the new process has read it).
        self._ready: list[Event | None] = [None] * count
        self._stop = threading.Event()

    def start(self) -> None:
        """Start every worker and wait until each serves; ``WorkerFailed`` if one exits first."""
        # SIGHUP too (a closed terminal, a session's end): its default kills the parent before
        # it can stop the workers and let go of the scratch folder.
        for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(stop, self._on_signal)
        ready = [self._spawn(slot) for slot in range(len(self._workers))]
        deadline = time.monotonic() + _START_TIMEOUT
        for slot, event in enumerate(ready):
            process = self._workers[slot]
            assert process is not None
            while not event.wait(0.1):
                if self._stop.is_set():
                    return
                if not process.is_alive():
                    raise WorkerFailed(
                        f"a worker could not start (exit status {process.exitcode}); see above"
                    )
                if time.monotonic() > deadline:
                    raise WorkerFailed(f"a worker did not start within {_START_TIMEOUT:g} s")

    def watch(self) -> None:
        """Replace workers that die, until a signal says stop."""
        while not self._stop.wait(0.2):
            for slot, process in enumerate(self._workers):
                if process is None or process.is_alive() or self._stop.is_set():
                    continue
                if time.monotonic() - self._started_at[slot] < _RESTART_EVERY:
                    continue
                logger.warning(
                    "worker %s died (exit status %s): starting another",
                    process.pid,
                    process.exitcode,
                )
                _forget(process.pid)
                self._spawn(slot)

    def stop(self) -> None:
        """SIGTERM to every worker (each drains within the grace), then wait for them."""
        self._stop.set()
        alive = [p for p in self._workers if p is not None and p.is_alive()]
        for process in alive:
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._args.shutdown_grace + 15
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                logger.warning("worker %s did not stop in time: killed", process.pid)
                process.kill()
                process.join()

    def _spawn(self, slot: int) -> Event:
        ready = _spawn.Event()
        process = _spawn.Process(
            target=_worker,
            args=(self._args, self._listener, ready, os.getpid(), self._scratch),
            name=f"agui-bridge-worker-{slot}",
        )
        process.start()
        self._workers[slot] = process
        self._ready[slot] = ready
        self._started_at[slot] = time.monotonic()
        return ready

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self._stop.set()


def _forget(pid: int | None) -> None:
    """A dead worker's live gauges leave the metrics (its counters stay: they happened)."""
    folder = os.environ.get(METRICS_DIR_VARIABLE)
    if folder and pid is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]


def _worker(
    args: argparse.Namespace,
    listener: socket.socket,
    ready: Event,
    parent: int,
    scratch_folder: str | None,
) -> None:
    """One worker: the same configuration, its own app, served on the shared socket."""
    configure_logging(args)
    # A terminal's Ctrl-C or hang-up reaches every process: the parent says stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # uvicorn raises the SIGTERM it drained for again once it has served, to die by it: the
    # worker then ends by an exception instead, so that it still lets go of the scratch folder.
    signal.signal(signal.SIGTERM, _exit)
    scratch = None if scratch_folder is None else Scratch(scratch_folder)
    try:
        page = web_demo() if args.web_demo else None
        server = server_for(args, listener, agent_apps(args), [], page, started=ready.set)
        server.worker = True
        threading.Thread(target=_stop_with, args=(parent,), daemon=True).start()
        server.run(sockets=[listener])
    except (ValueError, McpStartError) as exc:  # as one process says it: one line, status 2
        say_refused(exc)
        sys.exit(2)
    finally:
        if scratch is not None:  # the last process of the bridge removes the folder
            scratch.leave()


def _exit(sig: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _stop_with(parent: int) -> None:
    """Stop this worker (as SIGTERM does) once its parent is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
