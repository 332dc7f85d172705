"""MCP servers' tools, run by the bridge: the SDK's own server (examples/mcp_server.py) over
stdio and over streamable HTTP, a server that cannot start, one that dies mid-way."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.config import BridgeConfig
from bridge.serve.http import bridge as bridge_http
from bridge.serve.http.app import create_app
from bridge.serve.tools.mcp_tools import McpStartError
from servers import (
    TOOLS,
    free_port,
    mcp_http_server,
    messages_from,
    post,
    run_input,
    scripted_stack,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "mcp_server.py"
CRASHY = ROOT / "tests" / "mcp_crash_server.py"


def ask(text: str, **extra: Any) -> dict[str, Any]:
    return run_input([{"id": "u1", "role": "user", "content": text}], **extra)


def results(frames: list[dict[str, Any]]) -> dict[str, str]:
    names = {f["toolCallId"]: f["toolCallName"] for f in frames if f["type"] == "TOOL_CALL_START"}
    return {names[f["toolCallId"]]: f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"}


@pytest.fixture(scope="module")
def http_mcp() -> Iterator[str]:
    """The example server over streamable HTTP, in a process of its own."""
    with mcp_http_server(EXAMPLE) as url:
        yield url


@pytest.fixture(scope="module", params=["stdio", "http"])
def target(request: pytest.FixtureRequest) -> str:
    if request.param == "stdio":
        return f"python {EXAMPLE}"
    url: str = request.getfixturevalue("http_mcp")
    return url


def test_tools_listed_at_start_and_run_in_the_run(target: str) -> None:
    with scripted_stack(mcp_servers={"srv": target}) as stack:
        caps = httpx.get(f"{stack.bridge_url}/capabilities").json()
        assert caps["custom"]["serverTools"] == [
            "srv__get_time",
            "srv__add",
            "srv__fail",
            "srv__sleep",
        ]
        frames = post(stack.bridge_url, ask("What time is it?"))
        offered = {
            t["function"]["name"]: t["function"] for t in stack.upstream_requests[0]["tools"]
        }
        failed = post(stack.bridge_url, ask("Please srv__fail now"))
        added = post(stack.bridge_url, ask("Please srv__add them"))
    assert offered["srv__get_time"]["description"].startswith("The current time in a time zone")
    assert offered["srv__add"]["parameters"]["required"] == ["a", "b"]
    got = results(frames)
    assert list(got) == ["srv__get_time"] and got["srv__get_time"].endswith("(UTC)")
    # The server's text blocks, as they are: a string is not JSON-encoded on its way.
    assert got["srv__get_time"][0].isdigit()
    assert results(added) == {"srv__add": "2"}  # 1 + 1, as the SDK's server writes it
    assert frames[-1]["type"] == "RUN_FINISHED" and "outcome" not in frames[-1]
    # The SDK's server words it: "Error executing tool fail: <the reason>".
    assert list(results(failed)) == ["srv__fail"]
    assert results(failed)["srv__fail"].startswith("Error: srv__fail: ")
    assert results(failed)["srv__fail"].endswith("fail: Please srv__fail now")
    assert failed[-1]["type"] == "RUN_FINISHED"


def test_a_python_tool_an_mcp_tool_and_a_frontend_tool_in_one_turn(http_mcp: str) -> None:
    def get_weather_report() -> str:
        """Not asked for here."""
        return "sunny"

    question = "What time is it? And make the background lightblue."
    with scripted_stack(tools=[get_weather_report], mcp_servers={"srv": http_mcp}) as stack:
        frames = post(stack.bridge_url, ask(question, tools=TOOLS))
        calls = {
            f["toolCallName"]: f["toolCallId"] for f in frames if f["type"] == "TOOL_CALL_START"
        }
        assert set(results(frames)) == {"srv__get_time"}
        assert frames[-1]["outcome"]["pendingToolCallIds"] == [calls["change_background"]]
        history = [{"id": "u1", "role": "user", "content": question}, *messages_from(frames)]
        history.append(
            {"id": "t", "role": "tool", "toolCallId": calls["change_background"], "content": "ok"}
        )
        answer = post(stack.bridge_url, run_input(history, tools=TOOLS))
        stored = next(m for m in history if m["role"] == "tool")
        stored["content"] = json.dumps(stored["content"])  # kept JSON-encoded by the client
        post(stack.bridge_url, run_input(history, tools=TOOLS))
        as_sent, encoded = stack.upstream_requests[1:]
    assert answer[-1]["type"] == "RUN_FINISHED"
    # The MCP server's text goes upstream as the client was sent it, whichever form came back.
    sent = {m["tool_call_id"]: m["content"] for m in as_sent["messages"] if m["role"] == "tool"}
    assert sent[calls["srv__get_time"]] == results(frames)["srv__get_time"]
    assert json.dumps(encoded) == json.dumps(as_sent)


def test_an_mcp_servers_tools_have_jsonschema_imported_off_the_loop(
    http_mcp: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCP tools come once the loop runs: jsonschema's import (a second with its format
    checkers) is made in a worker thread, not in the loop's."""
    in_loop: list[bool] = []
    real = bridge_http.load_jsonschema

    def load() -> None:
        try:
            asyncio.get_running_loop()
            in_loop.append(True)
        except RuntimeError:
            in_loop.append(False)
        real()

    monkeypatch.setattr(bridge_http, "load_jsonschema", load)
    with scripted_stack(mcp_servers={"srv": http_mcp}) as stack:
        frames = post(stack.bridge_url, ask("What time is it?"))
    assert in_loop == [False]
    assert "jsonschema" in sys.modules
    assert list(results(frames)) == ["srv__get_time"]


def test_a_call_that_hangs_times_out_and_the_server_keeps_serving(http_mcp: str) -> None:
    with scripted_stack(mcp_servers={"srv": http_mcp}, tool_timeout=0.5) as stack:
        slow = post(stack.bridge_url, ask("srv__sleep for me"))
        fine = post(stack.bridge_url, ask("What time is it?"))
    assert results(slow) == {
        "srv__sleep": "Error: the tool srv__sleep did not answer within 0.5 s."
    }
    assert results(fine)["srv__get_time"].endswith("(UTC)")


BROKEN = "python -c 'raise SystemExit(3)'"


def test_a_server_that_cannot_start_stops_the_start() -> None:
    """A library user's app (create_app) raises at startup, naming the server and why."""
    config = BridgeConfig(
        upstream_url="http://127.0.0.1:1/v1", model="m", mcp_servers={"gone": BROKEN}
    )
    app = create_app(config)

    async def start() -> None:
        async with app.router.lifespan_context(app):
            pass

    with pytest.raises(McpStartError) as raised:
        asyncio.run(start())
    message = str(raised.value)
    assert message.startswith("MCP server gone (python -c 'raise SystemExit(3)') could not start")
    assert "--mcp-optional gone" in message and "\n" not in message


def test_an_optional_server_that_cannot_start_is_reported_once_and_health_says_degraded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.ERROR, "agui_bridge"),
        scripted_stack(
            mcp_servers={"gone": BROKEN, "srv": f"python {EXAMPLE}"},
            mcp_optional=("gone",),
            connect_timeout=10,
        ) as stack,
    ):
        health = httpx.get(f"{stack.bridge_url}/health")
        caps = httpx.get(f"{stack.bridge_url}/capabilities").json()
        frames = post(stack.bridge_url, ask("What time is it?"))
    # 200: it serves (a load balancer keeps it), without the tools of the server named.
    assert health.status_code == 200
    assert health.json() == {"status": "degraded", "mcp_unavailable": ["gone"]}
    assert caps["custom"]["serverTools"] == ["srv__get_time", "srv__add", "srv__fail", "srv__sleep"]
    assert results(frames)["srv__get_time"].endswith("(UTC)")
    assert frames[-1]["type"] == "RUN_FINISHED"
    reports = [r.getMessage() for r in caplog.records if "MCP server gone" in r.getMessage()]
    assert len(reports) == 1 and "is not available" in reports[0]
    assert "serving without its tools" in reports[0]


def test_optional_names_must_be_configured_servers() -> None:
    with pytest.raises(ValueError, match="optional MCP servers that are not configured"):
        BridgeConfig(upstream_url="http://h/v1", model="m", mcp_optional=("nope",))


def test_a_server_that_dies_answers_each_call_with_an_error() -> None:
    with scripted_stack(mcp_servers={"crashy": f"python {CRASHY}"}) as stack:
        assert httpx.get(f"{stack.bridge_url}/health").json() == {"status": "ok"}
        died = post(stack.bridge_url, ask("Please crashy__crash"))
        after = post(stack.bridge_url, ask("What time is it?"))
        health = httpx.get(f"{stack.bridge_url}/health")
    assert results(died)["crashy__crash"].startswith("Error: crashy__crash: ")
    assert died[-1]["type"] == "RUN_FINISHED"
    # Each later call says the server is gone (the SDK: "Connection closed").
    assert results(after)["crashy__get_time"].startswith(
        "Error: crashy__get_time: the MCP server crashy "
    )
    assert "Connection closed" in results(after)["crashy__get_time"]
    assert after[-1]["type"] == "RUN_FINISHED"
    assert health.status_code == 200
    assert health.json() == {"status": "degraded", "mcp_unavailable": ["crashy"]}


def test_a_name_taken_twice_is_an_error_at_start(http_mcp: str) -> None:
    def srv__add() -> int:
        """Clashes with the MCP server's add."""
        return 0

    config = BridgeConfig(
        upstream_url="http://127.0.0.1:1/v1", model="m", mcp_servers={"srv": http_mcp}
    )
    bridge = create_app(config, tools=[srv__add]).state.bridge

    async def start() -> None:
        try:
            await bridge.start()
        finally:
            await bridge.aclose()

    with pytest.raises(ValueError, match="two server tools are named 'srv__add'"):
        asyncio.run(start())


@pytest.mark.parametrize(
    "name", ["a__b", "", "has space", "x" * 40], ids=["double-underscore", "empty", "space", "long"]
)
def test_server_names_that_would_make_bad_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="MCP server name"):
        BridgeConfig(upstream_url="http://h/v1", model="m", mcp_servers={name: "python x.py"})


def test_the_fastapi_example_runs_its_python_tools_and_the_mcp_example() -> None:
    from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
    from examples import fastapi_tools_app
    from servers import serve

    with serve(create_scripted_upstream()) as upstream:
        app = fastapi_tools_app.build(
            f"{upstream}/v1", DEFAULT_SCRIPTED_MODEL, mcp=f"python {EXAMPLE}"
        )
        with serve(app) as url:
            caps = httpx.get(f"{url}/agent/capabilities").json()
            frames = post(f"{url}/agent", ask("Please get_order and search_docs"))
            timed = post(f"{url}/agent", ask("What time is it?"))
    assert caps["custom"]["serverTools"][:2] == ["get_order", "search_docs"]
    assert "clock__get_time" in caps["custom"]["serverTools"]
    got = results(frames)
    assert got["get_order"] == '{"number":1,"status":"unknown","items":[]}'
    assert got["search_docs"] == '["Returns and refunds"]'  # "and", from the scripted query
    assert results(timed)["clock__get_time"].endswith("(UTC)")


# --- the command: a server that cannot start, an optional one, the servers' logs ------------

SECRET = "sk-test-mcp-logs-0123456789abcdefXYZ"


def _command(*mcp: str, port: int = 0) -> list[str]:
    command = [sys.executable, "-m", "bridge", "serve", "--upstream-url", "http://127.0.0.1:9/v1"]
    command += ["--model", "m", "--port", str(port), "--log-level", "warning"]
    for flag in mcp:
        command += ["--mcp", flag]
    return command


def test_the_command_stops_before_serving_with_one_line_naming_the_server() -> None:
    port = free_port()
    web = "web=http://alice:s3cret-pw@127.0.0.1:9/mcp?token=tok-123"
    done = subprocess.run(
        _command(f"gone={BROKEN}", web, port=port),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # no "open http://…" line for a bridge that never served
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("agui-bridge: MCP server gone (python -c 'raise SystemExit(3)') ")
    assert "could not start" in line and "--mcp-optional gone" in line
    assert "MCP server web (http://127.0.0.1:9/mcp?token=[redacted]) could not start" in line
    assert "s3cret" not in line and "alice" not in line and "tok-123" not in line
    with pytest.raises(httpx.TransportError):  # it never listened
        httpx.get(f"http://127.0.0.1:{port}/agent/health", timeout=2)


def test_the_command_serves_without_an_optional_server_and_health_says_so() -> None:
    command = [*_command(f"gone={BROKEN}", f"srv=python {EXAMPLE}"), "--mcp-optional", "gone"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        found = re.search(r"open (http://127\.0\.0\.1:\d+)/ ", process.stdout.readline())
        assert found
        health = httpx.get(f"{found.group(1)}/agent/health", timeout=10)
        caps = httpx.get(f"{found.group(1)}/agent/capabilities", timeout=10).json()
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert health.status_code == 200
    assert health.json() == {"status": "degraded", "mcp_unavailable": ["gone"]}
    assert "srv__get_time" in caps["custom"]["serverTools"]
    assert "MCP server gone (python -c 'raise SystemExit(3)') is not available" in err


def test_a_servers_stderr_and_the_sdks_log_are_ours_and_redacted() -> None:
    """The server writes the key to its stderr and to its stdout (not JSON-RPC: the SDK logs
    the line's ends): both reach the bridge's log without it, the stderr line under the
    server's name."""
    noisy = f"noisy=python {CRASHY} --say 'oops the key is {SECRET}' --junk 'junk {SECRET} junk'"
    process = subprocess.Popen(
        _command(noisy),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": SECRET},
    )
    try:
        assert process.stdout is not None
        found = re.search(r"open (http://127\.0\.0\.1:\d+)/ ", process.stdout.readline())
        assert found
        assert httpx.get(f"{found.group(1)}/agent/health", timeout=10).json()["status"] == "ok"
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert "WARNING:  [mcp noisy] oops the key is [redacted]" in err.splitlines()
    assert "Failed to parse JSONRPC message from server" in err  # the SDK's log, redacted
    assert "junk [redacted] junk" in err
    pieces = {SECRET[i : i + 8] for i in range(len(SECRET) - 7)}
    assert not [piece for piece in pieces if piece in out + err]
