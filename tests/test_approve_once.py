"""Approve once, run once (README "Approving tools"): an approval runs its tool at most once,
whatever repeats its resume: a replay, 20 copies at once, the same resume at two replicas, an
expired claim; with the in-process store, a folder shared by processes, and a real
``redis-server`` (stopped mid-test too: then nothing approved runs, and ``/health`` says so).
``serve --workers`` is tested in tests/test_workers.py, the official clients in
tests/test_node_client.py, the demo page and CopilotKit in the browser tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from bridge.cli.demo import create_scripted_upstream
from bridge.cli.parser import build_parser
from bridge.cli.settings import config_from_args, config_from_env
from bridge.serve.http.app import create_app
from bridge.serve.run.resume import ALREADY_RUN_STATEMENT
from bridge.serve.tools.approvals import _mac, sign_interrupt, verify_interrupt
from bridge.serve.tools.claims import (
    CLOCK_SKEW,
    ApprovalStoreError,
    ClaimStore,
    FileClaims,
    MemoryClaims,
    RedisClaims,
    claim_key,
    claim_store,
)
from bridge.serve.tools.python_tools import requires_approval
from redis_server import RedisServer
from servers import approving, post, run_input, scripted_config, serve

SECRET = "approve-once-Qx7Vb2Kp9Lm4Nz8Rt1Wy6"
PROMPT = "Please send_mail"

SENT: list[str] = []
_LOCK = threading.Lock()


@requires_approval
def send_mail(to: str, subject: str) -> str:
    """Send an e-mail."""
    with _LOCK:
        SENT.append(to)
    return f"mail sent to {to}"


@pytest.fixture(autouse=True)
def _nothing_sent() -> Iterator[None]:
    SENT.clear()
    yield
    SENT.clear()


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


STORES = ["memory", "file", "redis"]


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An ``--approval-store`` of each kind (the Redis one: the module's server)."""
    kind = request.param
    if kind == "file":
        return tmp_path.as_uri()
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis")
        return server.url
    return "memory"


@contextlib.contextmanager
def bridges(count: int = 1, **overrides: Any) -> Iterator[list[str]]:
    """A scripted upstream and ``count`` bridges in front of it (replicas: one secret, the
    same configuration, each its own app and process state)."""
    overrides.setdefault("secret", SECRET)
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(serve(create_scripted_upstream()))
        config = scripted_config(upstream, **overrides)
        yield [
            stack.enter_context(serve(create_app(config, tools=[send_mail]))) for _ in range(count)
        ]


def interrupted(url: str) -> dict[str, Any]:
    """Run until the interrupt; the resume that approves it, as @ag-ui/client sends it."""
    ask = [{"id": "u1", "role": "user", "content": PROMPT}]
    first = run_input(ask, threadId=f"thread-{time.monotonic_ns()}")
    return approving(first, post(url, first))


def result_of(frames: list[dict[str, Any]]) -> str:
    [result] = [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    return str(result)


def at_once(urls: list[str], body: dict[str, Any], copies: int) -> list[list[dict[str, Any]]]:
    """``copies`` of one request at once, spread over ``urls``, each on its own connection."""
    barrier = threading.Barrier(copies)

    def one(index: int) -> list[dict[str, Any]]:
        barrier.wait()
        return post(urls[index % len(urls)], body)

    with ThreadPoolExecutor(copies) as pool:
        return list(pool.map(one, range(copies)))


# --- over HTTP --------------------------------------------------------------------------------


def test_a_replayed_resume_runs_the_tool_once_and_the_copy_ends_cleanly(store_url: str) -> None:
    with bridges(approval_store=store_url) as [url]:
        resume = interrupted(url)
        first = post(url, resume)
        again = post(url, resume)
    assert len(SENT) == 1
    assert result_of(first).startswith("mail sent to ")
    assert result_of(again) == ALREADY_RUN_STATEMENT
    for frames in (first, again):
        assert frames[-1]["type"] == "RUN_FINISHED" and "outcome" not in frames[-1]


def test_twenty_copies_at_once_run_the_tool_once(store_url: str) -> None:
    with bridges(approval_store=store_url) as [url]:
        answers = at_once([url], interrupted(url), 20)
    assert len(SENT) == 1
    results = sorted(result_of(frames) for frames in answers)
    assert results.count(ALREADY_RUN_STATEMENT) == 19
    assert all(frames[-1]["type"] == "RUN_FINISHED" for frames in answers)


@pytest.mark.parametrize("kind", ["file", "redis"])
def test_one_resume_at_two_replicas_sharing_the_store_runs_the_tool_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = tmp_path.as_uri() if kind == "file" else request.getfixturevalue("redis").url
    with bridges(2, approval_store=store) as urls:
        answers = at_once(urls, interrupted(urls[0]), 10)
    assert len(SENT) == 1
    assert sum(result_of(frames) == ALREADY_RUN_STATEMENT for frames in answers) == 9


def test_replicas_with_a_store_of_their_own_each_run_it_which_is_why_they_share_one() -> None:
    """The control: the in-process store is one process's. (This is the run-twice the shared
    store prevents, seen by the same test.)"""
    with bridges(2, approval_store="memory") as urls:
        resume = interrupted(urls[0])
        answers = [post(url, resume) for url in urls]
    assert len(SENT) == 2
    assert all(result_of(frames).startswith("mail sent to ") for frames in answers)


def test_with_redis_stopped_nothing_approved_runs_and_health_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path)
    server.start()
    try:
        with bridges(approval_store=server.url) as [url]:
            assert httpx.get(f"{url}/health").json() == {"status": "ok"}
            resume = interrupted(url)
            server.stop()
            refused = post(url, resume)
            health = httpx.get(f"{url}/health")
            server.start()  # back, empty (nothing is saved): the claim was never made
            healthy = httpx.get(f"{url}/health").json()
            ran = post(url, resume)
            again = post(url, resume)
    finally:
        server.stop()
    assert refused[-1]["type"] == "RUN_ERROR"
    assert refused[-1]["code"] == "approval_store_unavailable"
    assert server.url.split("/0")[0].removeprefix("redis://") in refused[-1]["message"]
    assert "TOOL_CALL_RESULT" not in [f["type"] for f in refused]
    assert health.status_code == 200
    assert health.json() == {"status": "degraded", "approval_store": "unavailable"}
    assert healthy == {"status": "ok"}
    assert result_of(ran).startswith("mail sent to ") and result_of(again) == ALREADY_RUN_STATEMENT
    assert len(SENT) == 1


def test_the_stores_password_is_a_secret(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A Redis that wants a password: with it, approvals run once; with a wrong one, the store
    is unavailable. Neither password shows in a frame, a body, a recording or a log line."""
    password, wrong = "Zr8Qm2Lx5Vc9Nb4Ht7Kp", "Wq3Ej6Ty1Ui0Op4As7Df"
    server = RedisServer(tmp_path, password=password)
    server.start()
    caplog.set_level(logging.DEBUG)
    shown: list[str] = []
    try:
        with bridges(approval_store=server.url, record_dir=str(tmp_path / "runs")) as [url]:
            resume = interrupted(url)
            answers = [post(url, resume), post(url, resume)]
            shown += [str(answers), httpx.get(f"{url}/health").text]
            logging.getLogger("agui_bridge").warning("the store is %s", server.url)
        with bridges(approval_store=server.url.replace(password, wrong)) as [url]:
            refused = post(url, interrupted(url))
            health = httpx.get(f"{url}/health").json()
            shown += [str(refused), str(health)]
            logging.getLogger("agui_bridge").warning("the store is %s", wrong)
    finally:
        server.stop()
    assert [result_of(frames) for frames in answers][1] == ALREADY_RUN_STATEMENT
    assert refused[-1]["code"] == "approval_store_unavailable"
    assert health == {"status": "degraded", "approval_store": "unavailable"}
    assert len(SENT) == 1
    shown += [path.read_text() for path in (tmp_path / "runs").iterdir()]
    shown.append(caplog.text)
    assert "the store is redis://:" in caplog.text
    assert not [text for text in shown if password in text or wrong in text]


# --- the stores -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[ClaimStore]:
    store = claim_store(url)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_a_claim_is_taken_once_even_when_asked_at_once(store_url: str) -> None:
    expires = datetime.now(UTC) + timedelta(minutes=15)
    key = claim_key(f"int1.one-{time.monotonic_ns()}")
    async with opened(store_url) as store:
        taken = await asyncio.gather(*(store.claim(key, expires) for _ in range(20)))
        other = await store.claim(claim_key(f"int1.two-{time.monotonic_ns()}"), expires)
    assert taken.count(True) == 1 and other is True


@pytest.mark.anyio
async def test_an_expired_claim_goes_and_a_live_one_stays_until_its_interrupt_expires(
    store_url: str,
) -> None:
    """A claim lives until the interrupt's expiry plus ``CLOCK_SKEW``: one whose time is up
    is gone (the store stays bounded), one whose time is not stays."""
    now = datetime.now(UTC)
    ending = now - timedelta(seconds=CLOCK_SKEW) + timedelta(seconds=1.5)
    key = claim_key(f"int1.ending-{time.monotonic_ns()}")
    async with opened(store_url) as store:
        assert await store.claim(key, ending) is True
        assert await store.claim(key, ending) is False
        await asyncio.sleep(2.6)
        assert await store.claim(key, ending) is True  # expired: gone, taken afresh
        lasting = claim_key(f"int1.lasting-{time.monotonic_ns()}")
        assert await store.claim(lasting, now + timedelta(minutes=15)) is True
        assert await store.claim(lasting, now + timedelta(minutes=15)) is False


@pytest.mark.anyio
async def test_redis_keeps_a_claim_as_long_as_its_interrupt_plus_the_skew(
    redis: RedisServer,
) -> None:
    from redis.asyncio import Redis

    expires = datetime.now(UTC) + timedelta(minutes=15)
    key = claim_key(f"int1.ttl-{time.monotonic_ns()}")
    store = RedisClaims(redis.url)
    client = Redis.from_url(redis.url)
    try:
        assert await store.claim(key, expires) is True
        ttl = await client.pttl(f"agui-bridge:approval:{key}") / 1000
    finally:
        await store.aclose()
        await client.aclose()
    assert 15 * 60 + CLOCK_SKEW - 5 <= ttl <= 15 * 60 + CLOCK_SKEW


@pytest.mark.anyio
async def test_the_memory_and_file_stores_forget_expired_claims(tmp_path: Path) -> None:
    gone = datetime.now(UTC) - timedelta(seconds=CLOCK_SKEW + 10)
    memory = MemoryClaims()
    files = FileClaims(tmp_path)
    for index in range(5):
        await memory.claim(claim_key(f"old-{index}"), gone)
        await files.claim(claim_key(f"old-{index}"), gone)
    files._swept = 0.0  # as if the last sweep were long ago
    await asyncio.sleep(1.1)
    fresh = datetime.now(UTC) + timedelta(minutes=1)
    await memory.claim(claim_key("new"), fresh)
    await files.claim(claim_key("new"), fresh)
    assert len(memory) == 1
    names = await anyio.to_thread.run_sync(lambda: [path.name for path in tmp_path.iterdir()])
    assert [name.endswith(claim_key("new")) for name in names] == [True]


@pytest.mark.anyio
async def test_a_store_that_cannot_answer_raises_and_says_where(tmp_path: Path) -> None:
    port = RedisServer(tmp_path).port  # nothing listens there
    async with opened(f"redis://user:pw-Xy7@127.0.0.1:{port}/0") as store:
        assert await store.available() is False
        with pytest.raises(ApprovalStoreError) as raised:
            await store.claim("k", datetime.now(UTC) + timedelta(minutes=1))
    assert f"redis://127.0.0.1:{port}/0" in raised.value.message
    assert "pw-Xy7" not in raised.value.message
    folder = tmp_path / "not-there"
    async with opened(folder.as_uri()) as store:
        assert await store.available() is False
        with pytest.raises(ApprovalStoreError):
            await store.claim("k", datetime.now(UTC) + timedelta(minutes=1))


def test_valkey_urls_and_unknown_stores() -> None:
    assert isinstance(claim_store("valkey://127.0.0.1:1/0"), RedisClaims)
    with pytest.raises(ValueError, match=r"approval_store \(--approval-store\) must be memory"):
        scripted_config("http://127.0.0.1:1", approval_store="mysql://db/claims")


def test_the_flag_and_the_variable_name_the_store_and_its_password_is_not_shown() -> None:
    url = "redis://:Pw4Xq8Lz2Mn6@redis.internal:6379/0"
    args = build_parser().parse_args(["serve", "--model", "m", "--approval-store", url])
    config = config_from_args(
        args, upstream_url="http://127.0.0.1:1/v1", model="m", models=[], api_key=None
    )
    from_env = config_from_env(
        {
            "AGUI_BRIDGE_UPSTREAM_URL": "http://127.0.0.1:1/v1",
            "AGUI_BRIDGE_MODEL": "m",
            "AGUI_BRIDGE_APPROVAL_STORE": url,
        }
    )
    plain = build_parser().parse_args(["serve", "--model", "m"])
    assert config.approval_store == from_env.approval_store == url
    assert "Pw4Xq8Lz2Mn6" not in repr(config)
    assert plain.approval_store == "memory"


def test_two_interrupts_for_one_call_in_one_second_are_two_approvals() -> None:
    """A model (or the scripted one) that repeats a call id in a thread gets a new interrupt each
    time: a nonce in the token, so that approving one does not use the other up. A token of
    before, without the nonce, still holds."""
    fields = {
        "thread_id": "t",
        "tool_call_id": "call_1",
        "tool_name": "send_mail",
        "arguments": "{}",
        "expires_at": datetime(2030, 1, 1, tzinfo=UTC),
    }
    secret = SECRET.encode()
    one, two = sign_interrupt(secret, **fields), sign_interrupt(secret, **fields)
    assert one != two and claim_key(one) != claim_key(two)
    old_payload = base64.urlsafe_b64encode(b'{"c":"call_1","e":1893456000}').rstrip(b"=").decode()
    mac = _mac(secret, old_payload, "t", "call_1", "send_mail", "{}")
    old = f"int1.{old_payload}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    check = {k: v for k, v in fields.items() if k != "expires_at"}
    now = datetime(2029, 1, 1, tzinfo=UTC)
    for token in (one, two, old):
        assert verify_interrupt(secret, token, **check, now=now).tool_call_id == "call_1"


def test_a_redis_store_without_the_redis_client_stops_at_start_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bridge.config

    monkeypatch.setattr(bridge.config, "importable", lambda module: module != "redis")
    with pytest.raises(ValueError, match=r"pip install 'agui-bridge\[redis\]'"):
        scripted_config("http://127.0.0.1:1", approval_store="redis://127.0.0.1:6379/0")
    assert scripted_config("http://127.0.0.1:1", approval_store="memory").approval_store
