"""The scripted model behind a real OpenAI-compatible HTTP API (a Starlette app).

Thin: it validates the request, asks ``script.py`` what to say and ``dialects.py`` how to lay it
out, and writes chunks as llama.cpp does (``data: {json}\\n\\n`` frames, then ``data: [DONE]``).
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bridge.cli.demo.attachments import CHAT_PART_TYPES, RESPONSES_PART_TYPES, unknown_part
from bridge.cli.demo.dialects import (
    DEFAULT_SCRIPTED_MODEL,
    GEMINI,
    SCRIPTED_MODELS,
    Envelope,
    completion_body,
    generate,
    stream_chunks,
    thought_signature,
)
from bridge.cli.demo.responses import response_events, response_object
from bridge.cli.demo.script import count_prompt_tokens, write_script

PACE_HEADER = "x-scripted-pace"
_STARTED = int(time.time())


def create_scripted_upstream(*, pace: float = 0.0) -> Starlette:
    """A deterministic "reasoning model" server: ``POST /v1/chat/completions``,
    ``POST /v1/responses`` (the Responses API, streamed or not), ``GET /v1/models``.

    ``pace`` is the pause in seconds between streamed chunks; a request may set its own with the
    header ``x-scripted-pace``.
    Every request body received is appended to ``app.state.requests``.
    """
    if not (math.isfinite(pace) and pace >= 0):
        raise ValueError(f"pace must be >= 0 seconds, got {pace}")

    async def chat_completions(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "the request body is not valid JSON")
        requests.append(body)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "Expected 'messages' to be an array")
        refused = _unknown_part(body["messages"], "messages", CHAT_PART_TYPES)
        if refused is not None:
            return refused
        model = body.get("model") or DEFAULT_SCRIPTED_MODEL
        if model not in SCRIPTED_MODELS:
            return _error(404, f"model '{model}' not found", code="model_not_found")
        if model == GEMINI:
            unsigned = _unsigned(body["messages"])
            if unsigned is not None:
                return unsigned
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            return _error(400, "'max_tokens' must be a positive integer")
        request_pace = _pace(request, pace)
        if request_pace is None:
            return _error(400, f"'{PACE_HEADER}' must be a number of seconds >= 0")

        generation = generate(
            write_script(body),
            model,
            max_tokens=max_tokens,
            prompt_tokens=count_prompt_tokens(body["messages"]),
        )
        envelope = Envelope(f"chatcmpl-{secrets.token_hex(16)}", int(time.time()), model)
        if not body.get("stream"):
            return JSONResponse(completion_body(generation, envelope))
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        frames = [
            _frame(chunk)
            for chunk in stream_chunks(generation, envelope, include_usage=include_usage)
        ]
        return StreamingResponse(
            _paced([*frames, b"data: [DONE]\n\n"], request_pace),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def responses(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "the request body is not valid JSON")
        requests.append(body)
        if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
            return _error(400, "Expected 'input' to be a string or an array of items")
        if isinstance(body["input"], list):
            refused = _unknown_part(body["input"], "input", RESPONSES_PART_TYPES)
            if refused is not None:
                return refused
        model = body.get("model") or DEFAULT_SCRIPTED_MODEL
        if model not in SCRIPTED_MODELS:
            return _error(404, f"model '{model}' not found", code="model_not_found")
        limit = body.get("max_output_tokens")
        if limit is not None and (type(limit) is not int or limit < 1):
            return _error(400, "'max_output_tokens' must be a positive integer")
        request_pace = _pace(request, pace)
        if request_pace is None:
            return _error(400, f"'{PACE_HEADER}' must be a number of seconds >= 0")
        response_id = f"resp_{secrets.token_hex(16)}"
        if not body.get("stream"):
            return JSONResponse(response_object(body, model, response_id, int(time.time())))
        frames = [
            f"event: {event['type']}\n".encode() + _frame(event)
            for event in response_events(body, model, response_id, int(time.time()))
        ]
        return StreamingResponse(
            _paced(frames, request_pace),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def models(request: Request) -> Response:
        entries = [
            {"id": name, "object": "model", "created": _STARTED, "owned_by": "agui-bridge"}
            for name in SCRIPTED_MODELS
        ]
        return JSONResponse({"object": "list", "data": entries})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )
    requests: list[Any] = []
    app.state.requests = requests
    return app


async def serve_scripted_upstream(host: str, port: int, pace: float) -> None:
    """Run the scripted upstream with uvicorn until it is stopped."""
    config = uvicorn.Config(create_scripted_upstream(pace=pace), host=host, port=port)
    await uvicorn.Server(config).serve()


def _pace(request: Request, default: float) -> float | None:
    try:
        value = float(request.headers.get(PACE_HEADER, default))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _frame(chunk: dict[str, Any]) -> bytes:
    payload = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


async def _paced(frames: list[bytes], pace: float) -> AsyncIterator[bytes]:
    for number, frame in enumerate(frames):
        if pace and number:
            await anyio.sleep(pace)
        yield frame


def _unknown_part(items: list[Any], field: str, types: tuple[str, ...]) -> JSONResponse | None:
    """A content part of a type the API does not define, refused as OpenAI refuses it."""
    found = unknown_part(items, types)
    if found is None:
        return None
    where, kind = found
    *known, last = (f"'{name}'" for name in types)
    message = f"Invalid value: {kind}. Supported values are: {', '.join(known)}, and {last}."
    return _error(400, message, code="invalid_value", param=f"{field}{where}")


def _unsigned(messages: list[Any]) -> JSONResponse | None:
    """Gemini 3's refusal of a tool loop whose current turn (after the last user message) has
    a step whose first call lacks the thought signature it was given, in Gemini's words and its
    body's shape (a JSON array around the error)."""
    last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=-1)
    for position, message in enumerate(messages[last_user + 1 :], 1):
        calls = message.get("tool_calls") if _role(message) == "assistant" else None
        if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
            continue
        first = calls[0]
        extra = first.get("extra_content")
        google = extra.get("google") if isinstance(extra, dict) else None
        given = google.get("thought_signature") if isinstance(google, dict) else None
        if given != thought_signature(str(first.get("id"))):
            name = (first.get("function") or {}).get("name")
            message_text = (
                "Function call is missing a thought_signature in functionCall parts. This is "
                "required for tools to work correctly, and missing thought_signature may lead to "
                f"degraded model performance. Additional data, function call `default_api:{name}` "
                f", position {position}. please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
            )
            error = {"code": 400, "message": message_text, "status": "INVALID_ARGUMENT"}
            return JSONResponse([{"error": error}], status_code=400)
    return None


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _error(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> JSONResponse:
    error: dict[str, Any] = {"message": message, "type": "invalid_request_error"}
    if param is not None:
        error["param"] = param
    if code is not None:
        error["code"] = code
    return JSONResponse({"error": error}, status_code=status)
