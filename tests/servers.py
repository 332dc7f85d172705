"""Real servers for end-to-end tests: uvicorn on 127.0.0.1, a free port, stopped in ``finally``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from agui_rules import check_frames, parse_body
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, SCRIPTED_MODELS, create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.core.translate import TranslateOptions
from bridge.serve.http.app import create_app
from bridge.serve.http.bridge import Bridge

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: Any, *, port: int | None = None, loop: str = "auto") -> Iterator[str]:
    """Run an ASGI app with a real uvicorn server in a thread; yield its base URL. ``loop``:
    uvicorn's (``"asyncio"``: the stdlib's, whose timers a test can count)."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="auto", loop=loop
        )
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on port {port}")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@dataclass
class Stack:
    """A scripted upstream and a bridge in front of it, both real servers."""

    upstream_url: str
    bridge_url: str
    upstream_app: Starlette
    config: BridgeConfig
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def upstream_requests(self) -> list[dict[str, Any]]:
        requests: list[dict[str, Any]] = self.upstream_app.state.requests
        return requests


def scripted_config(upstream_url: str, **overrides: Any) -> BridgeConfig:
    base = BridgeConfig(
        upstream_url=f"{upstream_url}/v1",
        model=DEFAULT_SCRIPTED_MODEL,
        models=SCRIPTED_MODELS,
        translate_overrides={"scripted-think-no-open": TranslateOptions(starts_in_reasoning=True)},
        idle_timeout=30,
    )
    return replace(base, **overrides)


@contextmanager
def scripted_stack(
    *, pace: float = 0.0, tools: Sequence[Callable[..., Any]] = (), **overrides: Any
) -> Iterator[Stack]:
    """``tools``: the bridge's server tools (Python functions)."""
    upstream_app = create_scripted_upstream(pace=pace)
    with serve(upstream_app) as upstream_url:
        config = scripted_config(upstream_url, **overrides)
        with serve(create_app(config, tools=tools)) as bridge_url:
            yield Stack(upstream_url, bridge_url, upstream_app, config)


def run_input(messages: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """A RunAgentInput body as ``@ag-ui/client`` 1.0 sends it (one user "Hi" unless messages are
    given); ``protocolVersion=None`` leaves the version out, as the 0.0.x clients do."""
    body: dict[str, Any] = {
        "protocolVersion": "1.0",
        "threadId": "thread-1",
        "runId": f"run-{time.monotonic_ns()}",
        "messages": messages or [{"id": "u", "role": "user", "content": "Hi"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    body.update(extra)
    return {key: value for key, value in body.items() if value is not None}


def post(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(url, json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return check_frames(parse_body(response.text))


def joined(frames: list[dict[str, Any]], kind: str) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == kind)


def messages_from(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What @ag-ui/client would hold after these frames: reasoning, assistant and tool messages
    (a ``TOOL_CALL_RESULT`` becomes a tool message, as the client stores it)."""
    out: dict[str, dict[str, Any]] = {}
    for f in frames:
        kind = f["type"]
        if kind == "REASONING_MESSAGE_START":
            out[f["messageId"]] = {"id": f["messageId"], "role": "reasoning", "content": ""}
        elif kind == "REASONING_MESSAGE_CONTENT":
            out[f["messageId"]]["content"] += f["delta"]
        elif kind == "TEXT_MESSAGE_START":
            out.setdefault(
                f["messageId"], {"id": f["messageId"], "role": "assistant", "content": ""}
            )
        elif kind == "TEXT_MESSAGE_CONTENT":
            out[f["messageId"]]["content"] += f["delta"]
        elif kind == "TOOL_CALL_START":
            message = out.setdefault(
                f["parentMessageId"], {"id": f["parentMessageId"], "role": "assistant"}
            )
            message.setdefault("toolCalls", []).append(
                {
                    "id": f["toolCallId"],
                    "type": "function",
                    "function": {"name": f["toolCallName"], "arguments": ""},
                }
            )
        elif kind == "TOOL_CALL_RESULT":
            out[f["messageId"]] = {
                "id": f["messageId"],
                "role": "tool",
                "toolCallId": f["toolCallId"],
                "content": f["content"],
            }
        elif kind == "REASONING_ENCRYPTED_VALUE" and f["subtype"] == "tool-call":
            for message in out.values():  # on the call (Gemini's thought signature)
                for call in message.get("toolCalls", []):
                    if call["id"] == f["entityId"]:
                        call["encryptedValue"] = f["encryptedValue"]
        elif kind == "REASONING_ENCRYPTED_VALUE":
            out[f["entityId"]]["encryptedValue"] = f["encryptedValue"]
        elif kind == "TOOL_CALL_ARGS":
            for message in out.values():
                for call in message.get("toolCalls", []):
                    if call["id"] == f["toolCallId"]:
                        call["function"]["arguments"] += f["delta"]
    return list(out.values())


def approving(first: dict[str, Any], frames: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The run that approves the interrupt ``first`` ended with (``frames``), as @ag-ui/client
    sends it: the same thread and run id, the history with the interrupted run's messages, and
    ``extra`` (its state, its forwarded props)."""
    [interrupt] = frames[-1]["outcome"]["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    history = [*first["messages"], *messages_from(frames)]
    return run_input(
        history, threadId=first["threadId"], runId=first["runId"], resume=[entry], **extra
    )


#: The two frontend tools of the demo, as AG-UI tools, and a request that calls both.
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "change_background",
        "description": "Change the page background",
        "parameters": {
            "type": "object",
            "properties": {"color": {"type": "string"}},
            "required": ["color"],
        },
    },
]
ASK_TOOLS = "What's the weather in Paris? And make the background lightblue."


@contextmanager
def forward_proxy() -> Iterator[tuple[str, list[str]]]:
    """A plain HTTP forward proxy on loopback that notes each request line it forwards."""
    seen: list[str] = []
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port = 0

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, version = head.split(b"\r\n", 1)[0].decode().split(" ")
        seen.append(f"{method} {target}")
        url = httpx.URL(target)
        up_reader, up_writer = await asyncio.open_connection(url.host, url.port)
        rest = head.split(b"\r\n", 1)[1]
        up_writer.write(f"{method} {url.raw_path.decode()} {version}\r\n".encode() + rest)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def start() -> None:
        nonlocal port
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextmanager
def mcp_http_server(script: Path) -> Iterator[str]:
    """An MCP server script (``--http --port N``) in a process of its own; its URL."""
    port = free_port()
    command = [sys.executable, str(script), "--http", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{script.name} did not start over HTTP") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


class LoopProbe:
    """Wraps an ASGI app and remembers the event loop it runs in, so a test can count that
    loop's tasks (and read the bridge's state) from its own thread."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.loop = asyncio.get_running_loop()
        await self.app(scope, receive, send)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` run in the server's loop, between two of its steps. The timeout only
        stops a loop that never runs it: a walk of every object of a test process that ran
        hundreds of tests before, on a loaded machine, took more than 10 s."""
        assert self.loop is not None

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=120)

    @property
    def bridge(self) -> Bridge:
        bridge: Bridge = self.app.state.bridge
        return bridge
