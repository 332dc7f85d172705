"""The flags of threads kept between runs (README "Threads"), for ``serve`` and ``demo``."""

from __future__ import annotations

import argparse
import ipaddress
import logging

from bridge.config import MAX_SECONDS, BridgeConfig


def add_thread_options(parser: argparse.ArgumentParser, *, default: str | None = None) -> None:
    """``--threads`` and its bounds; ``default``: the store when the flag is not given (the
    demo keeps its threads in memory, ``serve`` keeps none)."""
    group = parser.add_argument_group('threads kept between runs (README "Threads")')
    group.add_argument(
        "--threads",
        default=default,
        metavar="STORE",
        help="keep each owner's threads and each run's events, so a reload finds its thread "
        "and a run outlives its connection: memory (this process), file:///FOLDER "
        "(processes of one machine), redis://HOST:PORT/DB or valkey://… (replicas)"
        + "; none keeps nothing"
        + (f" (default {default})" if default else " (default)"),
    )
    group.add_argument(
        "--thread-ttl",
        type=float,
        default=float(MAX_SECONDS),
        metavar="SECONDS",
        help=f"seconds a thread is kept after its last run (default {MAX_SECONDS}, a week)",
    )
    group.add_argument(
        "--max-thread-bytes",
        type=int,
        default=16 * 1024 * 1024,
        metavar="BYTES",
        help="the largest thread kept, as JSON; a run past it goes on unkept (default %(default)s)",
    )
    group.add_argument(
        "--thread-store-bytes",
        type=int,
        default=256 * 1024 * 1024,
        metavar="BYTES",
        help="the bytes the memory or file store holds in all owners' threads; past it the "
        "owner holding the most gives way first (default %(default)s; Redis: its maxmemory)",
    )
    group.add_argument(
        "--run-grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds a run goes on with no client following it (a reload comes back to it); "
        "then its upstream request is cancelled (default 30)",
    )
    group.add_argument(
        "--run-timeout",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="the longest a run may go on with threads (default 1800)",
    )
    group.add_argument(
        "--thread-owner-header",
        metavar="NAME",
        help="the request header that names a thread's owner (set by your proxy after its "
        "login); default: a digest of the caller's bearer token",
    )


def check_threads(config: BridgeConfig, host: str, workers: int = 1) -> None:
    """Refuse a store the workers cannot share (``ValueError`` naming the fix); warn when every
    caller would be one owner of the threads while the bridge listens beyond this machine."""
    if config.threads is None:
        return
    if workers > 1 and config.threads.strip().lower() == "memory":
        raise ValueError(
            "--threads memory keeps each worker's threads to itself: with --workers use "
            "--threads file:///FOLDER (the workers of this machine) or redis://HOST:PORT/DB"
        )
    told_apart = config.auth_token is not None or config.thread_owner_header is not None
    if not told_apart and not _loopback(host):
        logging.getLogger("agui_bridge").warning(
            "threads are kept with every caller as one owner (no --auth-token, no "
            "--thread-owner-header) while listening on %s: whoever reaches the bridge reads "
            "every thread",
            host,
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
