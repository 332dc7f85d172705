"""Strict stand-ins for providers that refuse what another takes back in a tool loop (issue 57,
point 5), each refusing exactly that with its own words:

- **Groq** refuses any property its schema does not name, on an assistant message or a call:
  HTTP 400 ``{"error": {"message": "'messages.1' : for 'role:assistant' the following must be
  satisfied[('messages.1' : property 'reasoning_content' is unsupported)]", "type":
  "invalid_request_error"}}`` (quoted in NousResearch/hermes-agent #11089, janhq/jan #8136);
  it streams its reasoning in ``delta.reasoning``.
- **DeepSeek V4** (thinking mode) wants ``reasoning_content`` back on every assistant message
  that called tools, in later turns too: HTTP 400 ``{"error": {"message": "The
  `reasoning_content` in the thinking mode must be passed back to the API.", "type":
  "invalid_request_error", "param": null, "code": "invalid_request_error"}}`` (quoted in
  continuedev/continue #12691, crewAI #5878; https://api-docs.deepseek.com/guides/
  thinking_mode#tool-calls); it streams ``delta.reasoning_content``.

The model: with tools offered and no tool result in the current turn, reasoning then a call to
the first tool; after a result, reasoning then a text answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

_OWN = {"role", "content", "tool_calls", "name"}


@dataclass
class Emulator:
    """One provider's stand-in: ``kind`` is ``groq`` or ``deepseek``."""

    kind: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        problem = self._refusal(body["messages"])
        if problem is not None:
            self.refused.append(problem["error"]["message"])
            return JSONResponse(problem, status_code=400)
        messages = body["messages"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        results = [m for m in messages[last_user + 1 :] if m["role"] == "tool"]
        field_name = "reasoning" if self.kind == "groq" else "reasoning_content"
        turn = sum(1 for m in messages if m["role"] == "user")
        if body.get("tools") and not results:
            name = body["tools"][0]["function"]["name"]
            call = {
                "index": 0,
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": name, "arguments": '{"city": "Paris"}'},
            }
            deltas = [{field_name: f"I will call {name}."}, {"tool_calls": [call]}]
            return _stream(deltas, "tool_calls")
        answer = f"Turn {turn}: " + "; ".join(str(m["content"]) for m in results)
        return _stream([{field_name: "I have what I need."}, {"content": answer}], "stop")

    def _refusal(self, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            if self.kind == "groq":
                extra = sorted(set(message) - _OWN)
                calls = message.get("tool_calls") or []
                extra += sorted({k for c in calls for k in c} - {"id", "type", "function"})
                if extra:
                    where = f"'messages.{index}'"
                    text = (
                        f"{where} : for 'role:assistant' the following must be satisfied"
                        f"[({where} : property '{extra[0]}' is unsupported)]"
                    )
                    return {"error": {"message": text, "type": "invalid_request_error"}}
            elif message.get("tool_calls") and "reasoning_content" not in message:
                text = (
                    "The `reasoning_content` in the thinking mode must be passed back to the API."
                )
                error = {"message": text, "type": "invalid_request_error", "param": None}
                return {"error": {**error, "code": "invalid_request_error"}}
        return None


def _stream(deltas: list[dict[str, Any]], finish: str) -> StreamingResponse:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        data = {
            "id": "emulated",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [choice],
        }
        return f"data: {json.dumps(data)}\n\n"

    async def body() -> AsyncIterator[str]:
        for delta in deltas:
            yield chunk(delta)
        yield chunk({}, finish)
        yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")
