"""``agui-bridge doctor``: against the scripted upstream in every dialect, against real llama.cpp
exchanges (``tests/fixtures/llamacpp/``) served back by the replay server, and in the faults a
user meets first (nothing listening, a key refused, an HTML 502 from a proxy)."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route

from bridge.cli.command import main
from bridge.cli.demo import SCRIPTED_MODELS, create_scripted_upstream
from bridge.cli.doctor import HARMONY_REASONING, diagnose
from bridge.cli.doctor.view import PROBE_TOOL_PROMPT
from bridge.cli.parser import build_parser
from bridge.cli.replay import create_replay_app, load_recording
from bridge.cli.settings import config_from_args
from bridge.serve.upstream.record import FORMAT
from faulty_upstream import fault_model, faulty_upstream, refusing_upstream
from helpers import FIXTURES
from servers import serve

THINK = ["<think>", "</think>"]
HARMONY = list(HARMONY_REASONING)

#: model: (reasoning, reasoning_tags, starts_in_reasoning, tool_calls)
EXPECTED: dict[str, tuple[str, list[str] | None, bool, str]] = {
    "scripted-reasoning-content": ("reasoning_content", None, False, "structured"),
    "scripted-reasoning": ("reasoning", None, False, "structured"),
    "scripted-think-tags": ("tags", THINK, False, "structured"),
    "scripted-think-no-open": ("tags", THINK, True, "structured"),
    "scripted-deepseek-legacy": ("reasoning_content", THINK, False, "structured"),
    "scripted-openrouter": ("reasoning_details", None, False, "structured"),
    "scripted-plain": ("none", None, False, "structured"),
    "scripted-gemini": ("reasoning_content", None, False, "structured"),
    "scripted-hermes-text": ("tags", THINK, False, "hermes"),
    "scripted-mistral-text": ("reasoning_content", None, False, "mistral"),
    "scripted-llama-text": ("reasoning", None, False, "llama"),
    "scripted-pythonic-text": ("reasoning_content", None, False, "pythonic"),
    "scripted-qwen3-coder-text": ("tags", THINK, False, "qwen3_coder"),
    "scripted-glm-text": ("reasoning_content", None, False, "glm45"),
    "scripted-kimi-text": ("reasoning", None, False, "kimi_k2"),
    "scripted-deepseek-v3-text": ("reasoning_content", None, False, "deepseek_v3"),
    "scripted-harmony-text": ("tags", HARMONY, False, "harmony"),
}


def test_every_scripted_dialect_is_listed() -> None:
    assert set(EXPECTED) == set(SCRIPTED_MODELS)


@pytest.fixture(scope="module")
def scripted_url() -> Iterator[str]:
    with serve(create_scripted_upstream()) as url:
        yield f"{url}/v1"


@pytest.mark.parametrize("model", SCRIPTED_MODELS)
def test_scripted_dialect(scripted_url: str, model: str) -> None:
    report = asyncio.run(diagnose(scripted_url, model=model))
    reasoning, tags, starts, tool_calls = EXPECTED[model]
    assert report["usable"] is True
    assert report["reasoning"] == reasoning
    assert report["reasoning_tags"] == tags
    assert report["starts_in_reasoning"] is starts
    assert report["tool_calls"] == tool_calls
    assert report["usage"] is True
    assert report["responses_api"] is True
    assert report["reasoning_round_trip"] == "accepted"
    assert report["server"] == "agui-bridge scripted upstream"
    assert report["models"] == list(SCRIPTED_MODELS)

    # The serve line is one the CLI takes, and it reads what the model says right: with its
    # flags the bridge shows the reasoning as reasoning and the call as a call, no markers.
    command = shlex.split(report["serve_command"])
    assert command[:2] == ["agui-bridge", "serve"]
    args = build_parser().parse_args(command[1:])
    assert args.model == model and args.upstream_url == scripted_url
    assert args.starts_in_reasoning is starts
    expected_format = tool_calls if tool_calls != "structured" else "auto"
    assert config_from_args(args, upstream_url=scripted_url, model=model, models=[], api_key=None)
    assert args.text_tool_format == expected_format
    view = report["bridge_view"]
    assert bool(view["plain"]["reasoning"]) is (reasoning != "none")
    for marker in ("<think>", "</think>", "<|channel|>", "<tool_call>"):
        assert marker not in view["plain"]["text"] + view["tools"]["text"]
    assert view["tools"]["tool_calls"] == ["get_weather"]
    if starts:
        assert any("--starts-in-reasoning" in warning for warning in report["warnings"])
    else:
        assert report["warnings"] == []


def test_the_command_prints_a_table_and_json(
    scripted_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["doctor", "--upstream-url", scripted_url, "--model", "scripted-think-no-open"]
    assert main(flags) == 0
    table = capsys.readouterr().out
    assert "reasoning             tags" in table
    assert "starts_in_reasoning   yes" in table
    assert "--starts-in-reasoning" in table
    assert main([*flags, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["starts_in_reasoning"] is True
    probes = [probe["probe"] for probe in report["probes"]]
    assert probes == ["models", "plain", "tools", "responses", "reasoning_back"]
    assert report["failed_probe"] is None and report["suggested_upstream_url"] is None


def test_the_first_listed_model_is_probed_when_none_is_named(scripted_url: str) -> None:
    report = asyncio.run(diagnose(scripted_url))
    assert report["model"] == SCRIPTED_MODELS[0]
    assert "--model scripted-reasoning-content" in report["serve_command"]


# --- real llama.cpp exchanges, served back ---------------------------------------------------


def _recording_from_fixtures(folder: Path, exchanges: list[tuple[str, str, str]]) -> None:
    """Write llama.cpp fixture exchanges (method, path, fixture name) as a recorded run: each
    SSE frame one read, as llama.cpp writes them."""
    lines: list[dict[str, Any]] = [
        {
            "type": "run",
            "t": 0.0,
            "format": FORMAT,
            "config": {"upstream_url": "http://127.0.0.1:8080/v1"},
        }
    ]
    for number, (method, path, name) in enumerate(exchanges, 1):
        request = FIXTURES / f"{name}.request.json"
        body = json.loads(request.read_text()) if request.exists() else None
        url = f"http://127.0.0.1:8080{path}"
        lines.append({"type": "request", "t": 0.0, "exchange": number, "method": method})
        lines[-1].update(url=url, headers={}, body=body)
        status_line, *header_lines = (FIXTURES / f"{name}.headers").read_text().splitlines()
        headers = [line.split(":", 1) for line in header_lines if ":" in line]
        status = int(status_line.split()[1])
        lines.append({"type": "response", "t": 0.001, "exchange": number, "status": status})
        lines[-1]["headers"] = [[key.strip(), value.strip()] for key, value in headers]
        sse = FIXTURES / f"{name}.sse"
        if sse.exists():
            frames = [f + "\n\n" for f in sse.read_text().split("\n\n") if f]
        else:
            frames = [(FIXTURES / f"{name}.json").read_text()]
        for i, frame in enumerate(frames):
            lines.append({"type": "read", "t": 0.002 + i / 1e4, "exchange": number, "text": frame})
        lines.append({"type": "end", "t": 0.01, "exchange": number, "complete": True})
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / "llamacpp.jsonl").write_text(text, encoding="utf-8")


def _llama_cpp(folder: Path, flavour: str, chats: list[str]) -> dict[str, Any]:
    chat = "/v1/chat/completions"
    exchanges = [("GET", "/props", f"{flavour}_server_props")]
    exchanges += [("POST", chat, name) for name in chats]
    _recording_from_fixtures(folder, exchanges)
    with serve(create_replay_app(load_recording(folder), speed=100)) as url:
        report = asyncio.run(diagnose(f"{url}/v1", model="qwen3-tiny-random"))
    assert report["server"] == "llama.cpp (build b0-unknown)"
    assert report["models"] == []  # not recorded: the replay answers 404
    assert report["responses_api"] is False
    assert report["tool_calls"] == "structured"
    # Its /props says supports_preserve_reasoning: false: auto sends the turn in progress.
    assert report["reasoning_scope"] == "current-turn"
    assert report["reasoning_scope_reason"].endswith("the template drops earlier reasoning")
    # Started without --mmproj, its /props says modalities all false: no attachment is taken.
    assert report["attachments"] == dict.fromkeys(("image", "audio", "video", "document"), False)
    assert report["bridge_view"]["tools"]["tool_calls"] == ["get_time", "get_weather"]
    return report


def test_llama_cpp_reasoning_format_none(tmp_path: Path) -> None:
    chats = [
        "none_reasoning_stream",
        "none_tools_parallel_stream",
        "deepseek_history_reasoning_stream",
    ]
    report = _llama_cpp(tmp_path, "none", chats)
    assert report["usable"] is True
    assert (report["reasoning"], report["reasoning_tags"]) == ("tags", THINK)
    assert report["reasoning_format"] == "none"
    assert report["starts_in_reasoning"] is False
    assert report["usage"] is False
    assert report["reasoning_round_trip"] == "accepted"
    assert any("no token usage" in warning for warning in report["warnings"])
    assert report["serve_command"] == (
        f"agui-bridge serve --upstream-url {report['upstream']} --model qwen3-tiny-random"
    )
    view = report["bridge_view"]["plain"]
    assert view["reasoning"] == "Okay it time wants Paris Tokyo both Tokyo the and."
    assert view["text"].startswith("The wants should")


def test_llama_cpp_reasoning_format_deepseek(tmp_path: Path) -> None:
    chats = [
        "deepseek_reasoning_stream_usage",
        "deepseek_tools_parallel_stream",
        "deepseek_history_reasoning_stream",
    ]
    report = _llama_cpp(tmp_path, "deepseek", chats)
    assert (report["reasoning"], report["reasoning_tags"]) == ("reasoning_content", None)
    assert report["reasoning_format"] == "deepseek"
    assert report["usage"] is True
    assert report["reasoning_round_trip"] == "accepted"


def test_reasoning_sent_back_and_refused(tmp_path: Path) -> None:
    """The tool loop with its reasoning gets llama.cpp's real 400; without it, an answer."""
    chats = [
        "deepseek_reasoning_stream_usage",
        "deepseek_tools_parallel_stream",
        "deepseek_error_messages_not_array",
        "deepseek_history_reasoning_stream",
    ]
    report = _llama_cpp(tmp_path, "deepseek", chats)
    assert report["reasoning_round_trip"] == "rejected"
    assert report["serve_command"].endswith("--reasoning-history drop")
    refused = [w for w in report["warnings"] if "refuses reasoning sent back" in w]
    assert refused and "upstream_http_400" in refused[0]


def _llama_like(chat: Any, caps: dict[str, Any]) -> Starlette:
    """A llama.cpp-like server: ``/props`` with ``caps``, one model, ``chat`` answering."""

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "tiny", "owned_by": "llamacpp"}]})

    async def props(request: Request) -> JSONResponse:
        return JSONResponse({"build_info": "b1-test", "chat_template_caps": caps})

    routes = [
        Route("/v1/models", models),
        Route("/props", props),
        Route("/v1/chat/completions", chat, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _sse(*chunks: dict[str, Any]) -> Response:
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return Response(body, media_type="text/event-stream")


def _delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_an_error_mid_answer_fails_the_probe_as_it_fails_a_run() -> None:
    """llama.cpp's parser refusing what the model wrote comes as an error chunk after a 200."""
    message = "The model produced output that does not match the expected peg-native format"

    async def chat(request: Request) -> Any:
        error = {"code": 500, "message": message, "type": "server_error"}
        return _sse(_delta(role="assistant", content=None), {"error": error})

    with serve(_llama_like(chat, {"supports_tool_calls": True})) as url:
        report = asyncio.run(diagnose(f"{url}/v1"))
    assert report["usable"] is False and report["serve_command"] is None
    assert report["failed_probe"]["probe"] == "plain"
    assert report["failed_probe"]["code"] == "upstream_error"
    assert report["failed_probe"]["message"] == message


def test_a_model_that_calls_only_when_forced_has_structured_tool_calls() -> None:
    async def chat(request: Request) -> Any:
        body = await request.json()
        if body.get("tool_choice") == "required":
            call = {"index": 0, "id": "c1", "type": "function"}
            call["function"] = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
            return _sse(_delta(tool_calls=[call]))
        return _sse(_delta(content="It is sunny."))

    with serve(_llama_like(chat, {"supports_tool_calls": True})) as url:
        report = asyncio.run(diagnose(f"{url}/v1"))
    assert report["tool_calls"] == "structured"
    assert "tools_forced" in [probe["probe"] for probe in report["probes"]]
    assert not [warning for warning in report["warnings"] if "tool" in warning]


@pytest.mark.parametrize("takes_tools", [True, False])
def test_a_model_that_never_calls_is_told_apart_from_a_template_without_tools(
    takes_tools: bool,
) -> None:
    async def chat(request: Request) -> Any:
        return _sse(_delta(content="It is sunny."))

    with serve(_llama_like(chat, {"supports_tool_calls": takes_tools})) as url:
        report = asyncio.run(diagnose(f"{url}/v1"))
    (warning,) = [warning for warning in report["warnings"] if "tool" in warning]
    assert ("the model's choice" in warning) is takes_tools
    assert report["reasoning_format"] is None  # no reasoning came: nothing to tell


# --- faults -------------------------------------------------------------------------------------


def test_nothing_listening(capsys: pytest.CaptureFixture[str]) -> None:
    with refusing_upstream() as url:
        assert main(["doctor", "--upstream-url", url, "--model", "m", "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["usable"] is False
        assert any("unreachable" in w and "upstream_unreachable" in w for w in report["warnings"])
        # GET /models could not connect: nothing else would.
        assert [probe["probe"] for probe in report["probes"]] == ["models"]
        assert report["failed_probe"]["reason"] == "refused"
        assert report["serve_command"] is None


def test_a_refused_key_is_reported_and_never_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-doctor-secret-0123456789abcdef"

    async def refuse(request: Request) -> JSONResponse:
        # As OpenAI does: the key quoted back in the message.
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        message = f"Incorrect API key provided: {given}."
        return JSONResponse({"error": {"message": message, "code": "invalid_api_key"}}, 401)

    app = Starlette(routes=[Route("/{path:path}", refuse, methods=["GET", "POST"])])
    monkeypatch.setenv("DOCTOR_TEST_KEY", key)
    with serve(app) as url:
        flags = ["doctor", "--upstream-url", f"{url}/v1", "--model", "gpt-x"]
        flags += ["--api-key-env", "DOCTOR_TEST_KEY"]
        assert main(flags) == 1
        table = capsys.readouterr().out
        assert main([*flags, "--json"]) == 1
        out = capsys.readouterr().out
    assert key not in table + out and key[:12] not in table + out
    report = json.loads(out)
    assert report["usable"] is False
    (rejected, *_) = [w for w in report["warnings"] if "rejected the key" in w]
    assert "upstream_http_401" in rejected and "[redacted]" in rejected
    assert "$DOCTOR_TEST_KEY" in rejected
    assert report["failed_probe"]["probe"] == "plain"
    assert report["serve_command"] is None and "serve it with" not in table
    assert "rejected the key" in table


def test_an_html_502(capsys: pytest.CaptureFixture[str]) -> None:
    with faulty_upstream() as upstream:
        model = fault_model("status", code=502, body="html")
        assert main(["doctor", "--upstream-url", upstream.url, "--model", model, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["usable"] is False
    assert any("upstream_http_502" in warning for warning in report["warnings"])


def test_a_bad_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--upstream-url", "localhost:8080"]) == 2
    assert "upstream_url must be an http(s) URL" in capsys.readouterr().err


# --- servers told by their answers; a call in no known format -----------------------------------


def _fake_server(
    owner: str, versions: dict[str, Any], tool_answer: str = "CALL get_weather WITH city=Paris"
) -> Starlette:
    """Lists one model owned by ``owner``, serves ``versions`` (path: JSON) and answers every
    chat request with a whole ``chat.completion``; one with tools gets ``tool_answer`` (by
    default a call in no known format)."""

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "m1", "owned_by": owner}]})

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        content = tool_answer if body.get("tools") else "Hi."
        message = {"role": "assistant", "content": content}
        return JSONResponse(
            {
                "object": "chat.completion",
                "model": "m1",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )

    routes = [
        Route("/v1/models", models),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        *(Route(path, _answer_with(data)) for path, data in versions.items()),
    ]
    return Starlette(routes=routes)


def _answer_with(data: Any) -> Any:
    async def answer(request: Request) -> JSONResponse:
        return JSONResponse(data)

    return answer


@pytest.mark.parametrize(
    ("owner", "versions", "server"),
    [
        ("vllm", {"/version": {"version": "0.11.0"}}, "vLLM 0.11.0"),
        ("library", {"/api/version": {"version": "0.12.3"}}, "Ollama 0.12.3"),
        ("sglang", {}, "SGLang"),
    ],
)
def test_a_server_told_by_its_answers(owner: str, versions: dict[str, Any], server: str) -> None:
    with serve(_fake_server(owner, versions)) as url:
        report = asyncio.run(diagnose(f"{url}/v1"))
    assert report["server"] == server
    assert report["model"] == "m1" and report["models"] == ["m1"]
    assert report["usable"] is True
    assert report["reasoning"] == "none" and report["tool_calls"] == "none"
    assert report["usage"] is False
    assert report["responses_api"] is False
    unknown = [w for w in report["warnings"] if "in a format the bridge does not know" in w]
    assert unknown and "CALL get_weather" in unknown[0]


# --- the probe that failed: it is named, with what failed, and no serve line is offered ------


@pytest.fixture(scope="module")
def plain_http_url() -> Iterator[str]:
    """A real upstream serving under ``/v1``, over plain HTTP (its base URL without ``/v1``)."""
    with serve(create_scripted_upstream()) as url:
        yield url


def _doctor_both_ways(url: str, model: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    """The doctor's table and JSON report for ``url``; both exit 1 and offer no serve line."""
    flags = ["doctor", "--upstream-url", url, *model]
    assert main(flags) == 1
    table = capsys.readouterr().out
    assert main([*flags, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["usable"] is False and report["serve_command"] is None
    assert "serve it with" not in table and "agui-bridge serve" not in table
    assert report["failed_probe"]["ok"] is False
    failed = report["failed_probe"]
    assert f"failed probe  {failed['probe']}: {failed['method']} {failed['path']}" in table
    assert failed["message"] in table and failed["message"] in report["warnings"][0]
    return table, report


@pytest.mark.parametrize("model", [[], ["--model", "scripted-plain"]], ids=["no-model", "model"])
@pytest.mark.parametrize("case", ["refused", "dns", "tls"])
def test_an_unreachable_upstream_names_what_failed(
    case: str, model: list[str], plain_http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with refusing_upstream() as refused:
        url = {
            "refused": refused,
            "dns": "http://nonexistent.invalid/v1",
            # https:// to a server that speaks plain HTTP: the TLS handshake fails
            "tls": f"{plain_http_url.replace('http://', 'https://')}/v1",
        }[case]
        table, report = _doctor_both_ways(url, model, capsys)
    failed = report["failed_probe"]
    # GET /models came first and could not connect: nothing else is tried, --model or not.
    assert [probe["probe"] for probe in report["probes"]] == ["models"]
    assert (failed["probe"], failed["code"], failed["reason"]) == (
        "models",
        "upstream_unreachable",
        case,
    )
    says = {
        "refused": "the connection was refused",
        "dns": "its host name does not resolve",
        "tls": "the TLS handshake failed (wrong version number); does it speak plain HTTP? "
        "try http://",
    }[case]
    assert says in failed["message"]
    assert "no --model given" not in table
    assert report["suggested_upstream_url"] is None


def test_a_url_without_v1_gets_a_404_and_the_url_meant(
    plain_http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = plain_http_url  # the upstream serves under /v1
    hint = f"did you mean --upstream-url {url}/v1?"
    _, report = _doctor_both_ways(url, [], capsys)
    failed = report["failed_probe"]
    assert (failed["probe"], failed["method"], failed["code"]) == (
        "models",
        "GET",
        "upstream_http_404",
    )
    assert (
        failed["message"] == f"the upstream answered HTTP 404 Not Found to GET {url}/models; {hint}"
    )
    assert report["suggested_upstream_url"] == f"{url}/v1"
    assert "no --model given" not in " ".join(report["warnings"])

    # With a model named, the chat request is tried and fails the same way: it is the one named.
    table, report = _doctor_both_ways(url, ["--model", "scripted-plain"], capsys)
    failed = report["failed_probe"]
    assert (failed["probe"], failed["method"], failed["path"]) == (
        "plain",
        "POST",
        "/chat/completions",
    )
    assert f"POST {url}/chat/completions; {hint}" in failed["message"]
    assert f"did you mean  --upstream-url {url}/v1" in table
    # One failure, said once: not again for each probe after it.
    assert len([w for w in report["warnings"] if "404" in w]) == 1

    # The suggestion works.
    assert main(["doctor", "--upstream-url", report["suggested_upstream_url"]]) == 0
    assert "serve it with" in capsys.readouterr().out


def test_credentials_in_the_url_are_never_shown(
    plain_http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = plain_http_url.replace("http://", "http://someone:pw-in-the-url@")
    table, report = _doctor_both_ways(f"{url}/v1/chat/completions", [], capsys)
    assert "pw-in-the-url" not in table + json.dumps(report)
    assert "someone" not in table + json.dumps(report)
    # A base URL with the endpoint pasted on: the base is what was meant.
    assert report["suggested_upstream_url"] == f"{plain_http_url}/v1"
    # And one that works with them in it goes through (basic auth, in the header).
    assert main(["doctor", "--upstream-url", f"{url}/v1", "--json"]) == 0
    out = capsys.readouterr().out
    assert "pw-in-the-url" not in out and json.loads(out)["upstream"] == f"{plain_http_url}/v1"


def test_no_hint_when_the_url_has_its_version(
    plain_http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = _doctor_both_ways(f"{plain_http_url}/api/v1", [], capsys)
    assert report["failed_probe"]["code"] == "upstream_http_404"
    assert report["suggested_upstream_url"] is None
    assert "did you mean" not in report["failed_probe"]["message"]


def test_a_web_page_for_a_models_list_is_told(capsys: pytest.CaptureFixture[str]) -> None:
    """A base URL that is the server's site (a page for every path), its API under /v1."""

    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>chat</title>")

    app = Starlette(routes=[Route("/models", page), Mount("/", app=create_scripted_upstream())])
    with serve(app) as url:
        assert main(["doctor", "--upstream-url", url, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["usable"] is False and report["serve_command"] is None
    assert report["warnings"] == [
        f"GET /models answered HTTP 200 with no models list (text/html): is {url} the API's "
        f"base URL? did you mean --upstream-url {url}/v1?"
    ]


def test_a_model_that_says_the_prompt_back_is_not_taken_for_one_writing_calls_as_text() -> None:
    """A small model may echo the chat's turns, the probe's prompt and the tool's definition,
    both naming the tool (llama.cpp's GLM template and its tiny test model): that is no call
    written as text."""
    echo = (
        f"<|user|>{PROBE_TOOL_PROMPT}</|user|>\n\nYou may call one or more functions.\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "description": "Current'
    )
    with serve(_fake_server("sglang", {}, tool_answer=echo)) as url:
        report = asyncio.run(diagnose(f"{url}/v1"))
    assert report["tool_calls"] == "none"
    assert not [w for w in report["warnings"] if "does not know" in w], report["warnings"]
    assert "asked to use a tool, the model called none" in report["warnings"]
    # Named outside the prompt said back, it still is.
    with serve(_fake_server("sglang", {}, tool_answer=f"{echo} get_weather(Paris)")) as url:
        report = asyncio.run(diagnose(f"{url}/v1"))
    assert [w for w in report["warnings"] if "does not know" in w]
