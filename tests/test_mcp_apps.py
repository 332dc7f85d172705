"""MCP Apps over real HTTP and real MCP servers (stdio and streamable HTTP): a UI tool's call
is followed by the ``mcp-apps`` activity; a widget's proxied requests are answered without the
model, only for the four methods, only for our servers and what they list; approvals hold."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from servers import Stack, mcp_http_server, messages_from, post, run_input, scripted_stack

pytest.importorskip("mcp")

SERVER = Path(__file__).resolve().parent / "mcp_ui_server.py"
ASK = "Please show ui__board"


@contextmanager
def stack(transport: str = "stdio", **overrides: Any) -> Iterator[Stack]:
    if transport == "http":
        with (
            mcp_http_server(SERVER) as url,
            scripted_stack(mcp_servers={"ui": url}, **overrides) as made,
        ):
            yield made
    else:
        target = f"python {SERVER}"
        with scripted_stack(mcp_servers={"ui": target}, **overrides) as made:
            yield made


def widget(made: Stack, request: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    """A proxied run as CopilotKit's renderer sends it: the chat's thread, no tools, only the
    request in forwardedProps."""
    body = run_input(threadId="thread-w", forwardedProps={"__proxiedMCPRequest": request}, **extra)
    return post(made.bridge_url, body)


def server_hash(made: Stack) -> str:
    frames = post(made.bridge_url, run_input([{"id": "u", "role": "user", "content": ASK}]))
    [activity] = [f for f in frames if f["type"] == "ACTIVITY_SNAPSHOT"]
    return str(activity["content"]["serverHash"])


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_ui_tools_result_is_followed_by_its_activity(transport: str) -> None:
    with stack(transport) as made:
        caps = httpx.get(f"{made.bridge_url}/capabilities").json()
        frames = post(made.bridge_url, run_input([{"id": "u", "role": "user", "content": ASK}]))
        first_request = made.upstream_requests[0]
    offered = {t["function"]["name"]: t["function"] for t in first_request["tools"]}
    assert set(caps["custom"]["serverTools"]) == {"ui__board", "ui__plain"}  # not ui__bump
    assert "ui__bump" not in offered
    assert (
        offered["ui__board"]["description"] == "Show the board\n[UI Resource: ui://board/app.html]"
    )
    kinds = [f["type"] for f in frames]
    at = kinds.index("TOOL_CALL_RESULT")
    assert kinds[at + 1] == "ACTIVITY_SNAPSHOT"
    result, activity = frames[at], frames[at + 1]
    call = next(f for f in frames if f["type"] == "TOOL_CALL_START")
    assert result["toolCallId"] == call["toolCallId"]
    assert result["content"].endswith("(with apps)")  # our client announced the extension
    assert activity["activityType"] == "mcp-apps" and activity["replace"] is True
    content = activity["content"]
    assert content["resourceUri"] == "ui://board/app.html" and content["serverId"] == "ui"
    assert isinstance(content["toolInput"], dict)
    assert content["result"]["content"][0]["text"] == result["content"]
    assert len(content["serverHash"]) == 32
    # The model's next turn goes on in the same run, as after any server tool.
    assert kinds[-1] == "RUN_FINISHED" and kinds.count("TEXT_MESSAGE_START") == 1
    assert kinds.index("TEXT_MESSAGE_START") > at + 1


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_widget_reads_its_html_and_calls_its_tool_without_the_model(transport: str) -> None:
    with stack(transport, metrics=True) as made:
        hash_ = server_hash(made)
        asked = len(made.upstream_requests)
        read = widget(
            made,
            {"serverHash": hash_, "serverId": "ui", "method": "resources/read",
             "params": {"uri": "ui://board/app.html"}},
        )  # fmt: skip
        called = widget(
            made,
            {"serverHash": hash_, "serverId": "ui", "method": "tools/call",
             "params": {"name": "bump", "arguments": {}}},
        )  # fmt: skip
        pinged = widget(made, {"serverHash": hash_, "serverId": "ui", "method": "ping"})
        logged = widget(
            made,
            {"serverHash": hash_, "serverId": "ui", "method": "notifications/message",
             "params": {"level": "info", "data": "hello from the widget"}},
        )  # fmt: skip
        assert len(made.upstream_requests) == asked  # the model was not called
        text = httpx.get(f"{made.bridge_url}/metrics").text
    for frames in (read, called, pinged, logged):
        assert [f["type"] for f in frames] == ["RUN_STARTED", "RUN_FINISHED"]
        assert frames[-1]["threadId"] == "thread-w"
    [item] = read[-1]["result"]["contents"]
    assert item["uri"] == "ui://board/app.html" and item["mimeType"] == "text/html;profile=mcp-app"
    assert item["text"].startswith("<!doctype html>") and item["_meta"]["ui"]["prefersBorder"]
    assert called[-1]["result"]["content"][0]["text"].isdigit()
    assert "isError" not in called[-1]["result"] or called[-1]["result"]["isError"] is False
    assert logged[-1]["result"] == {"success": True} and pinged[-1]["result"] == {}
    counts = {
        (s.labels["method"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "agui_bridge_proxied_mcp_requests_total" and s.labels["server"] == "ui"
    }
    assert counts == {
        ("resources/read", "ok"): 1,
        ("tools/call", "ok"): 1,
        ("ping", "ok"): 1,
        ("notifications/message", "ok"): 1,
    }


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        ({"serverId": "ui", "method": "tools/list"}, "not allowed"),
        ({"serverId": "ui", "method": "tools/call", "params": {"name": "nope"}}, "no tool 'nope'"),
        (
            {"serverId": "ui", "method": "resources/read", "params": {"uri": "notes://secret"}},
            "ui://",
        ),
        ({"serverId": "other", "method": "ping"}, "unknown MCP server: other"),
        ({"serverId": "ui", "serverHash": "0" * 32, "method": "ping"}, "unknown MCP server"),
        ({"serverHash": "", "method": "ping"}, "unknown MCP server: none named"),
        ("not an object", "must be an object"),
    ],
)
def test_what_a_widget_may_not_ask_is_a_clear_error(request_: Any, says: str) -> None:
    with stack() as made:
        asked = len(made.upstream_requests)
        frames = widget(made, request_)
        assert len(made.upstream_requests) == asked
    assert [f["type"] for f in frames] == ["RUN_STARTED", "RUN_FINISHED"]
    result = frames[-1]["result"]
    assert says in result["error"] and result["isError"] is True
    assert result["content"] == [{"type": "text", "text": result["error"]}]
    assert "not for widgets" not in str(result) and "Traceback" not in str(result)


def test_under_approval_a_widget_calls_only_what_its_server_gives_the_app() -> None:
    secret = "Qx7Vb2Kp9Lm4Nz8Rt1Wy6Hd5Jf0Gs3"
    with stack(approve=("ui__*",), secret=secret) as made:
        ask = [{"id": "u1", "role": "user", "content": ASK}]
        first = run_input(ask)
        frames = post(made.bridge_url, first)
        [interrupt] = frames[-1]["outcome"]["interrupts"]  # the model's call waits
        assert "ACTIVITY_SNAPSHOT" not in [f["type"] for f in frames]
        resumed = post(
            made.bridge_url,
            run_input(
                [*ask, *messages_from(frames)],
                threadId=first["threadId"],
                runId=first["runId"],
                resume=[{"interruptId": interrupt["id"], "status": "resolved",
                         "payload": {"approved": True}}],
            ),
        )  # fmt: skip
        kinds = [f["type"] for f in resumed]
        assert kinds[kinds.index("TOOL_CALL_RESULT") + 1] == "ACTIVITY_SNAPSHOT"
        hash_ = next(f for f in resumed if f["type"] == "ACTIVITY_SNAPSHOT")["content"][
            "serverHash"
        ]
        for name, allowed in (("bump", True), ("board", False), ("plain", False)):
            answer = widget(
                made,
                {"serverHash": hash_, "serverId": "ui", "method": "tools/call",
                 "params": {"name": name, "arguments": {}}},
            )[-1]["result"]  # fmt: skip
            if allowed:
                assert answer["content"][0]["text"].isdigit(), answer
            else:
                assert "waits for approval" in answer["error"], answer


def test_a_proxied_run_needs_the_token_like_any_run() -> None:
    with stack(auth_token="widget-token-8c1d2e") as made:
        body = run_input(
            forwardedProps={"__proxiedMCPRequest": {"serverId": "ui", "method": "ping"}}
        )
        assert httpx.post(made.bridge_url, json=body).status_code == 401
        ok = httpx.post(
            made.bridge_url, json=body, headers={"Authorization": "Bearer widget-token-8c1d2e"}
        )
    assert ok.status_code == 200 and '"type":"RUN_FINISHED"' in ok.text


def test_a_proxied_run_counts_against_the_concurrency_limit() -> None:
    """With the one run allowed streaming, a widget's request is refused like any run."""
    with stack(max_concurrent_runs=1, pace=0.05) as made:
        body = run_input()
        with httpx.stream("POST", made.bridge_url, json=body, timeout=30) as streaming:
            lines = streaming.iter_lines()  # kept: a dropped iterator closes the response
            next(lines)  # the model's run holds the one slot
            ping = {"__proxiedMCPRequest": {"serverId": "ui", "method": "ping"}}
            refused = httpx.post(made.bridge_url, json=run_input(forwardedProps=ping))
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "too_many_runs"
        assert post(made.bridge_url, run_input(forwardedProps=ping))[-1]["result"] == {}
