"""Secrets leave in no frame, body or log line, in any encoding (README "Promises"): the
credentials an upstream URL carries (``http://user:p%40ss@host/v1``, as a proxy's basic auth)
against an upstream that quotes them back in every spelling it saw them in.

Finding: the approval store's password was redacted however its URL spelled it (finding 9),
the upstream URL's was not redacted at all: only the key, the auth token and the secret were."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bridge.config import BridgeConfig
from bridge.core.upstream_url import url_secrets
from bridge.serve.http.app import create_app
from servers import post, run_input, serve

USER = "proxy-user"
PASSWORD = "p@ss/Wd:9Xq-Secret-Vault"
ENCODED = quote(PASSWORD, safe="")
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SPELLINGS = (PASSWORD, ENCODED, TOKEN, json.dumps(PASSWORD)[1:-1])


@contextmanager
def quoting_upstream() -> Iterator[str]:
    """An upstream that refuses every request and quotes back what it was sent: the
    ``Authorization`` header as it came, the credentials it holds decoded, and the password
    percent-encoded, as a misconfigured gateway's error page might."""

    async def refuse(request: Request) -> JSONResponse:
        header = request.headers.get("authorization", "")
        decoded = base64.b64decode(header.removeprefix("Basic ")).decode() if header else ""
        message = f"bad credentials: {header} ({decoded}; {quote(decoded, safe='')})"
        return JSONResponse({"error": {"message": message, "code": 401}}, status_code=401)

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", refuse, methods=["POST"]),
            Route("/v1/models", refuse),
            Route("/props", refuse),
        ]
    )
    with serve(app) as url:
        yield url


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{ENCODED}@") + "/v1"


def _leaks(text: str) -> list[str]:
    return [spelling for spelling in SPELLINGS if spelling in text]


def test_the_upstream_urls_password_leaves_in_no_frame_or_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The upstream quotes the password back as it decoded it, percent-encoded, and as the
    basic-auth token it received: the run's RUN_ERROR reads the upstream's words with every
    spelling masked, and so does the log."""
    caplog.set_level(logging.INFO)
    with quoting_upstream() as upstream:
        config = BridgeConfig(
            upstream_url=_with_credentials(upstream), model="m", reasoning_scope="current-turn"
        )
        with serve(create_app(config)) as bridge:
            frames = post(bridge, run_input())
    error = frames[-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "upstream_http_401"
    assert "bad credentials" in error["message"] and "[redacted]" in error["message"]
    assert _leaks(json.dumps(frames)) == []
    assert _leaks(caplog.text) == []


def test_the_doctor_prints_no_spelling_of_the_upstream_urls_password() -> None:
    """The doctor's report quotes what the upstream answered: never the URL's credentials."""
    with quoting_upstream() as upstream:
        url = _with_credentials(upstream)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bridge",
                "doctor",
                "--json",
                "--model",
                "m",
                "--upstream-url",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["usable"] is False
    assert "bad credentials" in done.stdout
    assert _leaks(done.stdout + done.stderr) == []


@pytest.mark.parametrize(
    ("url", "written", "decoded"),
    [
        ("redis://:p%40ss-word-1234@host:6379/0", "p%40ss-word-1234", "p@ss-word-1234"),
        ("redis://host:6379/0?password=p%40ss-word-1234", "p%40ss-word-1234", "p@ss-word-1234"),
        ("https://host/v1?api-key=K3y%2BValue-12345", "K3y%2BValue-12345", "K3y+Value-12345"),
        ("https://host/v1?key=K3y%2BValue-12345&model=m", "K3y%2BValue-12345", "K3y+Value-12345"),
        ("https://host/v1?sig=S1gnature%3D%3D", "S1gnature%3D%3D", "S1gnature=="),
    ],
)
def test_every_credential_a_url_holds_is_a_secret(url: str, written: str, decoded: str) -> None:
    """A password in the user part or a credential in the query, as written and decoded."""
    found = url_secrets(url)
    assert written in found and decoded in found
    assert "m" not in found  # the query's other values are no secrets


def test_a_url_without_credentials_holds_no_secret() -> None:
    assert url_secrets("http://127.0.0.1:8080/v1?model=qwen3") == ()
