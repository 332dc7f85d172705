"""A hostile model for the shared-state tests: an OpenAI-compatible upstream (a real uvicorn
server on 127.0.0.1) whose every turn the test writes.

``hostile_model(turns)``: turn N (N = the assistant turns since the last user message) calls the
tools ``turns[N]`` names, all in one assistant message, as a model calls tools in parallel:
``(name, arguments)``, the arguments a JSON text as the model writes it (a string: sent as it
is, however deep or wrong) or a value (sent as its JSON). Once the turns run out it answers
``Done.``. ``update_state(*patches)`` makes the turn of one ``update_state`` call per patch.
Every request body it received is kept (``Model.requests``): what the model read.

``bridge_on(model, **config)``: the bridge in front of it (``--shared-state``), also a real
server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.tools.server_tools import ServerTool
from servers import serve

MODEL = "hostile"

Call = tuple[str, Any]


def update_state(*patches: Any) -> list[Call]:
    """One turn: an ``update_state`` call per patch, made at once."""
    return [("update_state", {"patch": patch}) for patch in patches]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _frames(calls: Sequence[Call]) -> list[bytes]:
    if not calls:
        return [_chunk({"role": "assistant", "content": "Done."}), _chunk({}, "stop")]
    frames = []
    for index, (name, arguments) in enumerate(calls):
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        function = {"name": name, "arguments": text}
        call = {"index": index, "id": f"call_{index}", "type": "function", "function": function}
        frames.append(_chunk({"tool_calls": [call]}))
    return [*frames, _chunk({}, "tool_calls")]


def _turn(messages: list[dict[str, Any]]) -> int:
    since_user = 0
    for message in messages:
        since_user = 0 if message.get("role") == "user" else since_user
        since_user += message.get("role") == "assistant"
    return since_user


@dataclass
class Model:
    """The hostile model's server: its base URL (``…/v1`` is the API) and what it was sent."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def hostile_model(turns: Sequence[Sequence[Call]]) -> Iterator[Model]:
    """The model's server, its turns scripted."""
    model = Model()

    async def completions(request: Request) -> Response:
        body = json.loads(await request.body())
        model.requests.append(body)
        turn = _turn(body["messages"])
        calls = turns[turn] if turn < len(turns) else []
        frames = [*_frames(calls), b"data: [DONE]\n\n"]
        return StreamingResponse(iter(frames), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    with serve(app) as url:
        model.url = url
        yield model


@contextmanager
def bridge_on(
    model: Model, *, server_tools: Sequence[ServerTool] = (), **overrides: Any
) -> Iterator[str]:
    """A bridge with shared state on, its upstream the hostile model, and ``server_tools``
    beside ``update_state``; yields its URL."""
    config = BridgeConfig(upstream_url=f"{model.url}/v1", model=MODEL, shared_state=True)
    app = create_app(replace(config, **overrides))
    app.state.bridge.tools.add(server_tools)
    with serve(app) as url:
        yield url
