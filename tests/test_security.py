"""No request steers the bridge; the key never leaks; CORS, auth token, run cap, bad input,
graceful shutdown."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agui_rules import check_frames, parse_body
from bridge.serve.http.app import create_app
from servers import Stack, free_port, run_input, scripted_config, scripted_stack, serve

SECRET = "sk-secret-do-not-leak-4242"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack(api_key=SECRET, include_state=True) as running:
        yield running


def test_no_request_field_changes_the_upstream_url_headers_or_key(stack: Stack) -> None:
    # An attacker's endpoint, to catch any request the bridge might be steered to send.
    stolen: list[Any] = []

    async def catch(request: Request) -> Response:
        stolen.append(dict(request.headers))
        return JSONResponse({})

    trap_app = Starlette(routes=[Route("/{path:path}", catch, methods=["GET", "POST"])])
    with serve(trap_app) as trap:
        steer = {
            "upstream_url": trap, "upstreamUrl": trap, "base_url": trap, "baseURL": trap,
            "url": f"{trap}/v1/chat/completions", "api_base": trap, "headers": {"Authorization": "Bearer evil"},
            "extra_headers": {"X-Evil": "1"}, "api_key": "evil", "apiKey": "evil", "model": "scripted-plain",
        }  # fmt: skip
        seen = len(stack.upstream_requests)
        response = httpx.post(
            f"{stack.bridge_url}/",
            json=run_input(
                forwardedProps=steer,
                state={"upstream_url": trap, "headers": {"X-Evil": "1"}},
                context=[{"description": "upstream_url", "value": trap}],
            ),
            headers={
                "X-Forwarded-Host": "evil",
                "Authorization": "Bearer evil",
                "Host-Override": trap,
            },
            timeout=30,
        )
        frames = check_frames(parse_body(response.text))
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert stolen == []
    sent = stack.upstream_requests[seen]
    assert sent["model"] == "scripted-plain"  # the one steer that is allowed: a configured model
    assert not {"upstream_url", "url", "headers", "api_key", "extra_headers"} & set(sent)


def test_the_key_never_appears_in_events_errors_or_logs(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts = [httpx.post(f"{stack.bridge_url}/", json=run_input(), timeout=30).text]
    texts.append(httpx.get(f"{stack.bridge_url}/capabilities").text)
    # Errors too: a model the upstream refuses (HTTP 404 with a message) and an unreachable one.
    config = scripted_config(stack.upstream_url, api_key=SECRET, model="nope")
    with serve(create_app(config)) as url:
        texts.append(httpx.post(f"{url}/", json=run_input(), timeout=30).text)
    closed = free_port()
    with serve(create_app(scripted_config(f"http://127.0.0.1:{closed}", api_key=SECRET))) as url:
        texts.append(httpx.post(f"{url}/", json=run_input(), timeout=30).text)
    assert "RUN_ERROR" in texts[2] and "RUN_ERROR" in texts[3]
    texts.append(caplog.text)
    texts.append(repr(config))
    assert all(SECRET not in text for text in texts)


def test_cors_is_closed_by_default(stack: Stack) -> None:
    preflight = httpx.options(
        f"{stack.bridge_url}/",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers
    response = httpx.post(
        f"{stack.bridge_url}/", json=run_input(), headers={"Origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in response.headers


def test_cors_allow_list() -> None:
    with scripted_stack(cors_origins=("https://app.example",)) as running:
        ok = httpx.options(
            f"{running.bridge_url}/",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        )
        assert ok.headers["access-control-allow-origin"] == "https://app.example"
        other = httpx.options(
            f"{running.bridge_url}/",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"


def test_auth_token() -> None:
    with scripted_stack(auth_token="t0ken") as running:
        url = f"{running.bridge_url}/"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic t0ken"}):
            refused = httpx.post(url, json=run_input(), headers=headers)
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
            assert refused.headers["www-authenticate"] == "Bearer"
        assert httpx.get(f"{running.bridge_url}/capabilities").status_code == 401
        assert httpx.get(f"{running.bridge_url}/health").status_code == 200  # for load balancers
        ok = httpx.post(
            url, json=run_input(), headers={"Authorization": "Bearer t0ken"}, timeout=30
        )
        assert check_frames(parse_body(ok.text))[-1]["type"] == "RUN_FINISHED"


def test_concurrent_run_cap_answers_503_with_retry_after() -> None:
    with (
        scripted_stack(max_concurrent_runs=1, pace=0.05) as running,
        httpx.Client(timeout=30) as client,
        # One slow run holds the only place.
        client.stream("POST", f"{running.bridge_url}/", json=run_input()) as first,
    ):
        lines = first.iter_lines()  # kept: a dropped iterator closes the response
        next(lines)
        refused = httpx.post(f"{running.bridge_url}/", json=run_input())
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "too_many_runs"
        list(lines)  # let the first run finish
        again = httpx.post(f"{running.bridge_url}/", json=run_input(), timeout=30)
        assert again.status_code == 200


@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        (b"x" * 2048, {"content-type": "application/json"}, 413, "body_too_large"),
        (json.dumps(run_input(messages=[{"id": str(i), "role": "user", "content": "a"} for i in range(11)])).encode(), {"content-type": "application/json"}, 413, "too_many_messages"),
        (b"threadId=t", {"content-type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
        (b"\xff\xfe", {"content-type": "application/json"}, 400, "invalid_json"),
        (b"[]", {"content-type": "application/json"}, 422, "invalid_input"),
    ],
    ids=["too-large", "too-many-messages", "content-type", "not-utf8", "not-an-object"],
)  # fmt: skip
def test_bad_input_is_named_in_a_4xx(
    content: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    with scripted_stack(max_body_bytes=1024, max_messages=10) as running:
        response = httpx.post(f"{running.bridge_url}/", content=content, headers=headers)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=5), "role": st.sampled_from(["user", "assistant", "system", "tool", "reasoning", "developer", "activity", "wizard", ""])},
        optional={"content": JSON_VALUES, "toolCallId": JSON_VALUES, "toolCalls": JSON_VALUES, "name": JSON_VALUES},
    ),
    max_size=4,
)  # fmt: skip
BODIES = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries(
        {"threadId": st.text(max_size=5), "runId": st.text(max_size=5), "messages": MESSAGES},
        optional={"tools": JSON_VALUES, "context": JSON_VALUES, "state": JSON_VALUES, "forwardedProps": JSON_VALUES},
    ),
)  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=BODIES)
def test_fuzzed_bodies_never_get_a_5xx(stack: Stack, body: Any) -> None:
    response = httpx.post(f"{stack.bridge_url}/", json=body, timeout=30)
    assert response.status_code < 500, response.text
    if response.status_code == 200:
        check_frames(parse_body(response.text))
    else:
        error = response.json()["error"]
        assert error["code"] and error["message"]
        assert "Traceback" not in error["message"]


def test_sigterm_refuses_new_runs_and_ends_running_ones_with_shutting_down() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bridge", "demo", "--port", str(port), "--pace", "0.2", "--shutdown-grace", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/agent"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/agent/health", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the demo did not start"
                time.sleep(0.1)
        with httpx.stream("POST", url, json=run_input(), timeout=30) as running:
            lines = running.iter_lines()
            assert "RUN_STARTED" in next(line for line in lines if line.startswith("data:"))
            # A running run is one the model is answering: RUN_STARTED goes out before the
            # upstream is even asked (and in the demo the upstream is this same server).
            assert "_CONTENT" in next(line for line in lines if "_CONTENT" in line)
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            with pytest.raises(httpx.TransportError):  # the listener is closed: refused
                httpx.post(url, json=run_input(), timeout=5)
            rest = "\n".join(lines)
            ended = time.monotonic() - signalled
        assert '"code":"shutting_down"' in rest
        assert 0.9 < ended < 5
        assert proc.wait(timeout=15) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
    finally:
        proc.kill()
        proc.wait()
