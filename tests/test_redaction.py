"""Issue 12: secrets never leave the bridge, and the Responses API's ``event: error`` is read.

Real servers: an upstream (Starlette in uvicorn) that answers as key-quoting servers do, and
the bridge in front of it; the SSE, the HTTP bodies and the log are searched for the key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote, quote_plus

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agui_rules import check_frames, parse_body
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.redact import (
    MASK,
    Redactor,
    install_log_redaction,
    redact_new_loggers,
    shown_target,
)
from bridge.serve.upstream.sse import chunk_from_data
from servers import run_input, serve

KEY = "sk-probe/SECRET+1234567890abcdef"
TOKEN = "bridge-token-0123456789"
FIND_KEY = "You can find your API key at https://platform.example/account/api-keys."

#: How each fault model quotes the key it was sent, and the HTTP status it answers with.
QUOTES = {
    "whole": (401, f"Incorrect API key provided: {KEY}. {FIND_KEY}"),
    "pieces": (401, f"Incorrect API key provided: {KEY[:12]}*****{KEY[-8:]}. {FIND_KEY}"),
    "url": (403, f"key refused for https://gw.example/v1?key={quote(KEY, safe='')}&x=1"),
    "url-lower": (403, f"key refused for ?key={quote(KEY, safe='').replace('%2F', '%2f')}"),
    "url-plus": (403, f"key refused for the key {quote_plus(KEY)}"),
    "json": (400, f"bad request body: {json.dumps({'api_key': KEY}).replace('/', chr(92) + '/')}"),
    "token": (400, f"the bridge's own token leaked: {TOKEN}"),
}


async def _chat(request: Request) -> Response:
    body = await request.json()
    given = request.headers.get("authorization", "").removeprefix("Bearer ")
    status, message = QUOTES[body["model"]]
    assert given == KEY  # the key does go upstream, where it belongs
    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}},
        status_code=status,
    )


async def _models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": model} for model in QUOTES]})


RESPONSES_ERROR = {
    "type": "error",
    "code": "server_error",
    "message": "The server had an error processing your request. Please retry.",
    "param": None,
    "sequence_number": 3,
}


async def _responses(request: Request) -> Response:
    """OpenAI's documented failure: ``event: error``, then ``response.failed``."""
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    failed = {**response, "status": "failed", "error": {"code": "server_error", "message": "x"}}
    events = [
        ("response.created", {"type": "response.created", "response": response}),
        ("response.in_progress", {"type": "response.in_progress", "response": response}),
        ("error", RESPONSES_ERROR),
        ("response.failed", {"type": "response.failed", "response": failed}),
    ]

    async def body() -> AsyncIterator[bytes]:
        for number, (name, data) in enumerate(events):
            yield f"event: {name}\ndata: {json.dumps({**data, 'sequence_number': number})}\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


async def _chat_error_event(request: Request) -> Response:
    """A proxy's Chat Completions stream: some text, then ``event: error`` with the error bare."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]}
    error = {"message": f"upstream overloaded (key {KEY})", "type": "server_error"}
    body = f"data: {json.dumps(chunk)}\n\nevent: error\ndata: {json.dumps(error)}\n\n"
    return Response(body, media_type="text/event-stream")


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", _chat, methods=["POST"]),
            Route("/v1/models", _models),
            Route("/v1/responses", _responses, methods=["POST"]),
            Route("/proxy/v1/chat/completions", _chat_error_event, methods=["POST"]),
        ]
    )
    with serve(app) as url:
        yield url


def _config(url: str, **overrides: object) -> BridgeConfig:
    settings: dict[str, object] = {
        "upstream_url": f"{url}/v1",
        "model": "whole",
        "models": ("*",),
        "api_key": KEY,
        "auth_token": TOKEN,
        "retries": 0,
    }
    settings.update(overrides)
    return BridgeConfig(**settings)  # type: ignore[arg-type]


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _leaks(text: str) -> list[str]:
    """Every piece of the key or token (8 characters or more) that the text still holds."""
    return [
        secret[i : i + 8]
        for secret in (KEY, TOKEN, quote(KEY, safe=""), json.dumps(KEY)[1:-1])
        for i in range(len(secret) - 7)
        if secret[i : i + 8] in text or secret[i : i + 8].lower() in text
    ]


@pytest.mark.parametrize("model", sorted(QUOTES))
def test_an_upstream_quoting_the_key_never_shows_it(
    upstream: str, model: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    status, quoted = QUOTES[model]
    with serve(create_app(_config(upstream))) as bridge:
        response = httpx.post(
            f"{bridge}/", json=run_input(forwardedProps={"model": model}), headers=AUTH, timeout=30
        )
        capabilities = httpx.get(f"{bridge}/capabilities", headers=AUTH).text
    frames = check_frames(parse_body(response.text))
    error = frames[-1]
    assert error["type"] == "RUN_ERROR"
    assert error["code"] == f"upstream_http_{status}"
    assert MASK in error["message"]
    for text in (response.text, capabilities, caplog.text):
        assert _leaks(text) == [], text
    assert error["message"][:15] == quoted[:15]  # the readable rest of the message is kept
    assert f"upstream_http_{status}" in caplog.text  # the run's end is logged (redacted)


def test_incorrect_key_message_keeps_its_words(upstream: str) -> None:
    with serve(create_app(_config(upstream))) as bridge:
        response = httpx.post(f"{bridge}/", json=run_input(), headers=AUTH, timeout=30)
    error = check_frames(parse_body(response.text))[-1]
    assert error["message"] == f"Incorrect API key provided: {MASK}. {FIND_KEY}"


def test_http_error_bodies_are_redacted(upstream: str) -> None:
    # A 415 quotes the client's Content-Type back: the one error body that echoes a header.
    with serve(create_app(_config(upstream))) as bridge:
        response = httpx.post(
            f"{bridge}/",
            content=b"{}",
            headers={**AUTH, "Content-Type": f"text/plain; key={KEY}"},
        )
    assert response.status_code == 415
    assert _leaks(response.text) == []
    assert response.json()["error"]["message"].startswith("send the RunAgentInput as")


def test_a_chat_error_event_mid_stream_is_redacted_and_read_as_before(upstream: str) -> None:
    config = _config(upstream, upstream_url=f"{upstream}/proxy/v1", models=())
    with serve(create_app(config)) as bridge:
        response = httpx.post(f"{bridge}/", json=run_input(), headers=AUTH, timeout=30)
    frames = check_frames(parse_body(response.text))
    assert [f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT"] == ["Hel"]
    assert frames[-1]["type"] == "RUN_ERROR"
    assert frames[-1]["code"] == "upstream_error"
    assert frames[-1]["message"] == f"upstream overloaded (key {MASK})"


def test_responses_error_event_is_the_upstreams_own_error(upstream: str) -> None:
    config = _config(upstream, upstream_api="responses", models=())
    with serve(create_app(config)) as bridge:
        response = httpx.post(f"{bridge}/", json=run_input(), headers=AUTH, timeout=30)
    frames = check_frames(parse_body(response.text))
    errors = [f for f in frames if f["type"] == "RUN_ERROR"]
    assert len(errors) == 1  # the response.failed that follows is not a second error
    assert errors[0]["code"] == "upstream_error"
    assert errors[0]["message"].startswith(RESPONSES_ERROR["message"])
    assert "server_error" in errors[0]["message"]


def test_sse_error_events_per_api() -> None:
    bare = json.dumps({"message": "overloaded"}).encode()
    assert chunk_from_data(bare, "error") == {
        "error": {"message": "overloaded"}
    }  # Chat Completions
    typed = json.dumps(RESPONSES_ERROR).encode()
    assert chunk_from_data(typed, "error", wrap_error_events=False) == RESPONSES_ERROR


# -- the redactor itself ------------------------------------------------------------------------


def test_redactor_forms_and_pieces() -> None:
    redact = Redactor([KEY, None, ""]).redact
    assert redact(f"a {KEY} b") == f"a {MASK} b"
    assert redact(f"[{KEY[3:15]}]") == f"[{MASK}]"  # a piece of 12
    assert redact(f"{KEY[:8]}…{KEY[-8:]}") == f"{MASK}…{MASK}"  # two pieces of 8
    assert redact(f"{KEY[:7]}*****{KEY[-7:]}") == f"{KEY[:7]}*****{KEY[-7:]}"  # masked: kept
    assert redact(quote(KEY, safe="")) == MASK
    assert redact(quote(KEY, safe="").replace("%2B", "%2b")) == MASK
    assert redact(json.dumps(KEY).replace("/", "\\/")) == f'"{MASK}"'
    assert redact("nothing secret here") == "nothing secret here"


def test_redactor_without_secrets_is_identity() -> None:
    redactor = Redactor([None, ""])
    assert not redactor
    assert redactor.redact(KEY) == KEY


def test_short_secret_whole_only() -> None:
    redact = Redactor(["abc12"]).redact
    assert redact("x abc12 y abc1") == f"x {MASK} y abc1"


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("https://user:pw@mcp.example:9000/mcp?token=abc&x=1", f"https://mcp.example:9000/mcp?token={MASK}&x={MASK}"),
        ("python server.py --token abc --api-key=xyz --verbose", f"python server.py --token {MASK} --api-key={MASK} --verbose"),
        ("node srv.js --db postgres://u:p@db/x", "node srv.js --db postgres://db/x"),
        ("npx -y @modelcontextprotocol/server-github", "npx -y @modelcontextprotocol/server-github"),
        ("http://127.0.0.1:9000/mcp", "http://127.0.0.1:9000/mcp"),
    ],
)  # fmt: skip
def test_mcp_targets_are_shown_without_credentials(target: str, shown: str) -> None:
    assert shown_target(target) == shown


def test_the_mcp_sdks_loggers_are_redacted_too(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor(["sk-log-family-0123456789"])
    install_log_redaction(redactor)
    # The SDK's loggers exist once its modules are imported, after the redaction was installed.
    for name in ("mcp.client.stdio", "mcp.client.later_module"):
        logging.getLogger(name)
    redact_new_loggers()
    with caplog.at_level(logging.INFO):
        for name in ("mcp.client.stdio", "client", "agui_bridge", "mcp.client.later_module"):
            logging.getLogger(name).warning("server said sk-log-family-0123456789 on %s", name)
    assert "sk-log-family" not in caplog.text
    assert caplog.text.count(f"server said {MASK}") == 4
