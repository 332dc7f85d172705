"""A model server that plays a run of several turns, one planned answer per request, in the
Chat Completions stream format (tests/hostile/test_hostile_run.py, issue 43 point 5).

Each request takes the next of ``turns``: ``("calls", [tool names])`` streams a call of each
tool, then its usage; ``("text", words)`` streams the words, then its usage; ``("fail", status)``
answers that HTTP status with an error body, having spent nothing. Every request body is kept
(``requests``). ``GET /props`` answers 404 (the server says nothing of what it takes) unless
``modalities`` is given: then llama.cpp's ``/props`` with those ``modalities``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def turn_usage(turn: int) -> dict[str, int]:
    """The usage a streamed turn reports, by its place in the run (the first: 100 in, 10 out)."""
    prompt, completion = 100 * (turn + 1), 10 * (turn + 1)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


@dataclass
class PlannedModel:
    turns: list[tuple[str, Any]]
    modalities: dict[str, bool] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/props", self._props),
            ]
        )

    async def _props(self, request: Request) -> Response:
        if self.modalities is None:
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"modalities": self.modalities, "chat_template_caps": {}})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        turn = len(self.requests)
        self.requests.append(body)
        kind, what = self.turns[turn]
        if kind == "fail":
            return JSONResponse({"error": {"message": "the model fell over"}}, status_code=what)
        chunks = _calls(turn, what) if kind == "calls" else _text(what)
        usage = {"id": "c", "object": "chat.completion.chunk", "choices": []}
        usage["usage"] = turn_usage(turn)
        frames = [*chunks, usage]
        lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in frames] + ["data: [DONE]\n\n"]
        return StreamingResponse(iter(lines), media_type="text/event-stream")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}


def _calls(turn: int, names: list[str]) -> Iterator[dict[str, Any]]:
    for index, name in enumerate(names):
        call = {
            "index": index,
            "id": f"call-{turn}-{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"city": "Oslo"})},
        }
        yield _chunk({"role": "assistant", "tool_calls": [call]})
    yield _chunk({}, "tool_calls")


def _text(words: list[str]) -> Iterator[dict[str, Any]]:
    for word in words:
        yield _chunk({"role": "assistant", "content": word})
    yield _chunk({}, "stop")
