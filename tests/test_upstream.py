"""The upstream client against real servers replaying recorded llama.cpp bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agui_rules import check_frames, parse_body
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from helpers import FIXTURES
from servers import free_port, run_input, serve

USER = {"id": "u", "role": "user", "content": "What is the weather in Paris?"}


def replay_server(
    name: str, *, refuse_stream_options: bool = False
) -> tuple[Starlette, list[dict[str, Any]]]:
    """An upstream that answers every chat request with a recorded llama.cpp response."""
    seen: list[dict[str, Any]] = []

    async def chat(request: Request) -> Response:
        body = await request.json()
        seen.append({"body": body, "headers": dict(request.headers)})
        if refuse_stream_options and "stream_options" in body:
            return JSONResponse(
                {"error": {"message": "Unrecognized request argument supplied: stream_options"}},
                status_code=400,
            )
        sse = FIXTURES / f"{name}.sse"
        if sse.exists():
            return Response(sse.read_bytes(), media_type="text/event-stream")
        status = int((FIXTURES / f"{name}.headers").read_text().split()[1])
        return Response(
            (FIXTURES / f"{name}.json").read_bytes(), status, media_type="application/json"
        )

    async def props(request: Request) -> Response:
        return Response(
            (FIXTURES / "deepseek_server_props.json").read_bytes(), media_type="application/json"
        )

    app = Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/props", props)]
    )
    return app, seen


@pytest.fixture
def key_env() -> Iterator[None]:
    os.environ["AGUI_TEST_KEY"] = "sk-test-123"
    yield
    del os.environ["AGUI_TEST_KEY"]


def test_bearer_key_model_and_stream_options_are_sent() -> None:
    upstream, seen = replay_server("deepseek_reasoning_stream_usage")
    with serve(upstream) as url:
        config = BridgeConfig(upstream_url=f"{url}/v1", model="qwen3", api_key="sk-test-123")
        with serve(create_app(config)) as bridge:
            frames = check_frames(parse_body(httpx.post(f"{bridge}/", json=run_input([USER])).text))
    assert seen[0]["headers"]["authorization"] == "Bearer sk-test-123"
    assert seen[0]["body"]["model"] == "qwen3"
    assert seen[0]["body"]["stream"] is True
    assert seen[0]["body"]["stream_options"] == {"include_usage": True}
    assert frames[-1]["usage"][0]["cachedInputTokens"] == 14
    assert "sk-test-123" not in json.dumps(frames)


def test_stream_options_refused_is_retried_without_them() -> None:
    upstream, seen = replay_server("deepseek_reasoning_stream", refuse_stream_options=True)
    with (
        serve(upstream) as url,
        serve(create_app(BridgeConfig(upstream_url=f"{url}/v1", model="m"))) as bridge,
    ):
        frames = check_frames(parse_body(httpx.post(f"{bridge}/", json=run_input([USER])).text))
    assert [("stream_options" in s["body"]) for s in seen] == [True, False]
    assert frames[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("deepseek_error_context_exceeded_stream", "upstream_http_400", "request (5008 tokens) exceeds the available context size (4096 tokens), try increasing it"),
        ("deepseek_error_messages_not_array", "upstream_http_400", "Expected 'messages' to be an array"),
    ],
)  # fmt: skip
def test_recorded_http_errors_become_run_errors(name: str, code: str, message: str) -> None:
    upstream, _ = replay_server(name)
    with (
        serve(upstream) as url,
        serve(create_app(BridgeConfig(upstream_url=f"{url}/v1", model="m"))) as bridge,
    ):
        frames = check_frames(parse_body(httpx.post(f"{bridge}/", json=run_input([USER])).text))
    assert frames[-1] == {"type": "RUN_ERROR", "message": message, "code": code}


def test_plain_json_answer_to_a_streaming_request_goes_through_the_same_path() -> None:
    upstream, _ = replay_server("deepseek_tools_parallel_nonstream")
    with (
        serve(upstream) as url,
        serve(create_app(BridgeConfig(upstream_url=f"{url}/v1", model="m"))) as bridge,
    ):
        frames = check_frames(parse_body(httpx.post(f"{bridge}/", json=run_input([USER])).text))
    assert frames[-1]["outcome"]["pendingToolCallIds"]
    assert [f["toolCallName"] for f in frames if f["type"] == "TOOL_CALL_START"] == [
        "get_time",
        "get_weather",
    ]


def test_llamacpp_props_shown_in_capabilities() -> None:
    upstream, _ = replay_server("deepseek_reasoning_stream")
    with (
        serve(upstream) as url,
        serve(create_app(BridgeConfig(upstream_url=f"{url}/v1", model="m"))) as bridge,
    ):
        caps = httpx.get(f"{bridge}/capabilities").json()
    assert caps["custom"]["llamaCpp"] == {"supportsPreserveReasoning": False}


def test_cli_serve_demo_and_scripted_upstream(key_env: None) -> None:
    """The console entry points, as separate processes, over real HTTP."""
    scripted_port, demo_port, serve_port = free_port(), free_port(), free_port()
    python = sys.executable
    procs = [
        subprocess.Popen([python, "-m", "bridge", "scripted-upstream", "--port", str(scripted_port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT),
        subprocess.Popen([python, "-m", "bridge", "demo", "--port", str(demo_port), "--pace", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT),
        subprocess.Popen(
            [python, "-m", "bridge", "serve", "--upstream-url", f"http://127.0.0.1:{scripted_port}/v1",
             "--model", "scripted-reasoning", "--api-key-env", "AGUI_TEST_KEY", "--port", str(serve_port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ),
    ]  # fmt: skip
    try:
        for port in (scripted_port, demo_port, serve_port):
            _wait_for(port)
        assert "scripted-plain" in httpx.get(f"http://127.0.0.1:{scripted_port}/v1/models").text
        for port in (demo_port, serve_port):
            response = httpx.post(
                f"http://127.0.0.1:{port}/agent", json=run_input([USER]), timeout=30
            )
            frames = check_frames(parse_body(response.text))
            assert frames[-1]["type"] == "RUN_FINISHED"
            assert any(f["type"] == "REASONING_MESSAGE_CONTENT" for f in frames)
    finally:
        for proc in procs:
            proc.terminate()
        outputs = [proc.communicate(timeout=10)[0].decode() for proc in procs]
    assert f"http://127.0.0.1:{demo_port}/" in outputs[1]
    assert "sk-test-123" not in "".join(outputs)


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def test_help_explains_every_option() -> None:
    from bridge.cli.parser import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, sub in commands.items():
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings} has no help"
    out = subprocess.run(
        [sys.executable, "-m", "bridge", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in (
        "--upstream-url",
        "--model",
        "--api-key-env",
        "--starts-in-reasoning",
        "--reasoning-tags",
        "--reasoning-history",
        "--reasoning-scope",
    ):
        assert flag in out


def test_bad_flag_values_are_clear_errors() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bridge", "serve", "--upstream-url", "ftp://x", "--model", "m"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "upstream_url must be an http(s) URL" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("failure", "code", "words"),
    [
        (httpx.ConnectError("[Errno -2] Name or service not known"), "upstream_unreachable", "could not connect"),
        (httpx.ConnectTimeout("timed out"), "upstream_timeout", "within 10 s"),
    ],
    ids=["dns-failure", "connect-timeout"],
)  # fmt: skip
def test_dns_failure_and_connect_timeout(failure: Exception, code: str, words: str) -> None:
    # Off-loopback addresses are out of bounds here: these two are raised by a mock transport.
    calls = []

    def fail(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise failure

    config = BridgeConfig(upstream_url="http://model.internal:8080/v1", model="m", retry_backoff=0)
    app = create_app(config, transport=httpx.MockTransport(fail))
    with serve(app) as bridge:
        frames = check_frames(parse_body(httpx.post(f"{bridge}/", json=run_input([USER])).text))
    assert frames[-1]["code"] == code
    assert words in frames[-1]["message"]
    assert "model.internal:8080" in frames[-1]["message"]
    posts = [call for call in calls if call.method == "POST"]  # auto's GET /props aside
    assert len(posts) == 1 + config.retries  # retried: nothing of an answer had begun
