"""The thread store ``--threads`` names (README "Threads"), the same three kinds the approvals
have:

- ``memory``: this process's own (``MemoryThreads``); not for ``serve --workers``;
- ``file:///DIR``: a folder the processes of one machine share (``FileThreads``);
- ``redis://HOST:PORT/DB`` (``rediss://``, ``unix://``; ``valkey://`` and ``valkeys://`` are the
  same protocol): Redis or Valkey, for replicas and workers (``RedisThreads``; the ``redis``
  extra, imported only for it).
"""

from __future__ import annotations

from bridge.core.upstream_url import shown_url
from bridge.serve.threads.file_store import FileThreads
from bridge.serve.threads.memory_store import MemoryThreads
from bridge.serve.threads.records import RUN_ALIVE
from bridge.serve.threads.redis_store import RedisThreads
from bridge.serve.threads.store import ThreadStore
from bridge.serve.tools.claims import REDIS_SCHEMES, file_store_folder, store_scheme


def thread_store(
    url: str,
    *,
    ttl: float,
    max_threads: int = 1000,
    max_bytes: int = 1 << 62,
    run_timeout: float = 0.0,
) -> ThreadStore:
    """The store ``url`` names, keeping a thread ``ttl`` seconds after its last save, at most
    ``max_threads`` of each owner's, and ``max_bytes`` in all owners' (``memory`` and
    ``file``: Redis holds to its own ``maxmemory``), and
    a run going on for as long as it may (``run_timeout``: a run writes to the store at its
    end, and before only when a follower elsewhere asks); ``ValueError`` for a URL it does not
    name."""
    run_alive = max(RUN_ALIVE, run_timeout + 60.0)
    scheme = store_scheme(url)
    if scheme == "memory":
        return MemoryThreads(ttl=ttl, max_threads=max_threads, max_bytes=max_bytes)
    if scheme == "file":
        folder = file_store_folder(url, "--threads")
        return FileThreads(
            folder, ttl=ttl, max_threads=max_threads, max_bytes=max_bytes, run_alive=run_alive
        )
    if scheme in REDIS_SCHEMES:
        return RedisThreads(url, ttl=ttl, max_threads=max_threads, run_alive=run_alive)
    raise ValueError(
        f"--threads {shown_url(url)!r}: say memory, file:///FOLDER, redis://HOST:PORT/DB "
        "or valkey://HOST:PORT/DB"
    )
