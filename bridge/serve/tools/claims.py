"""Approve once, run once: the store of used interrupts (README "Approving tools").

Interrupts are signed, not stored, so any process that shares the secret can resume any of them;
and so an exact replay of a resume (a double click, a client or a load balancer retrying a POST,
the same request at two replicas) would run the approved tool again. Before an approved call
runs, its interrupt is claimed here, atomically: the first claim runs the call, any other finds
it taken and runs nothing. A claim lasts as long as its interrupt could still be answered (its
``expiresAt``, plus ``CLOCK_SKEW`` for replicas whose clocks disagree), so the store stays
bounded by the approvals of the last ``--approval-timeout``.

Three stores, by ``--approval-store``:

- ``memory`` (the default): this process's own; enough for one process.
- ``redis://HOST:PORT/DB`` (``rediss://``, ``unix://``; ``valkey://`` and ``valkeys://`` are the
  same protocol): Redis or Valkey, for replicas and workers, by the official ``redis`` client's
  asyncio API (the ``redis`` extra): ``SET key 1 NX PX <ttl>``.
- ``file:///DIR``: a folder shared by the processes of one machine (``serve --workers`` makes
  one for its workers): one file per claim, created with ``O_CREAT | O_EXCL``, which the kernel
  makes atomic across processes.

A store that cannot be reached raises ``ApprovalStoreError``: the approved call does not run
(the run ends with RUN_ERROR ``approval_store_unavailable``), and ``/health`` says so
(``StoreWatch``: it asks the store for a write, and waits for it only briefly).

What survives a restart: the file store's claims (files), and a Redis's if it keeps its data
(RDB or AOF persistence); the memory store's go with the process.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import logging
import os
import secrets
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import unquote, urlsplit

import anyio.to_thread

from bridge.core.errors import BridgeError
from bridge.core.upstream_url import shown_url

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger("agui_bridge")

#: Seconds a claim outlives its interrupt's expiry: a replica whose clock is behind by less
#: still finds the claim while it takes the token as valid.
CLOCK_SKEW = 300.0
#: Seconds a Redis command (or connecting) may take before the store counts as unreachable.
REDIS_TIMEOUT = 3.0

_KEY_PREFIX = "agui-bridge:approval:"
#: What ``available`` writes (no claim's key: those are hex digests), and for how long (ms).
_HEALTH_KEY = _KEY_PREFIX + "health"
_HEALTH_TTL_MS = 60_000
#: Seconds ``/health`` waits for the store's answer (``StoreWatch``): past it, unavailable.
HEALTH_WAIT = 0.5
#: How often the file store looks for expired claims to remove (seconds).
_SWEEP_EVERY = 60.0


class ApprovalStoreError(BridgeError):
    """The store of used interrupts cannot be reached: an approved call does not run."""

    code = "approval_store_unavailable"


def claim_key(interrupt_id: str) -> str:
    """The store's key for an interrupt: a digest of its id (the signed token)."""
    return hashlib.sha256(interrupt_id.encode()).hexdigest()


class ClaimStore(Protocol):
    """Where the interrupts already used are kept."""

    #: The store as logs and errors show it (no password).
    shown: str

    async def claim(self, key: str, expires_at: datetime) -> bool:
        """Take ``key`` until ``expires_at`` (plus ``CLOCK_SKEW``): ``True`` for the first
        claim, ``False`` when it is taken. ``ApprovalStoreError`` if the store cannot say."""
        ...

    async def release(self, key: str) -> None:
        """Give back a claim whose call did not run (a later claim in its run failed)."""
        ...

    async def available(self) -> bool:
        """Whether the store answers now (``/health``)."""
        ...

    async def aclose(self) -> None: ...


#: The URL schemes of a Redis or Valkey store (one protocol).
REDIS_SCHEMES = ("redis", "rediss", "unix", "valkey", "valkeys")


def store_scheme(url: str) -> str:
    """A store URL's kind as its scheme says it (``memory`` has none), in lower case."""
    return urlsplit(url).scheme.lower() if "://" in url else url.strip().lower()


def claim_store(url: str) -> ClaimStore:
    """The store ``--approval-store`` names (``ValueError`` for one it does not)."""
    scheme = store_scheme(url)
    if scheme == "memory":
        return MemoryClaims()
    if scheme == "file":
        return FileClaims(file_store_folder(url))
    if scheme in REDIS_SCHEMES:
        return RedisClaims(url)
    raise ValueError(
        f"--approval-store {shown_url(url)!r}: say memory, redis://HOST:PORT/DB, "
        "valkey://HOST:PORT/DB or file:///FOLDER"
    )


def file_store_folder(url: str, flag: str = "--approval-store") -> Path:
    """The folder of a ``file:///DIR`` store (``flag``: the option that named it)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or not parts.path:
        raise ValueError(f"{flag} {shown_url(url)!r}: a file store is file:///ABSOLUTE/FOLDER")
    return Path(unquote(parts.path))


def redis_client(url: str, *, socket_timeout: float = REDIS_TIMEOUT) -> Redis:
    """A client of the Redis or Valkey ``url`` names, by the official ``redis`` client's asyncio
    API (the ``redis`` extra, which ``BridgeConfig`` checked is installed: imported only for a
    Redis store). Connecting waits ``REDIS_TIMEOUT``, a command's answer ``socket_timeout``;
    one quick retry: a caller waits for the store, and a run for its caller."""
    from redis.asyncio import Redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    scheme, _, rest = url.partition("://")
    scheme = {"valkey": "redis", "valkeys": "rediss"}.get(scheme.lower(), scheme)
    return Redis.from_url(
        f"{scheme}://{rest}",
        socket_timeout=socket_timeout,
        socket_connect_timeout=REDIS_TIMEOUT,
        retry=Retry(NoBackoff(), 1),
    )


def _seconds_left(expires_at: datetime) -> float:
    return expires_at.timestamp() + CLOCK_SKEW - time.time()


class MemoryClaims:
    """This process's own claims."""

    shown = "memory"

    def __init__(self) -> None:
        self._claims: dict[str, float] = {}  # key → when it may go (Unix seconds)
        self._expiries: list[tuple[float, str]] = []

    async def claim(self, key: str, expires_at: datetime) -> bool:
        now = time.time()
        while self._expiries and self._expiries[0][0] <= now:
            _, old = heapq.heappop(self._expiries)
            if self._claims.get(old, now + 1) <= now:
                del self._claims[old]
        if key in self._claims:
            return False
        until = now + max(_seconds_left(expires_at), 1.0)
        self._claims[key] = until
        heapq.heappush(self._expiries, (until, key))
        return True

    async def release(self, key: str) -> None:
        self._claims.pop(key, None)

    async def available(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._claims.clear()
        self._expiries.clear()

    def __len__(self) -> int:
        return len(self._claims)


class FileClaims:
    """Claims as files in a folder the processes of one machine share: the file's name is the
    claim's expiry (Unix seconds) and key, so two claims of one interrupt have one name."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.shown = f"file://{folder}"
        self._swept = 0.0

    async def claim(self, key: str, expires_at: datetime) -> bool:
        # The expiry in the name comes from the token, so every claim of it names one file.
        name = f"{int(expires_at.timestamp() + CLOCK_SKEW)}-{key}"
        try:
            return await anyio.to_thread.run_sync(self._create, name)
        except OSError as exc:
            raise ApprovalStoreError(
                f"the approval store {self.shown} cannot be written: {exc.strerror or exc}"
            ) from exc

    def _create(self, name: str) -> bool:
        now = time.time()
        if now - self._swept > _SWEEP_EVERY:
            self._swept = now
            try:
                self._sweep(now)
            except OSError as exc:  # housekeeping: the claim does not depend on it
                logger.warning("the approval store %s was not swept: %s", self.shown, exc)
        path = self.folder / name
        for _ in range(2):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                return True
            except FileExistsError:
                if int(name.partition("-")[0]) >= now:
                    return False
                self._move_aside(path)
        return False

    @staticmethod
    def _move_aside(path: Path) -> None:
        """Move an expired claim out of the way, by a rename, which one process alone wins; all
        then race for the name with ``O_EXCL``, which one alone wins."""
        aside = path.with_name(f"stale-{os.getpid()}-{time.monotonic_ns()}")
        with suppress(FileNotFoundError):  # another process moved it first
            os.rename(path, aside)
            os.unlink(aside)

    def _sweep(self, now: float) -> None:
        """Remove the claims whose interrupts can no longer be answered."""
        with os.scandir(self.folder) as entries:
            for entry in entries:
                expiry, _, _ = entry.name.partition("-")
                if (
                    expiry.isascii() and expiry.isdigit() and int(expiry) < now
                ) or expiry == "stale":
                    if entry.is_dir(follow_symlinks=False):
                        continue  # none of ours: claims are files
                    with suppress(FileNotFoundError):  # another process swept it first
                        os.unlink(entry.path)

    async def release(self, key: str) -> None:
        def remove() -> None:
            for path in self.folder.glob(f"*-{key}"):
                path.unlink(missing_ok=True)

        try:
            await anyio.to_thread.run_sync(remove)
        except OSError as exc:
            raise ApprovalStoreError(f"the approval store {self.shown} failed: {exc}") from exc

    async def available(self) -> bool:
        return await anyio.to_thread.run_sync(
            lambda: self.folder.is_dir() and os.access(self.folder, os.W_OK | os.X_OK)
        )

    async def aclose(self) -> None:
        return None


class RedisClaims:
    """Claims in Redis or Valkey, shared by every process that names the same server."""

    def __init__(self, url: str) -> None:
        self.shown = shown_url(url)
        self._client = redis_client(url)

    async def claim(self, key: str, expires_at: datetime) -> bool:
        ttl = max(int(_seconds_left(expires_at) * 1000), 1000)
        # A value of this claim's own: when the answer is lost, the store can still say
        # whose claim it holds.
        name, mine = _KEY_PREFIX + key, secrets.token_bytes(16)
        try:
            taken = await self._client.set(name, mine, nx=True, px=ttl)
        except Exception as exc:  # redis-py's errors, and the socket's under them
            return await self._whose(name, mine, exc)
        return bool(taken)

    async def _whose(self, name: str, mine: bytes, lost: Exception) -> bool:
        """A claim whose answer was lost (the server may have taken it): asked again, the
        store says whether it holds this claim (``True``: the call runs), another's
        (``False``), or none (``ApprovalStoreError``: nothing is claimed). If it does not
        answer, the claim may stand: the next try is told the call may have run."""
        try:
            held = await self._client.get(name)
        except Exception as exc:
            raise self._unreachable(exc) from lost
        if held is None:
            raise self._unreachable(lost) from lost
        return bool(held == mine)

    async def release(self, key: str) -> None:
        try:
            await self._client.delete(_KEY_PREFIX + key)
        except Exception as exc:
            raise self._unreachable(exc) from exc

    async def available(self) -> bool:
        # A write, as a claim is: a Redis may answer PING and refuse writes (a read-only
        # replica, full memory with noeviction, an ACL).
        try:
            return bool(await self._client.set(_HEALTH_KEY, b"1", px=_HEALTH_TTL_MS))
        except Exception:
            return False

    async def aclose(self) -> None:
        await self._client.aclose()

    def _unreachable(self, exc: BaseException) -> ApprovalStoreError:
        return ApprovalStoreError(
            f"the approval store at {self.shown} cannot be reached ({type(exc).__name__})"
        )


class Answers(Protocol):
    """A store that can say whether it answers (the approvals', the threads')."""

    async def available(self) -> bool: ...


class StoreWatch:
    """``/health``'s view of a store: one question at a time (``available``), waited for at
    most ``HEALTH_WAIT`` seconds; a store that has not answered by then is unavailable, and the
    question goes on: the next ``/health`` waits for its answer instead of asking again. So a
    blocked store costs ``/health`` half a second, not the store's timeout, and a load
    balancer's probes never pile up connections to it."""

    def __init__(self, store: Answers, wait: float = HEALTH_WAIT) -> None:
        self._store = store
        self._wait = wait
        self._asking: asyncio.Task[bool] | None = None

    async def available(self) -> bool:
        if self._asking is None or self._asking.done():  # a finished answer is an old one
            self._asking = asyncio.ensure_future(self._store.available())
        asking = self._asking
        done, _ = await asyncio.wait({asking}, timeout=self._wait)
        return bool(done) and asking.result()

    async def aclose(self) -> None:
        if self._asking is not None:
            self._asking.cancel()
            with suppress(asyncio.CancelledError):
                await self._asking
