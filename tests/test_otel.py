"""OpenTelemetry traces (the ``otel`` extra), end to end: a real bridge process exports over
OTLP/HTTP to a real receiver (``otlp_receiver.py``), which decodes the protobuf; the tests check
the span tree (an incoming W3C ``traceparent`` as the parent, ``invoke_agent`` → ``chat`` per
upstream request and ``execute_tool`` per server tool), the GenAI attributes, the
``traceparent`` the upstream receives; a host app's own tracer provider, the SDK's variables
that keep tracing off, ``--otel`` without the extra (one line, exit 2), and that untraced,
nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from agui_rules import check_frames, parse_body
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from node_tools import stop
from servers import free_port, run_input, serve

if TYPE_CHECKING:
    from otlp_receiver import OtlpReceiver, ReceivedSpan

HERE = Path(__file__).resolve().parent
MCP_EXAMPLE = HERE.parent / "examples" / "mcp_server.py"
INSTALL = "pip install 'agui-bridge[otel]'"
#: A word no span may carry unless ``--otel-content`` says so.
SECRET_WORD = "quetzalcoatlite"
ASK_TIME = f"What time is it? Asking for {SECRET_WORD}."
RUN_SPAN = "invoke_agent agui-bridge"


def _otel_installed() -> bool:
    modules = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "opentelemetry.proto")
    try:
        return all(importlib.util.find_spec(module) is not None for module in modules)
    except ImportError:  # a parent package is missing
        return False


@pytest.fixture
def otel_extra() -> None:
    """The tracing tests skip without the extra (and fail in CI, where ``make`` installs it)."""
    if not _otel_installed():
        why = f"the otel extra is not installed ({INSTALL}): these tests export real traces"
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


@pytest.fixture
def receiver(otel_extra: None) -> Iterator[tuple[OtlpReceiver, str]]:
    """A running OTLP/HTTP receiver and its base URL."""
    from otlp_receiver import otlp_receiver

    with otlp_receiver() as found:
        yield found


# --- the processes --------------------------------------------------------------------------


def _environment(**otel: str) -> dict[str, str]:
    """This environment less any OTEL_* variable, plus ``otel`` and a short export delay."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(OTEL_BSP_SCHEDULE_DELAY="100", **otel)
    return env


@contextmanager
def _bridge(
    args: Sequence[str], env: dict[str, str], *, python: Sequence[str] = ("-m", "bridge")
) -> Iterator[tuple[str, list[str]]]:
    """``agui-bridge ARGS --port 0`` as its own process until it prints where it serves; yields
    its agent URL and its output's lines so far, then stops it (SIGTERM: its tracer flushes)."""
    command = [sys.executable, *python, *args, "--port", "0", "--log-level", "warning"]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output: list[str] = []
    opened = threading.Event()
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            match = re.search(r"open (http://127\.0\.0\.1:\d+)/ ", line)
            if match and not found:
                found.append(match.group(1))
                opened.set()
        opened.set()  # the process ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        opened.wait(30)
        assert found, f"the bridge did not start: {command}\n{''.join(output)}"
        yield f"{found[0]}/agent", output
    finally:
        stop(process)
        reader.join(timeout=5)


@contextmanager
def _upstream() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """The scripted upstream on a real port, and the headers of each chat request it got."""
    headers: list[dict[str, str]] = []
    app = create_scripted_upstream()

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            headers.append({k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]})
        await app(scope, receive, send)

    recorder: ASGIApp = recording
    with serve(recorder) as url:
        yield url, headers


# --- a run and its trace --------------------------------------------------------------------


@dataclass
class Run:
    """A run posted with an incoming ``traceparent``: its frames and the trace it made."""

    trace_id: str
    parent_id: str
    thread_id: str
    frames: list[dict[str, Any]]

    @property
    def usage(self) -> list[dict[str, Any]]:
        """RUN_FINISHED's usage, one entry per model turn."""
        finished = self.frames[-1]
        assert finished["type"] == "RUN_FINISHED", finished
        turns: list[dict[str, Any]] = finished["usage"]
        return turns

    def spans(self, receiver: OtlpReceiver) -> list[ReceivedSpan]:
        return [span for span in receiver.spans if span["trace_id"] == self.trace_id]


def _post(agent: str, text: str, *, model: str | None = None) -> Run:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    thread_id = f"thread-{secrets.token_hex(4)}"
    props = {"model": model} if model else {}
    body = run_input(
        [{"id": "u1", "role": "user", "content": text}], threadId=thread_id, forwardedProps=props
    )
    response = httpx.post(
        agent, json=body, headers={"traceparent": f"00-{trace_id}-{parent_id}-01"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return Run(trace_id, parent_id, thread_id, check_frames(parse_body(response.text)))


def _awaited(receiver: OtlpReceiver, run: Run) -> None:
    """Wait until the run's ``invoke_agent`` span (its last to end) arrived."""
    receiver.wait_for_spans(1, name=RUN_SPAN, trace_id=run.trace_id)


@dataclass
class Tree:
    run: ReceivedSpan
    chats: list[ReceivedSpan]  # in the order they started
    tools: list[ReceivedSpan]


def _tree(spans: list[ReceivedSpan], run: Run, model: str) -> Tree:
    """The run's spans as a tree, checked: one ``invoke_agent`` under the incoming parent, and
    every other span of the trace a ``chat`` or ``execute_tool`` child of it."""
    runs = [span for span in spans if span["name"].startswith("invoke_agent")]
    assert [span["name"] for span in runs] == [RUN_SPAN], spans
    top = runs[0]
    assert top["parent_span_id"] == run.parent_id
    assert top["kind"] == "SERVER"
    attributes = top["attributes"]
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "agui-bridge"
    assert attributes["gen_ai.conversation.id"] == run.thread_id
    assert attributes["gen_ai.request.model"] == model
    chats = sorted(
        (span for span in spans if span["name"] == f"chat {model}"), key=lambda s: s["start_ns"]
    )
    tools = sorted(
        (span for span in spans if span["name"].startswith("execute_tool ")),
        key=lambda s: s["start_ns"],
    )
    assert len(spans) == 1 + len(chats) + len(tools), [span["name"] for span in spans]
    for child in (*chats, *tools):
        assert child["parent_span_id"] == top["span_id"], child
        assert top["start_ns"] <= child["start_ns"] <= child["end_ns"] <= top["end_ns"]
    for chat in chats:
        assert chat["kind"] == "CLIENT"
        assert chat["attributes"]["gen_ai.operation.name"] == "chat"
        assert chat["attributes"]["gen_ai.request.model"] == model
        assert chat["attributes"]["gen_ai.conversation.id"] == run.thread_id
        provider = chat["attributes"]["gen_ai.provider.name"]
        assert isinstance(provider, str) and provider
    return Tree(top, chats, tools)


def _check_answered_chats(tree: Tree, run: Run, upstream_port: int) -> None:
    """Each chat span tells its turn as RUN_FINISHED did: finish reason, tokens, first chunk."""
    assert len(tree.chats) == len(run.usage)
    for chat, turn in zip(tree.chats, run.usage, strict=True):
        attributes = chat["attributes"]
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["server.port"] == upstream_port
        reasons = attributes["gen_ai.response.finish_reasons"]
        assert isinstance(reasons, list) and reasons and all(isinstance(r, str) for r in reasons)
        assert attributes["gen_ai.usage.input_tokens"] == turn["inputTokens"]
        assert attributes["gen_ai.usage.output_tokens"] == turn["outputTokens"]
        if turn.get("reasoningTokens"):
            assert attributes["gen_ai.usage.reasoning.output_tokens"] == turn["reasoningTokens"]
        first_chunk = attributes["gen_ai.response.time_to_first_chunk"]
        assert isinstance(first_chunk, float) and first_chunk > 0
        assert chat["status"] != "ERROR" and "error.type" not in attributes
    top = tree.run["attributes"]
    assert top["gen_ai.usage.input_tokens"] == sum(turn["inputTokens"] for turn in run.usage)
    assert top["gen_ai.usage.output_tokens"] == sum(turn["outputTokens"] for turn in run.usage)
    assert tree.run["status"] != "ERROR" and "error.type" not in top


def _values(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _values(item)
    else:
        yield str(value)


def _carrying(spans: list[ReceivedSpan], word: str) -> list[tuple[str, str]]:
    """(span, attribute) pairs whose value holds ``word``."""
    return [
        (span["name"], key)
        for span in spans
        for key, value in span["attributes"].items()
        if any(word in text for text in _values(value))
    ]


def _tool_calls(frames: list[dict[str, Any]]) -> dict[str, str]:
    """The run's tool calls, name → id, as TOOL_CALL_START told them."""
    return {f["toolCallName"]: f["toolCallId"] for f in frames if f["type"] == "TOOL_CALL_START"}


# --- the tests ------------------------------------------------------------------------------


def test_the_sdks_variable_alone_traces_a_demo_run_with_its_server_tool(
    receiver: tuple[OtlpReceiver, str],
) -> None:
    otlp, endpoint = receiver
    env = _environment(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)  # no --otel: the SDK's convention
    with _bridge(["demo", "--pace", "0"], env) as (agent, _):
        run = _post(agent, ASK_TIME)
        _awaited(otlp, run)
        upstream_port = httpx.URL(agent).port
    spans = run.spans(otlp)  # the bridge has stopped: everything it had is flushed
    tree = _tree(spans, run, DEFAULT_SCRIPTED_MODEL)

    # Two upstream requests (before and after the server tool), and the tool between them.
    assert len(tree.chats) == 2 and [span["name"] for span in tree.tools] == [
        "execute_tool get_time"
    ]
    _check_answered_chats(tree, run, upstream_port or 0)
    tool = tree.tools[0]
    assert tool["kind"] == "INTERNAL"
    assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attributes"]["gen_ai.tool.name"] == "get_time"
    assert tool["attributes"]["gen_ai.tool.call.id"] == _tool_calls(run.frames)["get_time"]
    assert tool["status"] != "ERROR" and "error.type" not in tool["attributes"]
    first, second = tree.chats
    assert first["end_ns"] <= tool["start_ns"] <= tool["end_ns"] <= second["start_ns"]
    assert tree.chats[0]["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert tree.chats[1]["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]

    # No --otel-content: nothing of the conversation on any span.
    assert _carrying(spans, SECRET_WORD) == []
    assert not any(key.startswith("gen_ai.input") for s in spans for key in s["attributes"])
    assert tree.run["resource"]["service.name"] == "agui-bridge"
    assert set(otlp.encodings) == {""}


def test_the_otel_flag_traces_into_the_upstream_with_content(
    receiver: tuple[OtlpReceiver, str],
) -> None:
    otlp, endpoint = receiver
    env = _environment(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{endpoint}/v1/traces",
        OTEL_EXPORTER_OTLP_COMPRESSION="gzip",
        OTEL_SERVICE_NAME="my-bridge",
    )
    with _upstream() as (upstream, headers):
        args = [
            "serve", "--upstream-url", f"{upstream}/v1", "--model", DEFAULT_SCRIPTED_MODEL,
            "--mcp", f"clock=python {MCP_EXAMPLE}", "--otel", "--otel-content",
        ]  # fmt: skip
        with _bridge(args, env) as (agent, _):
            run = _post(agent, ASK_TIME)
            _awaited(otlp, run)
    spans = run.spans(otlp)
    tree = _tree(spans, run, DEFAULT_SCRIPTED_MODEL)
    assert len(tree.chats) == 2
    assert [span["name"] for span in tree.tools] == ["execute_tool clock__get_time"]
    _check_answered_chats(tree, run, httpx.URL(upstream).port or 0)
    assert (
        tree.tools[0]["attributes"]["gen_ai.tool.call.id"]
        == (_tool_calls(run.frames)["clock__get_time"])
    )

    # Each upstream request carries its own chat span as the parent, in the incoming trace.
    assert len(headers) == 2
    for sent, chat in zip(headers, tree.chats, strict=True):
        assert sent.get("traceparent") == f"00-{run.trace_id}-{chat['span_id']}-01", sent

    # --otel-content: the request's messages on the chat spans, the answer too.
    for chat in tree.chats:
        assert SECRET_WORD in chat["attributes"]["gen_ai.input.messages"]
        assert chat["attributes"]["gen_ai.output.messages"]
    assert tree.run["resource"]["service.name"] == "my-bridge"
    assert set(otlp.encodings) == {"gzip"}  # the SDK's variables rule the exporter


@pytest.mark.parametrize("failure", ["refused_model", "refused_connection"])
def test_an_upstream_error_marks_the_run_and_its_chat_span(
    receiver: tuple[OtlpReceiver, str], failure: str
) -> None:
    otlp, endpoint = receiver
    env = _environment(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)
    model = "no-such-model" if failure == "refused_model" else DEFAULT_SCRIPTED_MODEL
    with _upstream() as (upstream, _):
        url = upstream if failure == "refused_model" else f"http://127.0.0.1:{free_port()}"
        args = ["serve", "--upstream-url", f"{url}/v1", "--model", model, "--retries", "0"]
        with _bridge([*args, "--otel"], env) as (agent, _):
            run = _post(agent, "Hi")
            _awaited(otlp, run)
    assert run.frames[-1]["type"] == "RUN_ERROR", run.frames[-1]
    tree = _tree(run.spans(otlp), run, model)
    assert len(tree.chats) == 1 and tree.tools == []
    for span in (tree.run, tree.chats[0]):
        assert span["status"] == "ERROR", span
        assert span["attributes"].get("error.type"), span
    assert tree.run["attributes"]["error.type"] == run.frames[-1]["code"]
    if failure == "refused_model":
        assert tree.chats[0]["attributes"]["http.response.status_code"] == 404


#: Serves one run through the library face, in-process (the scripted upstream behind an ASGI
#: transport): ``one_run(**config)`` returns the response's body.
_ONE_RUN = """
import asyncio, json, sys
import httpx
from bridge import BridgeConfig, create_app
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

async def one_run(**options):
    upstream = httpx.ASGITransport(app=create_scripted_upstream())
    config = BridgeConfig(
        upstream_url="http://upstream.test/v1", model=DEFAULT_SCRIPTED_MODEL, **options
    )
    app = create_app(config, transport=upstream)
    body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user",
            "content": "What time is it?"}], "tools": [], "context": [], "state": {},
            "forwardedProps": {}}
    async with app.router.lifespan_context(app):
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b")
        async with client:
            response = await client.post("/", json=body, headers={"traceparent": TRACEPARENT})
    assert "RUN_FINISHED" in response.text, response.text
    return response.text
"""

_UNTRACED = """
import bridge.cli.command
asyncio.run(one_run())
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")))
"""

#: A host app with a tracer provider of its own (an in-memory exporter): the bridge's spans go
#: there, and the bridge's end leaves it working.
_HOST_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
asyncio.run(one_run(otel=True))
with trace.get_tracer("host").start_as_current_span("host work after the bridge closed"):
    pass
print(json.dumps([
    {"name": span.name, "trace_id": format(span.context.trace_id, "032x"),
     "parent": span.parent and format(span.parent.span_id, "016x")}
    for span in exporter.get_finished_spans()
]))
"""


def _python(script: str) -> Any:
    """Run ``script`` in a fresh interpreter (``OTEL_*`` cleared); the JSON it printed."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_untraced_nothing_of_opentelemetry_is_imported() -> None:
    assert _python(_ONE_RUN + _UNTRACED) == []


@pytest.mark.usefixtures("otel_extra")
def test_a_host_apps_tracer_provider_gets_the_spans() -> None:
    spans = _python(_ONE_RUN + _HOST_PROVIDER)
    assert [span["name"] for span in spans] == [
        f"chat {DEFAULT_SCRIPTED_MODEL}",
        RUN_SPAN,
        "host work after the bridge closed",
    ]
    chat, run, _ = spans
    assert run["trace_id"] == chat["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert run["parent"] == "b7ad6b7169203331"


#: A host app whose own instrumentation has a span open around the request (an ASGI
#: middleware's server span): the bridge's run nests under it.
_HOST_SPAN = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with trace.get_tracer("host").start_as_current_span("host request"):
    asyncio.run(one_run(otel=True))
print(json.dumps([
    {"name": span.name, "trace_id": format(span.context.trace_id, "032x"),
     "span_id": format(span.context.span_id, "016x"),
     "parent": span.parent and format(span.parent.span_id, "016x")}
    for span in exporter.get_finished_spans()
]))
"""


@pytest.mark.usefixtures("otel_extra")
def test_inside_a_host_apps_span_the_run_nests_under_it() -> None:
    spans = {span["name"]: span for span in _python(_ONE_RUN + _HOST_SPAN)}
    host, run = spans["host request"], spans[RUN_SPAN]
    assert run["parent"] == host["span_id"] and run["trace_id"] == host["trace_id"]
    assert spans[f"chat {DEFAULT_SCRIPTED_MODEL}"]["parent"] == run["span_id"]


#: An upstream that refuses the key quoting it, as OpenAI's 401 does; a user who pastes it too;
#: the spans, content and all, kept in memory: the key must be in none of them.
_LEAKY = """
import asyncio, json
import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from bridge import BridgeConfig, create_app

KEY = "sk-otel-Zq8vT2mW9xL4nB7cR1pK6hY3jD5f"
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def chat(request):
    message = f"Incorrect API key provided: {KEY}. You can find your API key at ..."
    return JSONResponse({"error": {"message": message}}, status_code=401)

async def main():
    upstream = httpx.ASGITransport(
        app=Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    )
    config = BridgeConfig(
        upstream_url="http://upstream.test/v1", model="m", api_key=KEY, otel=True,
        otel_content=True, retries=0,
    )
    app = create_app(config, transport=upstream)
    body = {"threadId": f"thread-{KEY}", "runId": "r", "messages": [{"id": "u", "role": "user",
            "content": f"my key is {KEY}"}], "tools": [], "context": [], "state": {},
            "forwardedProps": {}}
    async with app.router.lifespan_context(app):
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b")
        async with client:
            await client.post("/", json=body)

asyncio.run(main())
print(json.dumps({
    "key": KEY,
    "spans": [
        {"name": span.name, "attributes": dict(span.attributes),
         "status": span.status.description}
        for span in exporter.get_finished_spans()
    ],
}, default=str))
"""


@pytest.mark.usefixtures("otel_extra")
def test_no_span_carries_a_secret_even_with_content() -> None:
    found = _python(_LEAKY)
    key, spans = found["key"], found["spans"]
    text = json.dumps(spans)
    assert [span["name"] for span in spans] == ["chat m", RUN_SPAN]
    pieces = {key[i : i + 8] for i in range(len(key) - 7)}
    assert not [piece for piece in pieces if piece in text]
    chat = spans[0]
    assert "Incorrect API key provided: [redacted]" in chat["status"]
    assert "my key is [redacted]" in chat["attributes"]["gen_ai.input.messages"]


@pytest.mark.parametrize(
    "off",
    [{"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}],
    ids=["OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"],
)
def test_the_sdks_variables_keep_tracing_off(
    receiver: tuple[OtlpReceiver, str], off: dict[str, str]
) -> None:
    otlp, endpoint = receiver
    env = _environment(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, **off)
    with _bridge(["demo", "--pace", "0"], env) as (agent, _):
        run = _post(agent, "Hi")
    assert run.frames[-1]["type"] == "RUN_FINISHED"
    assert otlp.spans == []  # the bridge has stopped: a tracer would have flushed by now


#: ``python -m bridge`` with OpenTelemetry made unimportable, as if the extra were missing.
_WITHOUT_OTEL = (
    "import sys, runpy; sys.modules['opentelemetry'] = None; sys.argv[0] = 'agui-bridge'; "
    "runpy.run_module('bridge', run_name='__main__')"
)


@pytest.mark.parametrize(
    "command",
    [["demo"], ["serve", "--upstream-url", "http://127.0.0.1:9/v1", "--model", "m"]],
    ids=["demo", "serve"],
)
def test_otel_without_the_extra_is_one_line_naming_it(command: list[str]) -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OTEL, *command, "--otel", "--port", str(port)],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert INSTALL in lines[0]
    with pytest.raises(httpx.TransportError):  # it never listened
        httpx.get(f"http://127.0.0.1:{port}/agent/health", timeout=2)


def test_the_sdks_variable_without_the_extra_serves_untraced_and_says_so() -> None:
    env = _environment(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    with _bridge(["demo", "--pace", "0"], env, python=("-c", _WITHOUT_OTEL)) as (agent, output):
        run = _post(agent, "Hi")
        said = [line for line in output if "OTEL" in line]
    assert run.frames[-1]["type"] == "RUN_FINISHED"
    assert len(said) == 1 and INSTALL in said[0], output
