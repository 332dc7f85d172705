"""The doctor's probes: a few small requests through the bridge's own upstream client and request
builder, so the server sees what ``serve`` would send it.

In order: ``GET /models``; llama.cpp's ``GET /props`` (and a version endpoint for vLLM or Ollama
when the models list hints at one); a streamed answer without tools; one with a tool offered and
asked for (and, when no call came, the same with ``tool_choice: "required"``); ``POST
/responses``; and the tool loop sent back with its reasoning on the assistant message (as
``serve`` sends it), to see whether the server accepts it, and, if it does not, the same loop
without the reasoning, to see whether the reasoning was why.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from ag_ui.core import RunAgentInput

from bridge.cli.doctor.answer import Answer
from bridge.cli.doctor.findings import (
    DEFAULT_KEY_ENV,
    delta_fields,
    finish,
    key_refused,
    parts_of,
)
from bridge.cli.doctor.view import PROBE_TOOL, PROBE_TOOL_PROMPT
from bridge.config import BridgeConfig
from bridge.core.emitter import fields_value
from bridge.core.errors import (
    BridgeError,
    UpstreamConnectionError,
    UpstreamHTTPError,
    UpstreamStreamError,
    UpstreamTimeoutError,
)
from bridge.core.parts import ToolCallDelta
from bridge.core.translate import DONE
from bridge.core.upstream_url import shown_url, upstream_url_hint
from bridge.serve.run.profiles import profile_of
from bridge.serve.run.request import build_chat_request, build_responses_request
from bridge.serve.upstream.client import UpstreamClient

_PLAIN_PROMPT = "Hello! Who are you? Answer in one short sentence."
_SENT_BACK_REASONING = "The user wants the weather in Paris, so I call get_weather."
_MAX_TOKENS = 256
#: Hosted APIs known by their address.
_HOSTS = {
    "openrouter.ai": "OpenRouter",
    "api.openai.com": "OpenAI",
    "api.deepseek.com": "DeepSeek",
    "api.groq.com": "Groq",
    "api.moonshot.ai": "Moonshot (Kimi)",
    "api.mistral.ai": "Mistral",
    "api.together.xyz": "Together",
    "generativelanguage.googleapis.com": "Google Gemini",
}
#: ``owned_by`` in ``GET /models``, as servers fill it in.
_OWNERS = {"vllm": "vLLM", "sglang": "SGLang", "agui-bridge": "agui-bridge scripted upstream"}


@dataclass
class _Get:
    """What a ``GET`` answered (nothing but ``None`` when it failed)."""

    status: int | None
    headers: Mapping[str, str]
    data: Any


async def diagnose(
    upstream_url: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    api_key_env: str = DEFAULT_KEY_ENV,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Probe the upstream and report (the keys are README's "Which flags does my server
    need?"). ``ValueError`` for an upstream URL that is not one."""
    config = _config(upstream_url, model or "probe", api_key)  # validates the URL
    report: dict[str, Any] = {"upstream": shown_url(config.upstream_url), "model": model}
    # The rules the requests follow (--provider auto), as serve would choose them.
    profile, why = profile_of(config)
    report.update(provider=profile.name, provider_reason=why)
    warnings: list[str] = []
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = UpstreamClient(config, transport=transport)
    try:
        listing, listed = await _list_models(client)
        models = _model_ids(listed.data)
        report["model"] = chosen = model or (models[0] if models else None)
        if _unreachable(listing.error):
            return finish(report, models, None, warnings, [listing], key_env=api_key_env)
        if listing.ok and not _is_model_list(listed.data):
            warnings.append(_not_a_model_list(report["upstream"], listed))
        elif listing.ok and chosen is None:
            warnings.append("no --model given and the upstream lists no models: name one")
        if chosen is None:
            return finish(report, models, None, warnings, [listing], key_env=api_key_env)
        config = _config(upstream_url, chosen, api_key)
        props = await _props(client, chosen)
        async with httpx.AsyncClient(headers=headers, timeout=10.0, transport=transport) as http:
            server = await _server(http, config.upstream_url, listed, props)
        answers = await _probe(client, config)
    finally:
        await client.aclose()
    if listed.status in (401, 403) and not key_refused(answers[0].error):
        warnings.append(
            f"GET /models: the upstream rejected the key [upstream_http_{listed.status}]"
        )
    answers.insert(0, listing)
    return finish(report, models, server, warnings, answers, props=props, key_env=api_key_env)


async def _list_models(client: UpstreamClient) -> tuple[Answer, _Get]:
    """``GET /models``: the probe's outcome, and what it answered."""
    answer = Answer("models", "/models", method="GET")
    began = time.monotonic()
    try:
        response = await client.get("/models")
    except BridgeError as exc:
        answer.error = exc
        listed = _Get(exc.status if isinstance(exc, UpstreamHTTPError) else None, {}, None)
    else:
        try:
            data = response.json()
        except ValueError:
            data = None
        listed = _Get(response.status_code, response.headers, data)
    answer.seconds = time.monotonic() - began
    return answer, listed


async def _props(client: UpstreamClient, model: str) -> dict[str, Any] | None:
    """llama.cpp's ``/props`` for the model probed; ``None`` when the server has none, or it
    could not be read (the probes that follow tell why)."""
    try:
        return await client.llama_cpp_props(model)
    except BridgeError:
        return None


def _unreachable(error: BridgeError | None) -> bool:
    """No connection could be made, or none answered in time: nothing else will get through.
    (A server that closes the connection on one request may answer another.)"""
    if isinstance(error, UpstreamConnectionError):
        return error.reason != "closed"
    return isinstance(error, UpstreamTimeoutError)


def _config(upstream_url: str, model: str, api_key: str | None) -> BridgeConfig:
    # No retries: the doctor reports what the server does, and a fault should not take seconds.
    return BridgeConfig(
        upstream_url=upstream_url,
        model=model,
        api_key=api_key,
        retries=0,
        connect_timeout=5.0,
        idle_timeout=60.0,
        reasoning_history="field",
    )


async def _probe(client: UpstreamClient, config: BridgeConfig) -> list[Answer]:
    limit = {"max_tokens": _MAX_TOKENS}
    plain = _run_input([_user(_PLAIN_PROMPT)], limit)
    answers = [await _read(client, "plain", build_chat_request(plain, config))]
    if _unreachable(answers[0].error):
        return answers
    asked = _run_input([_user(PROBE_TOOL_PROMPT)], limit, tools=True)
    answers.append(await _read(client, "tools", build_chat_request(asked, config)))
    called = answers[1]
    if answers[1].ok and "tool_calls" not in delta_fields(answers[1].chunks):
        # Asked, a small model may answer in words: forced, it shows whether the server can
        # return calls at all (llama.cpp constrains the answer to a call).
        forced_limit = {**limit, "tool_choice": "required"}
        forced = _run_input([_user(PROBE_TOOL_PROMPT)], forced_limit, tools=True)
        called = await _read(client, "tools_forced", build_chat_request(forced, config))
        answers.append(called)
    responses = build_responses_request(plain, config)
    answers.append(await _read(client, "responses", responses, "/responses"))
    if answers[1].ok:
        # The call the server made, sent back as serve sends it (with what the provider put
        # on it: Gemini refuses a loop whose call lacks its thought signature); a made-up one
        # when it made none.
        made = _first_call(called.chunks)
        loop = _tool_loop(with_reasoning=True, call=made)
        answers.append(await _read(client, "reasoning_back", build_chat_request(loop, config)))
        if isinstance(answers[-1].error, UpstreamHTTPError):
            # Refused: is it the reasoning? The same loop without it tells.
            bare = build_chat_request(_tool_loop(with_reasoning=False, call=made), config)
            answers.append(await _read(client, "reasoning_back_without", bare))
    return answers


async def _read(
    client: UpstreamClient, name: str, body: dict[str, Any], path: str = "/chat/completions"
) -> Answer:
    answer = Answer(name, path)
    began = time.monotonic()
    try:
        stream = client.stream(body, path)
        try:
            async for chunk in stream:
                answer.chunks.append(chunk)
                if chunk == DONE:
                    break
                if path == "/chat/completions" and isinstance(chunk, dict) and "error" in chunk:
                    # An error mid-answer (llama.cpp's parser refusing what the model wrote,
                    # say) fails the probe as it fails a run: RUN_ERROR upstream_error.
                    raise UpstreamStreamError.from_payload(chunk["error"])
        finally:
            await stream.aclose()
    except BridgeError as exc:
        answer.error = exc
    answer.seconds = time.monotonic() - began
    return answer


def _user(text: str) -> dict[str, Any]:
    return {"id": "doctor-user", "role": "user", "content": text}


def _run_input(
    messages: list[dict[str, Any]], forwarded: dict[str, Any], *, tools: bool = False
) -> RunAgentInput:
    return RunAgentInput.model_validate(
        {
            "threadId": "doctor",
            "runId": "doctor",
            "state": None,
            "messages": messages,
            "tools": [PROBE_TOOL] if tools else [],
            "context": [],
            "forwardedProps": forwarded,
        }
    )


def _first_call(chunks: list[Any]) -> dict[str, Any] | None:
    """The first tool call of a probe's answer, as a client holds it (``toolCalls[]``, the
    provider's fields as its encrypted value); ``None`` when it made none."""
    deltas = [p for p in parts_of(chunks) if isinstance(p, ToolCallDelta) and p.index == 0]
    call_id = next((d.id for d in deltas if d.id), None)
    name = next((d.name for d in deltas if d.name), None)
    if call_id is None or name is None:
        return None
    fields: dict[str, str] = {}
    for delta in deltas:
        fields.update(delta.fields or {})
    call: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": "".join(d.arguments for d in deltas)},
    }
    if fields:
        call["encryptedValue"] = fields_value(fields)
    return call


def _tool_loop(*, with_reasoning: bool, call: dict[str, Any] | None = None) -> RunAgentInput:
    call = call or {
        "id": "call_doctor_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages = [
        _user(PROBE_TOOL_PROMPT),
        {"id": "doctor-reasoning", "role": "reasoning", "content": _SENT_BACK_REASONING},
        {"id": "doctor-assistant", "role": "assistant", "toolCalls": [call]},
        {
            "id": "doctor-tool",
            "role": "tool",
            "toolCallId": call["id"],
            "content": '{"temperature": 18, "sky": "sunny"}',
        },
    ]
    if not with_reasoning:
        del messages[1]
    return _run_input(messages, {"max_tokens": 64}, tools=True)


async def _get(http: httpx.AsyncClient, url: str) -> _Get:
    try:
        response = await http.get(url)
    except httpx.HTTPError:
        return _Get(None, {}, None)
    try:
        data = response.json()
    except ValueError:
        data = None
    return _Get(response.status_code, response.headers, data)


def _is_model_list(data: Any) -> bool:
    return isinstance(data, dict) and any(
        isinstance(data.get(key), list) for key in ("data", "models")
    )


def _not_a_model_list(upstream: str, listed: _Get) -> str:
    """A web page, say: a base URL that is the server's site, not its API."""
    kind = listed.headers.get("content-type", "").split(";")[0] or "no content type"
    hint = upstream_url_hint(upstream)
    return (
        f"GET /models answered HTTP {listed.status} with no models list ({kind}): is "
        f"{upstream} the API's base URL?" + (f" {hint}" if hint else "")
    )


def _entries(data: Any) -> list[dict[str, Any]]:
    """The model entries of a ``GET /models`` answer (``data``; some servers say ``models``)."""
    entries = (data.get("data") or data.get("models")) if isinstance(data, dict) else None
    return [entry for entry in entries or () if isinstance(entry, dict)]


def _model_ids(data: Any) -> list[str]:
    ids = (entry.get("id") or entry.get("name") for entry in _entries(data))
    return [str(model) for model in ids if model]


async def _server(
    http: httpx.AsyncClient, base_url: str, listed: _Get, props: Mapping[str, Any] | None
) -> str | None:
    """What the server says it is: llama.cpp's /props, a known host, the models' owner, a
    version endpoint (vLLM's /version, Ollama's /api/version), its Server header."""
    origin = base_url.removesuffix("/v1")
    if props is not None:
        build = props.get("build_info")
        return f"llama.cpp (build {build})" if build else "llama.cpp"
    header = listed.headers.get("server", "")
    if "llama.cpp" in header:
        return "llama.cpp"
    host = urlsplit(base_url).hostname or ""
    for known, name in _HOSTS.items():
        if host == known or host.endswith("." + known):
            return name
    owners = {str(entry.get("owned_by")) for entry in _entries(listed.data)}
    if "vllm" in owners:
        version = await _get(http, f"{origin}/version")
        found = version.data.get("version") if isinstance(version.data, dict) else None
        return f"vLLM {found}" if found else "vLLM"
    for owner in sorted(owners):
        if owner in _OWNERS:
            return _OWNERS[owner]
    if owners & {"library", "ollama"} or not owners:
        ollama = await _get(http, f"{origin}/api/version")
        found = ollama.data.get("version") if isinstance(ollama.data, dict) else None
        if found:
            return f"Ollama {found}"
    return header or None
