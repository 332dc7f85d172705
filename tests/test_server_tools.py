"""Server tools (Python functions) over real HTTP: the bridge runs them inside one run, answers
each with TOOL_CALL_RESULT and streams the model's next turn; frontend calls stay pending."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import subprocess
import sys
import threading
import time
from typing import Annotated, Any

import httpx
import pytest
from pydantic import BaseModel, Field

from bridge.cli.demo import SCRIPTED_MODELS
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.tools.python_tools import python_tool, result_text
from servers import (
    TOOLS,
    joined,
    messages_from,
    post,
    run_input,
    scripted_stack,
    serve,
)

SECRET = "sk-test-server-tools-0123456789abcdef"


def get_order(order_id: int, with_items: bool = False) -> dict[str, Any]:
    """Look an order up.

    Args:
        order_id: The order's number.
        with_items: Also list what was ordered,
            line by line.
    """
    return {"order": order_id, "status": "shipped", "items": ["tea"] if with_items else []}


async def search_docs(query: str) -> list[str]:
    """Search the documentation."""
    await asyncio.sleep(0)
    return [f"docs about {query[:10]}"]


def get_time() -> str:
    """The current time."""
    return "12:00"


def ask(text: str, *, tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return run_input([{"id": "u1", "role": "user", "content": text}], tools=tools or [], **extra)


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


def results(frames: list[dict[str, Any]]) -> dict[str, str]:
    """Tool name → its TOOL_CALL_RESULT content."""
    names = {f["toolCallId"]: f["toolCallName"] for f in frames if f["type"] == "TOOL_CALL_START"}
    return {names[f["toolCallId"]]: f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"}


# --- the schema, from type hints and docstrings ---------------------------------------------


def test_schema_from_hints_and_docstring() -> None:
    tool = python_tool(get_order)
    assert tool.name == "get_order"
    assert tool.description == "Look an order up."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "order_id": {"type": "integer", "description": "The order's number."},
            "with_items": {
                "type": "boolean",
                "default": False,
                "description": "Also list what was ordered, line by line.",
            },
        },
        "required": ["order_id"],
    }
    assert python_tool(search_docs).parameters["required"] == ["query"]


def test_unusable_tools_are_refused_at_start() -> None:
    def spread(*args: int) -> None:
        """No schema for these."""

    with pytest.raises(ValueError, match=r"\*args"):
        python_tool(spread)
    config = BridgeConfig(upstream_url="http://127.0.0.1:1/v1", model="m")
    with pytest.raises(ValueError, match="two server tools are named 'get_time'"):
        create_app(config, tools=[get_time, get_time])


# --- the loop, inside one run ---------------------------------------------------------------


def test_sync_and_async_tools_run_in_the_run_and_the_model_answers() -> None:
    with scripted_stack(tools=[get_order, search_docs]) as stack:
        frames = post(stack.bridge_url, ask("Please get_order and search_docs for me"))
        assert [r["messages"][-1]["role"] for r in stack.upstream_requests] == ["user", "tool"]
    got = results(frames)
    assert json.loads(got["get_order"]) == {"order": 1, "status": "shipped", "items": []}
    assert json.loads(got["search_docs"]) == ["docs about Please get"]
    types = kinds(frames)
    # Both calls end before any result; the next turn follows the results, in the same run.
    assert types.index("TOOL_CALL_RESULT") > max(
        i for i, kind in enumerate(types) if kind == "TOOL_CALL_END"
    )
    assert types.count("RUN_STARTED") == 1 and types[-1] == "RUN_FINISHED"
    assert types.count("REASONING_START") == 2
    assert "shipped" in joined(frames, "TEXT_MESSAGE_CONTENT")
    finished = frames[-1]
    assert "outcome" not in finished  # nothing is left for the frontend
    assert finished["result"] == {"finishReason": "stop"}
    assert len(finished["usage"]) == 2  # one per model turn


def test_tools_are_offered_beside_the_frontends_and_a_clash_is_refused() -> None:
    with scripted_stack(tools=[get_time]) as stack:
        post(stack.bridge_url, ask("Hello", tools=TOOLS))
        offered = [t["function"]["name"] for t in stack.upstream_requests[0]["tools"]]
        assert offered == ["get_weather", "change_background", "get_time"]
        caps = httpx.get(f"{stack.bridge_url}/capabilities").json()
        assert caps["custom"]["serverTools"] == ["get_time"]
        clash = [*TOOLS, {"name": "get_time", "description": "", "parameters": {}}]
        response = httpx.post(stack.bridge_url, json=ask("Hi", tools=clash))
    assert response.status_code == 400
    assert "'get_time' has the name of a server tool" in response.json()["error"]["message"]


def test_a_mixed_turn_runs_the_server_call_and_leaves_the_frontend_call_pending() -> None:
    """The server's string result goes out as the string; the follow-up sends it upstream first,
    then the page's, and the same bytes whether the client stored it as it came (@ag-ui/client)
    or JSON-encoded (a history from a release that sent it so, a client that encodes results)."""
    question = "What time is it? And make the background lightblue."
    with scripted_stack(tools=[get_time]) as stack:
        frames = post(stack.bridge_url, ask(question, tools=TOOLS))
        assert len(stack.upstream_requests) == 1  # the frontend answers first
        calls = {
            f["toolCallName"]: f["toolCallId"] for f in frames if f["type"] == "TOOL_CALL_START"
        }
        assert set(calls) == {"change_background", "get_time"}
        assert results(frames) == {"get_time": "12:00"}  # the string, not JSON text
        assert frames[-1]["outcome"] == {
            "type": "success",
            "pendingToolCallIds": [calls["change_background"]],
        }
        # The client stores the server's result, runs its own tool and comes back.
        page_result = {
            "id": "t-bg",
            "role": "tool",
            "toolCallId": calls["change_background"],
            "content": '{"ok": true}',
        }
        stored = messages_from(frames)
        history = [{"id": "u1", "role": "user", "content": question}, *stored, page_result]
        follow_up = post(stack.bridge_url, run_input(history, tools=TOOLS))
        server_result = next(m for m in stored if m["role"] == "tool")
        server_result["content"] = json.dumps(server_result["content"])  # '"12:00"'
        post(stack.bridge_url, run_input(history, tools=TOOLS))
        as_sent, encoded = stack.upstream_requests[1:]
    tool_messages = [m for m in as_sent["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": calls["get_time"], "content": "12:00"},
        {"role": "tool", "tool_call_id": calls["change_background"], "content": '{"ok": true}'},
    ]
    assert json.dumps(encoded) == json.dumps(as_sent)
    assert "TOOL_CALL_RESULT" not in kinds(follow_up)
    assert "**get_time**: “12:00”" in joined(follow_up, "TEXT_MESSAGE_CONTENT")


@pytest.mark.parametrize("stored", ["as-sent", "json-encoded"])
@pytest.mark.parametrize(
    ("tool", "result"),
    [(get_order, '{"order":1,"status":"shipped","items":[]}'), (get_time, "12:00")],
)
def test_the_next_run_sends_the_server_turns_upstream_byte_for_byte(
    tool: Any, result: str, stored: str
) -> None:
    """What the loop sent upstream for the model's second turn is what the next run sends for
    the same turns, from the messages the client stored: the same bytes (reasoning included,
    when the reasoning scope keeps it for earlier turns too), whether the client kept the
    result as it came or JSON-encoded it."""
    prompt = f"{tool.__name__} please"
    with scripted_stack(tools=[tool], reasoning_scope="all") as stack:
        frames = post(stack.bridge_url, ask(prompt))
        assert results(frames) == {tool.__name__: result}
        in_run = stack.upstream_requests[1]["messages"]
        assert in_run[-1]["content"] == result
        history = [{"id": "u1", "role": "user", "content": prompt}, *messages_from(frames)]
        if stored == "json-encoded":
            for message in history:
                if message["role"] == "tool":
                    message["content"] = json.dumps(message["content"])
        history.append({"id": "u2", "role": "user", "content": "Thanks"})
        post(stack.bridge_url, run_input(history))
        next_run = stack.upstream_requests[2]["messages"]
    assert json.dumps(next_run[: len(in_run)]) == json.dumps(in_run)


def test_a_result_the_tool_encoded_itself_goes_out_as_the_model_reads_it() -> None:
    """A tool that returns ``json.dumps(text)``: the client is sent what the model reads."""

    def get_time() -> str:
        """The time, JSON-encoded by the tool itself."""
        return json.dumps("12:00")

    with scripted_stack(tools=[get_time]) as stack:
        frames = post(stack.bridge_url, ask("What time is it?"))
        in_run = stack.upstream_requests[1]["messages"]
    assert results(frames) == {"get_time": "12:00"}
    assert in_run[-1]["content"] == "12:00"


class Colour(enum.StrEnum):
    BLUE = "blue"


class Order(BaseModel):
    number: int
    shipped_on: datetime.date | None = None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("Monday 23 November 2026, 18:41:06 UTC", None, id="a-string-as-it-is"),
        pytest.param('say "hi"\n', None, id="quotes-and-newlines-unescaped"),
        pytest.param("", None, id="the-empty-string"),
        pytest.param(Colour.BLUE, "blue", id="a-string-enum"),
        pytest.param(datetime.date(2026, 11, 23), "2026-11-23", id="a-date"),
        pytest.param({"a": 1, "é": [1.5, None]}, '{"a":1,"é":[1.5,null]}', id="a-dict"),
        pytest.param(["x", 2], '["x",2]', id="a-list"),
        pytest.param(42, "42", id="a-number"),
        pytest.param(None, "null", id="none"),
        pytest.param(True, "true", id="a-bool"),
        pytest.param(Order(number=7), '{"number":7,"shipped_on":null}', id="a-model"),
    ],
)
def test_what_the_model_reads_of_a_return_value(value: Any, text: str | None) -> None:
    """A string goes out as the string, the rest as JSON text."""

    def lookup() -> Any:
        """Returns the value."""
        return value

    async def invoke() -> str:
        return await python_tool(lookup).invoke("{}")

    assert result_text(value) == (value if text is None else text)
    assert asyncio.run(invoke()) == result_text(value)


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_every_dialect(model: str) -> None:
    with scripted_stack(tools=[get_time]) as stack:
        frames = post(stack.bridge_url, ask("What time is it?", forwardedProps={"model": model}))
    assert results(frames) == {"get_time": "12:00"}
    assert "12:00" in joined(frames, "TEXT_MESSAGE_CONTENT")
    assert frames[-1]["type"] == "RUN_FINISHED" and "outcome" not in frames[-1]


def test_responses_api_upstream() -> None:
    with scripted_stack(tools=[get_time], upstream_api="responses") as stack:
        frames = post(stack.bridge_url, ask("What time is it?"))
        second = stack.upstream_requests[1]["input"]
    assert results(frames) == {"get_time": "12:00"}
    assert [item.get("type") for item in second[-2:]] == ["function_call", "function_call_output"]
    assert second[-1]["output"] == "12:00"
    assert "12:00" in joined(frames, "TEXT_MESSAGE_CONTENT")


# --- parallel calls, timeouts, failures -----------------------------------------------------


def test_calls_run_in_parallel() -> None:
    """Each tool waits for the other to have started: only parallel calls both finish."""
    started = {"get_time": _LazyEvent(), "get_weather": _LazyEvent()}

    async def meet(me: str, other: str) -> str:
        started[me].set()
        await asyncio.wait_for(started[other].wait(), 5)
        return "met"

    async def get_time() -> str:
        """The time."""
        return await meet("get_time", "get_weather")

    async def get_weather(city: str) -> str:
        """The weather."""
        return await meet("get_weather", "get_time")

    with scripted_stack(tools=[get_time, get_weather]) as stack:
        frames = post(stack.bridge_url, ask("What's the weather in Paris, and the time?"))
    assert results(frames) == {"get_weather": "met", "get_time": "met"}


class _LazyEvent:
    """An asyncio.Event made in the loop that first uses it (the bridge's, in its thread)."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def _get(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    def set(self) -> None:
        self._get().set()

    async def wait(self) -> None:
        await self._get().wait()


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_tool_that_hangs_times_out_and_the_model_is_told(kind: str) -> None:
    release = threading.Event()

    async def hangs_async() -> str:
        await asyncio.sleep(60)
        return "late"

    def hangs_sync() -> str:
        release.wait(60)  # a thread cannot be cancelled: it is left behind, then let go here
        return "late"

    hangs = hangs_async if kind == "async" else hangs_sync
    hangs.__name__ = "get_time"
    hangs.__doc__ = "Never answers in time."
    started = time.monotonic()
    try:
        with scripted_stack(tools=[hangs], tool_timeout=0.3) as stack:
            frames = post(stack.bridge_url, ask("What time is it?"))
            again = post(stack.bridge_url, ask("What time is it now?"))  # still serving
    finally:
        release.set()
    assert time.monotonic() - started < 10
    assert results(frames) == {"get_time": "Error: the tool get_time did not answer within 0.3 s."}
    assert "did not answer" in joined(frames, "TEXT_MESSAGE_CONTENT")
    assert frames[-1]["type"] == again[-1]["type"] == "RUN_FINISHED"


def test_failures_are_results_the_model_reads_never_a_traceback_or_a_secret() -> None:
    def get_order(order_id: int) -> str:
        """Fails, quoting the key."""
        raise RuntimeError(f"database refused key {SECRET}")

    def search_docs(page: Annotated[int, Field(ge=5)]) -> str:
        """Wants page >= 5; the scripted model asks for 1."""
        return "never"

    with scripted_stack(tools=[get_order, search_docs], api_key=SECRET) as stack:
        frames = post(stack.bridge_url, ask("get_order and search_docs"))
        sent_back = json.dumps(stack.upstream_requests[1]["messages"])
    got = results(frames)
    assert (
        got["get_order"] == "Error: get_order failed: RuntimeError: database refused key [redacted]"
    )
    assert got["search_docs"].startswith("Error: search_docs: invalid arguments: page: Input")
    assert SECRET not in sent_back and "Traceback" not in json.dumps(frames)
    assert frames[-1]["type"] == "RUN_FINISHED"


# --- the round cap and cancellation ---------------------------------------------------------


def _looping_upstream(requests: list[dict[str, Any]]) -> Any:
    """An upstream whose model calls get_time every turn, forever."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def chat(request: Request) -> Response:
        requests.append(await request.json())
        call = {"index": 0, "id": f"call_{len(requests)}", "type": "function"}
        call["function"] = {"name": "get_time", "arguments": "{}"}
        chunks = [
            {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return Response(body, media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_the_round_cap_ends_the_run_with_its_own_code() -> None:
    requests: list[dict[str, Any]] = []
    with serve(_looping_upstream(requests)) as upstream:
        config = BridgeConfig(upstream_url=f"{upstream}/v1", model="m", max_tool_rounds=3)
        with serve(create_app(config, tools=[get_time])) as bridge:
            frames = post(bridge, ask("time"))
    assert kinds(frames).count("TOOL_CALL_RESULT") == 3
    assert len(requests) == 4  # three rounds of calls, and the turn that asked for a fourth
    assert frames[-1]["type"] == "RUN_ERROR"
    assert frames[-1]["code"] == "tool_rounds_exceeded"
    assert "3 rounds" in frames[-1]["message"]


def test_a_client_that_goes_away_cancels_the_running_tool() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def get_time() -> str:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    with (
        scripted_stack(tools=[get_time], tool_timeout=60) as stack,
        httpx.stream("POST", stack.bridge_url, json=ask("What time is it?"), timeout=10) as r,
    ):
        # The call's END reaches the client while the tool runs (not held back until its result).
        assert any('"TOOL_CALL_END"' in line for line in r.iter_lines())
        assert started.wait(5)
        r.close()
        assert cancelled.wait(5), "the tool was not cancelled when the client left"
        assert len(stack.upstream_requests) == 1  # and the loop went no further


def test_without_server_tools_every_call_is_the_frontends() -> None:
    with scripted_stack() as stack:
        frames = post(stack.bridge_url, ask("What's the weather in Paris?", tools=TOOLS))
        assert [t["function"]["name"] for t in stack.upstream_requests[0]["tools"]] == [
            "get_weather",
            "change_background",
        ]
    call = next(f["toolCallId"] for f in frames if f["type"] == "TOOL_CALL_START")
    assert "TOOL_CALL_RESULT" not in kinds(frames)
    assert frames[-1]["outcome"]["pendingToolCallIds"] == [call]


_IMPORTS_JSONSCHEMA = """
import sys
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app

def get_time() -> str:
    return "noon"

create_app(BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model="m"), tools=TOOLS)
print("jsonschema" in sys.modules)
"""


@pytest.mark.parametrize(("tools", "imported"), [("[]", "False"), ("[get_time]", "True")])
def test_jsonschema_is_imported_at_the_start_only_with_server_tools(
    tools: str, imported: str
) -> None:
    """jsonschema's import takes about a second with its format checkers (the ``state``
    extra): a bridge with no server tools starts without it; one with server tools imports it
    as they are added, not in the event loop at a run's first question or edit."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS_JSONSCHEMA.replace("TOOLS", tools)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == imported, done.stderr
