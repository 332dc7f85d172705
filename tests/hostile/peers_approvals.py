"""Hostile peers for the approval tests (tests/hostile/test_hostile_approvals.py), each a real
server on 127.0.0.1:

- ``hostile_model``: an OpenAI-compatible upstream whose answers the test writes, chunk by chunk
  (tool call ids that repeat, arguments whose JSON repeats a key), then a plain "Done.";
- ``ReplyCutter``: a TCP proxy in front of a real ``redis-server`` that forwards each command and
  can lose the reply to a ``SET`` (the server took it; the connection is cut before the answer
  comes back), or cut every connection;
- ``MuteStore``: a TCP server that takes a connection and what is sent on it, and never answers
  (a Redis that is blocked), noting which of its connections are still open.

``peers_mcp_hidden.py`` beside it is an MCP server with a tool hidden from model and widget.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from servers import serve

# --- the model ------------------------------------------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "hostile",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def tool_calls(*calls: tuple[str, str, str]) -> list[dict[str, Any]]:
    """A turn that calls these tools, ``(id, name, arguments)`` each, at indices 0, 1, …, the
    arguments in two pieces."""
    chunks = []
    for index, (call_id, name, arguments) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function"}
        chunks.append(_chunk({"tool_calls": [{**head, "function": {"name": name}}]}))
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            delta = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chunk({"tool_calls": [delta]}))
    chunks.append(_chunk({}, "tool_calls"))
    return chunks


def says(text: str) -> list[dict[str, Any]]:
    """A turn that answers with ``text``."""
    return [_chunk({"role": "assistant", "content": text}), _chunk({}, "stop")]


@dataclass
class HostileModel:
    """What the model will answer, one script per request (then "Done."), and what it was
    asked."""

    scripts: list[list[dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            self.requests.append(await request.json())
            chunks = self.scripts.pop(0) if self.scripts else says("Done.")

            async def body() -> Any:
                for chunk in chunks:
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(body(), media_type="text/event-stream")

        async def models(request: Request) -> Response:
            return JSONResponse({"object": "list", "data": [{"id": "hostile", "object": "model"}]})

        return Starlette(
            routes=[
                Route("/v1/chat/completions", completions, methods=["POST"]),
                Route("/v1/models", models),
            ]
        )


@contextlib.contextmanager
def hostile_model(*scripts: list[dict[str, Any]]) -> Iterator[tuple[str, HostileModel]]:
    """The model's base URL (``…/v1``) and the model, answering ``scripts`` in turn."""
    model = HostileModel(list(scripts))
    with serve(model.app()) as url:
        yield f"{url}/v1", model


# --- stores ---------------------------------------------------------------------------------


class _Peer:
    """An asyncio TCP server on loopback, run in a thread of its own."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> _Peer:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        started.result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self.serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


#: A RESP ``SET`` command as redis-py writes it (``*5\r\n$3\r\nSET\r\n…``; not CLIENT SETINFO).
_SET = b"\r\n$3\r\nSET\r\n"


class ReplyCutter(_Peer):
    """A proxy to the Redis on ``target_port``. ``lose_set_replies``: how many of the next
    ``SET`` commands reach the server and get no reply (their connection cut as the reply
    comes); ``cut_all``: every connection is cut at once, nothing reaches the server."""

    def __init__(self, target_port: int) -> None:
        super().__init__()
        self.target_port = target_port
        self.lose_set_replies = 0
        self.cut_all = False
        self.lost: list[bytes] = []  # the commands whose replies were lost
        self.after_loss: bool = False  # cut_all from the first lost reply on

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_all:
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        doomed = asyncio.Event()  # a SET went up whose reply is to be lost

        async def upward() -> None:
            while (command := await reader.read(65536)) and not self.cut_all:
                if _SET in command[:16] and self.lose_set_replies > 0:
                    self.lose_set_replies -= 1
                    self.lost.append(command)
                    doomed.set()
                up_writer.write(command)
                await up_writer.drain()

        async def downward() -> None:
            while reply := await up_reader.read(65536):
                if doomed.is_set():  # the server took the SET; its answer never comes back
                    self.cut_all = self.cut_all or self.after_loss
                    return
                writer.write(reply)
                await writer.drain()

        pipes = {asyncio.ensure_future(upward()), asyncio.ensure_future(downward())}
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            up_writer.close()


class MuteStore(_Peer):
    """Takes connections and reads what comes, never answers: a Redis that is blocked.
    ``pending``: the connections open now that sent something and got no answer."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[bytes] = []
        self.connections = 0
        self.pending = 0
        self.closed_by_client = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        waiting = False
        self.connections += 1
        try:
            while data := await reader.read(65536):
                self.received.append(data)
                if not waiting:
                    waiting, self.pending = True, self.pending + 1
        finally:
            if waiting:
                self.pending -= 1
                self.closed_by_client += 1
