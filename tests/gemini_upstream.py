"""A strict stand-in for Gemini 3's OpenAI-compatible endpoint (issue 57): it signs the first
tool call of each step, as Gemini does, and refuses a request whose current turn lacks one, as
Gemini does, with Gemini's own error body.

What it follows (https://ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI
compatibility"; the answers quoted in https://discuss.ai.google.dev/t/109823 and Continue
#8865):

- a streamed tool call carries ``extra_content: {"google": {"thought_signature": "…"}}``; in a
  step of parallel calls only the first call is signed;
- the next request must carry each signature on the same call, "exactly as received", for
  every step of the current turn (the messages after the last user message: "Function Calling
  (Strict)"); else HTTP 400 with the error as the one item of a JSON array::

      [{"error": {"code": 400, "message": "Function call is missing a thought_signature in
      functionCall parts. …", "status": "INVALID_ARGUMENT"}}]

- ``skip_thought_signature_validator`` stands in for a signature a history never had.

The model: with tools offered, a turn is two steps of calls to the first tool (the first step
two calls at once, the second one), then a text answer naming the results it read; without
tools, a text answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "gemini-3-flash-preview"
SKIP = "skip_thought_signature_validator"
#: Gemini's words (https://discuss.ai.google.dev/t/109823), the call's name and place filled in.
MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


@dataclass
class Gemini:
    """The emulator's memory: the signature it gave each call, and every request it took."""

    signatures: dict[str, str] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    calls: int = 0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        messages: list[dict[str, Any]] = body["messages"]
        problem = self._unsigned(messages)
        if problem is not None:
            self.refused.append(problem)
            error = {"code": 400, "message": problem, "status": "INVALID_ARGUMENT"}
            return JSONResponse([{"error": error}], status_code=400)
        tools = body.get("tools") or []
        turn = _current_turn(messages)
        steps = [m for m in turn if m.get("role") == "assistant" and m.get("tool_calls")]
        if tools and len(steps) < 2:
            name = tools[0]["function"]["name"]
            cities = ["Paris", "Lyon"] if not steps else ["Nice"]
            return _stream(self._calls(name, cities), "tool_calls")
        results = [str(m.get("content")) for m in turn if m.get("role") == "tool"]
        text = f"Read {len(results)} results: " + "; ".join(results) if results else "Hello."
        return _stream([{"role": "assistant", "content": text}], "stop")

    def _calls(self, name: str, cities: list[str]) -> list[dict[str, Any]]:
        calls = []
        for position, city in enumerate(cities):
            self.calls += 1
            call_id = f"function-call-{self.calls}-{hashlib.sha1(city.encode()).hexdigest()[:8]}"
            call: dict[str, Any] = {
                "function": {"arguments": json.dumps({"city": city}), "name": name},
                "id": call_id,
                "index": position,
                "type": "function",
            }
            if position == 0:  # the first call of a step only
                signature = base64.b64encode(f"signed:{call_id}".encode()).decode()
                self.signatures[call_id] = signature
                call = {"extra_content": {"google": {"thought_signature": signature}}, **call}
            calls.append(call)
        return [{"role": "assistant", "tool_calls": calls}]

    def _unsigned(self, messages: list[dict[str, Any]]) -> str | None:
        """Why the current turn's calls would be refused (``None``: they would not)."""
        for position, message in enumerate(_current_turn(messages)):
            calls = message.get("tool_calls") or [] if message.get("role") == "assistant" else []
            for index, call in enumerate(calls):
                given = ((call.get("extra_content") or {}).get("google") or {}).get(
                    "thought_signature"
                )
                issued = self.signatures.get(call["id"])
                name = call["function"]["name"]
                if index == 0 and given is None:
                    return MISSING.format(name=name, position=position + 1)
                if given is not None and given not in (issued, SKIP):
                    return f"Corrupted thought signature on function call `{name}`."
        return None


def _current_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return messages[last_user + 1 :]


def _stream(deltas: list[dict[str, Any]], finish: str) -> StreamingResponse:
    """Gemini's chunks: the whole delta in one, then the finish with the usage."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], reason: str | None, **extra: Any) -> str:
        choice = {"delta": delta, "index": 0, **({"finish_reason": reason} if reason else {})}
        data = {
            "choices": [choice],
            "created": created,
            "id": "gemini-emulator",
            "model": MODEL,
            "object": "chat.completion.chunk",
            **extra,
        }
        return f"data: {json.dumps(data)}\n\n"

    async def body() -> AsyncIterator[str]:
        for delta in deltas:
            yield chunk(delta, None)
        usage = {"completion_tokens": 7, "prompt_tokens": 11, "total_tokens": 18}
        yield chunk({}, finish, usage=usage)
        yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")
