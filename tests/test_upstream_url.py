"""A wrong upstream URL, as ``serve`` meets it: the RUN_ERROR names the URL called (never with
credentials) and, when ``--upstream-url`` lacks its version segment, the one probably meant; a
connection that cannot be made says why (refused, DNS, TLS). The hint is the doctor's too
(``tests/test_doctor.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.core.errors import MAX_MESSAGE_CHARS
from bridge.core.upstream_url import shown_url, suggested_upstream_url, upstream_url_hint
from bridge.serve.http.app import create_app
from faulty_upstream import refusing_upstream
from servers import post, run_input, serve

KEY = "sk-wrong-url-test-0123456789abcdef"


@pytest.mark.parametrize(
    ("base_url", "meant"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
        ("https://openrouter.ai/api", "https://openrouter.ai/api/v1"),
        ("http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/chat/completions", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1/responses", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1/models", "http://127.0.0.1:8080/v1"),
        ("http://user:secret@127.0.0.1:8080?key=k", "http://127.0.0.1:8080/v1"),
        # A version segment anywhere: the URL is taken as meant.
        ("http://127.0.0.1:8080/v1", None),
        ("https://api.openai.com/v1", None),
        ("https://open.bigmodel.cn/api/paas/v4", None),
        ("https://generativelanguage.googleapis.com/v1beta/openai", None),
    ],
)
def test_the_url_a_404_suggests(base_url: str, meant: str | None) -> None:
    assert suggested_upstream_url(base_url) == meant
    hint = upstream_url_hint(base_url)
    assert hint == (f"did you mean --upstream-url {meant}?" if meant else None)


def test_shown_urls_hold_no_credentials() -> None:
    url = "https://someone:pa%40ss@example.com:8443/api/v1?key=abc#x"
    assert shown_url(url) == "https://example.com:8443/api/v1"
    assert shown_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    """A real upstream serving under ``/v1`` (this is its base URL without it)."""
    with serve(create_scripted_upstream()) as url:
        yield url


def _run(upstream_url: str, transport: Any, **overrides: Any) -> dict[str, Any]:
    """One run through a real bridge in front of ``upstream_url``: its terminal event."""
    config = BridgeConfig(
        upstream_url=upstream_url,
        model=DEFAULT_SCRIPTED_MODEL,
        upstream_transport=transport,
        retries=0,
        connect_timeout=5.0,
        **overrides,
    )
    with serve(create_app(config)) as bridge_url:
        frames = post(f"{bridge_url}/", run_input())
    assert [frame["type"] for frame in frames] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "STEP_FINISHED",
        "RUN_ERROR",
    ]
    return frames[-1]


TRANSPORTS = ["aiohttp", "httpx"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_404_names_the_url_called_and_the_url_meant(upstream_url: str, transport: str) -> None:
    end = _run(upstream_url, transport)
    assert end["code"] == "upstream_http_404"
    assert end["message"] == (
        f"the upstream answered HTTP 404 Not Found to POST {upstream_url}/chat/completions; "
        f"did you mean --upstream-url {upstream_url}/v1?"
    )
    # The suggestion works.
    config = BridgeConfig(upstream_url=f"{upstream_url}/v1", model=DEFAULT_SCRIPTED_MODEL)
    with serve(create_app(config)) as bridge_url:
        assert post(f"{bridge_url}/", run_input())[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_url_shown_holds_no_credentials(upstream_url: str, transport: str) -> None:
    with_credentials = upstream_url.replace("http://", "http://someone:pw-in-the-url@")
    end = _run(f"{with_credentials}/v1/chat/completions", transport, api_key=KEY)
    assert end["code"] == "upstream_http_404"
    assert f"POST {upstream_url}/v1/chat/completions/chat/completions" in end["message"]
    assert end["message"].endswith(f"did you mean --upstream-url {upstream_url}/v1?")
    assert "pw-in-the-url" not in end["message"] and "someone" not in end["message"]
    assert KEY not in end["message"]


def _not_found(words: str) -> Starlette:
    async def answer(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": words, "code": "model_not_found"}}, 404)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["POST"])])


def test_a_404_in_the_upstreams_own_words_keeps_them() -> None:
    with serve(_not_found("The model `m` does not exist.")) as url:
        # The base URL has its version: the upstream's words say it all.
        assert _run(f"{url}/v1", "aiohttp")["message"] == "The model `m` does not exist."
        # It has none: the URL called, and the one probably meant.
        assert _run(url, "aiohttp")["message"] == (
            f"The model `m` does not exist. (POST {url}/chat/completions; "
            f"did you mean --upstream-url {url}/v1?)"
        )


@pytest.mark.parametrize("words", ["Not Found", "404 page not found"])
def test_a_404_that_only_says_not_found_names_the_url(words: str) -> None:
    """FastAPI's (vLLM's) ``{"detail": "Not Found"}``, say, behind a base URL with a version."""
    with serve(_not_found(words)) as url:
        end = _run(f"{url}/v1", "aiohttp")
    assert end["message"] == (
        f"the upstream answered HTTP 404 Not Found to POST {url}/v1/chat/completions"
    )


def test_a_long_404_message_is_cut_before_the_url_and_the_hint() -> None:
    with serve(_not_found("no such route " * 100)) as url:
        end = _run(url, "aiohttp")
    message = end["message"]
    assert len(message) <= MAX_MESSAGE_CHARS
    assert message.startswith("no such route no such route")
    assert message.endswith(
        f"… (POST {url}/chat/completions; did you mean --upstream-url {url}/v1?)"
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("case", ["refused", "dns", "tls"])
def test_a_connection_that_cannot_be_made_says_why(
    upstream_url: str, case: str, transport: str
) -> None:
    with refusing_upstream() as refused:
        url = {
            "refused": refused,
            "dns": "http://nonexistent.invalid/v1",
            "tls": f"{upstream_url.replace('http://', 'https://')}/v1",  # it speaks plain HTTP
        }[case]
        end = _run(url, transport)
    assert end["code"] == "upstream_unreachable"
    where = url.split("//")[1].split("/")[0]
    where = where if ":" in where else f"{where}:80"
    says = {
        "refused": ": the connection was refused (is the server running on that port?)",
        "dns": ": its host name does not resolve (",
        "tls": ": the TLS handshake failed (wrong version number); does it speak plain HTTP? "
        "try http://",
    }[case]
    assert end["message"].startswith(f"could not connect to the upstream at {where}{says}")
