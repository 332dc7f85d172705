"""``agui-bridge doctor``: a few small requests to an upstream, read by the bridge's own decoder
and filters, and what they tell: where the reasoning arrives, how tool calls come, whether usage,
the Responses API and reasoning sent back work, and the ``serve`` line with the flags it needs.

The probes, in order: ``GET /models``; llama.cpp's ``GET /props`` (and a version endpoint for
vLLM or Ollama when the models list hints at one); a streamed answer without tools; one with a
tool offered and asked for; ``POST /responses``; and the tool loop sent back with its reasoning
on the assistant message (as ``serve`` sends it), to see whether the server accepts it. Every
request body is built by the bridge's own request builder, so the server sees what ``serve``
would send it.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from ag_ui.core import BaseEvent, EventType, RunAgentInput

from bridge.config import BridgeConfig
from bridge.core.decode import decode_chat_chunk
from bridge.core.decode_responses import ResponsesDecoder
from bridge.core.errors import (
    BridgeError,
    UpstreamConnectionError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
)
from bridge.core.parts import Part, Reasoning, Text, ToolCallDelta, Usage
from bridge.core.reasoning_tags import KNOWN_REASONING_TAGS, ReasoningTagFilter, TagPair
from bridge.core.text_tools.filter import TEXT_TOOL_FORMATS, TextToolCalls
from bridge.core.translate import DONE, ChatStreamTranslator, TranslateOptions
from bridge.serve.redact import Redactor
from bridge.serve.request import build_chat_request, build_responses_request
from bridge.serve.upstream import UpstreamClient

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Harmony (gpt-oss) has no tags: its ``analysis`` channel is the reasoning.
HARMONY_REASONING: TagPair = ("<|channel|>analysis<|message|>", "<|end|>")
_PLAIN_PROMPT = "Hello! Who are you? Answer in one short sentence."
_TOOL_PROMPT = "What's the weather in Paris? Use the get_weather tool."
_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}
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
class Answer:
    """One probe request: what it read, or the error that ended it."""

    name: str
    path: str
    chunks: list[dict[str, Any] | str] = field(default_factory=list)
    error: BridgeError | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "probe": self.name,
            "path": self.path,
            "ok": self.ok,
            "ms": round(self.seconds * 1000),
        }
        if self.error is not None:
            out.update(code=self.error.code, message=self.error.message)
        return out


@dataclass
class _Get:
    """A ``GET`` probe's outcome."""

    status: int | None
    headers: Mapping[str, str]
    data: Any
    error: str | None = None


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
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(headers=headers, timeout=10.0, transport=transport) as http:
        listed = await _get(http, f"{config.upstream_url}/models")
        models = _model_ids(listed.data)
        chosen = model or (models[0] if models else None)
        report: dict[str, Any] = {"upstream": config.upstream_url, "model": chosen}
        warnings: list[str] = []
        if chosen is None:
            warnings.append("no --model given and the upstream lists no models: name one")
            return _finish(report, models, None, warnings, [], usable=False)
        config = _config(upstream_url, chosen, api_key)
        client = UpstreamClient(config, transport=transport)
        try:
            props = await client.llama_cpp_props()
            server = await _server(http, config.upstream_url, listed, props)
            answers = await _probe(client, config)
        finally:
            await client.aclose()
    if listed.status in (401, 403) and not _key_refused(answers[0].error):
        warnings.append(
            f"GET /models: the upstream rejected the key [upstream_http_{listed.status}]"
        )
    return _finish(report, models, server, warnings, answers, props=props, key_env=api_key_env)


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
    if isinstance(answers[0].error, UpstreamConnectionError | UpstreamTimeoutError):
        return answers  # nothing else will get through
    asked = _run_input([_user(_TOOL_PROMPT)], limit, tools=True)
    answers.append(await _read(client, "tools", build_chat_request(asked, config)))
    responses = build_responses_request(plain, config)
    answers.append(await _read(client, "responses", responses, "/responses"))
    if answers[1].ok:
        loop = _tool_loop(with_reasoning=True)
        answers.append(await _read(client, "reasoning_back", build_chat_request(loop, config)))
        if isinstance(answers[-1].error, UpstreamHTTPError):
            # Refused: is it the reasoning? The same loop without it tells.
            bare = build_chat_request(_tool_loop(with_reasoning=False), config)
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
            "tools": [_TOOL] if tools else [],
            "context": [],
            "forwardedProps": forwarded,
        }
    )


def _tool_loop(*, with_reasoning: bool) -> RunAgentInput:
    call = {
        "id": "call_doctor_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    messages = [
        _user(_TOOL_PROMPT),
        {"id": "doctor-reasoning", "role": "reasoning", "content": _SENT_BACK_REASONING},
        {"id": "doctor-assistant", "role": "assistant", "toolCalls": [call]},
        {
            "id": "doctor-tool",
            "role": "tool",
            "toolCallId": "call_doctor_1",
            "content": '{"temperature": 18, "sky": "sunny"}',
        },
    ]
    if not with_reasoning:
        del messages[1]
    return _run_input(messages, {"max_tokens": 64}, tools=True)


# --- reading the answers ----------------------------------------------------------------------


@dataclass
class _Findings:
    reasoning: str = "none"
    tags: TagPair | None = None
    tag_name: str | None = None
    starts_in_reasoning: bool = False
    tool_calls: str = "none"
    usage: bool = False
    responses_api: bool = False
    responses_reasoning: bool = False
    round_trip: str = "unknown"
    round_trip_error: BridgeError | None = None
    tool_text: str = ""


def _analyse(answers: Sequence[Answer]) -> _Findings:
    found = _Findings()
    by_name = {answer.name: answer for answer in answers}
    chat = [by_name[n] for n in ("plain", "tools") if n in by_name and by_name[n].chunks]
    fields: set[str] = set()
    content = ""
    for answer in chat:
        fields |= _delta_fields(answer.chunks)
        content += _joined(_parts(answer.chunks), Text)
        found.usage = found.usage or any(isinstance(p, Usage) for p in _parts(answer.chunks))
    for key in ("reasoning_details", "reasoning_content", "reasoning"):
        if key in fields:
            found.reasoning = key
            break
    found.tags, found.tag_name, found.starts_in_reasoning = _tags(content)
    if found.reasoning == "none" and found.tags is not None:
        found.reasoning = "tags"
    tools = by_name.get("tools")
    if tools is not None and tools.chunks:
        if "tool_calls" in _delta_fields(tools.chunks):
            found.tool_calls = "structured"
        else:
            found.tool_text = _answer_text(_joined(_parts(tools.chunks), Text), found)
            found.tool_calls = _text_format(found.tool_text) or "none"
    responses = by_name.get("responses")
    if responses is not None and responses.ok and responses.chunks:
        decoder = ResponsesDecoder()
        try:
            parts = [p for c in responses.chunks if isinstance(c, dict) for p in decoder.decode(c)]
            found.responses_api = bool(parts)
            found.responses_reasoning = any(isinstance(p, Reasoning) for p in parts)
        except BridgeError:
            found.responses_api = False
    back = by_name.get("reasoning_back")
    if back is not None:
        without = by_name.get("reasoning_back_without")
        if back.ok:
            found.round_trip = "accepted"
        elif without is not None and without.ok:
            found.round_trip, found.round_trip_error = "rejected", back.error
        else:
            found.round_trip_error = back.error
    return found


def _parts(chunks: Sequence[dict[str, Any] | str]) -> list[Part]:
    parts: list[Part] = []
    for chunk in chunks:
        if isinstance(chunk, dict):
            try:
                parts += decode_chat_chunk(chunk)
            except BridgeError:
                break
    return parts


def _joined(parts: Sequence[Part], kind: type[Text] | type[Reasoning]) -> str:
    return "".join(p.text for p in parts if isinstance(p, kind))


def _delta_fields(chunks: Sequence[dict[str, Any] | str]) -> set[str]:
    """The fields that carried something, in the deltas (or a whole answer's message)."""
    fields: set[str] = set()
    for chunk in chunks:
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict):
                delta = choice.get("delta") or choice.get("message") or {}
                if isinstance(delta, dict):
                    fields |= {key for key, value in delta.items() if value}
    return fields


def _tags(content: str) -> tuple[TagPair | None, str | None, bool]:
    """The reasoning markers found in ``content``, their ``--reasoning-tags`` name, and whether
    only the closing one came (the template opened it)."""
    if HARMONY_REASONING[0] in content:
        return HARMONY_REASONING, None, False
    for name, (open_tag, close_tag) in KNOWN_REASONING_TAGS.items():
        if close_tag in content:
            return (open_tag, close_tag), name, open_tag not in content.split(close_tag, 1)[0]
        if open_tag in content:
            return (open_tag, close_tag), name, False
    return None, None, False


def _answer_text(content: str, found: _Findings) -> str:
    """``content`` without its reasoning, as the bridge's tag filter reads it."""
    if found.tags is None or found.tags == HARMONY_REASONING:
        return content
    split = ReasoningTagFilter([found.tags], starts_in_reasoning=found.starts_in_reasoning)
    return _joined([*split.feed(content), *split.close()], Text)


def _text_format(text: str) -> str | None:
    """The text tool-call format whose reader finds a call in ``text``, if one does."""
    schema = {str(_TOOL["name"]): _TOOL["parameters"]}
    # Formats that share a marker log their misreadings of each other's calls: not news here.
    log = logging.getLogger("agui_bridge")
    was_disabled, log.disabled = log.disabled, True
    try:
        for name in TEXT_TOOL_FORMATS:
            reader = TextToolCalls((name,), tool_names=schema)
            parts = [*reader.feed(text), *reader.close()]
            if any(isinstance(p, ToolCallDelta) and p.name for p in parts):
                return name
    finally:
        log.disabled = was_disabled
    return None


# --- what to tell ---------------------------------------------------------------------------


def _finish(
    report: dict[str, Any],
    models: list[str],
    server: str | None,
    warnings: list[str],
    answers: Sequence[Answer],
    *,
    props: Mapping[str, Any] | None = None,
    key_env: str = DEFAULT_KEY_ENV,
    usable: bool | None = None,
) -> dict[str, Any]:
    found = _analyse(answers)
    plain = answers[0] if answers else None
    if usable is None:
        usable = plain is not None and plain.ok
    if plain is not None and plain.error is not None:
        warnings.append(_failure(plain.error, key_env))
    flags = _flags(found)
    warnings += _advice(found, answers)
    if props is not None:
        caps = props.get("chat_template_caps")
        if isinstance(caps, dict) and caps.get("supports_preserve_reasoning") is False:
            warnings.append(
                "llama.cpp's /props says its template does not keep reasoning sent back "
                "(supports_preserve_reasoning: false); it is accepted, then left out"
            )
    command = ["agui-bridge", "serve", "--upstream-url", report["upstream"]]
    command += ["--model", report["model"] or "MODEL"]
    if key_env != DEFAULT_KEY_ENV:
        command += ["--api-key-env", key_env]
    report.update(
        usable=usable,
        server=server,
        models=models,
        reasoning=found.reasoning,
        reasoning_tags=list(found.tags) if found.tags else None,
        starts_in_reasoning=found.starts_in_reasoning,
        tool_calls=found.tool_calls,
        usage=found.usage,
        responses_api=found.responses_api,
        reasoning_round_trip=found.round_trip,
        serve_command=shlex.join(command + flags),
        warnings=warnings,
        bridge_view=_bridge_view(answers, flags),
        probes=[answer.summary() for answer in answers],
    )
    return report


def _flags(found: _Findings) -> list[str]:
    flags: list[str] = []
    if found.reasoning == "tags" and found.tag_name not in (None, "think"):
        flags += ["--reasoning-tags", str(found.tag_name)]
    if found.reasoning == "tags" and found.starts_in_reasoning:
        flags.append("--starts-in-reasoning")
    if found.tool_calls in TEXT_TOOL_FORMATS:
        flags += ["--text-tool-format", found.tool_calls]
    if found.round_trip == "rejected":
        flags += ["--reasoning-history", "drop"]
    if found.reasoning == "none" and found.responses_reasoning:
        flags += ["--upstream-api", "responses"]
    return flags


def _advice(found: _Findings, answers: Sequence[Answer]) -> list[str]:
    out: list[str] = []
    if found.reasoning == "tags" and found.tag_name not in (None, "think"):
        open_tag, close_tag = found.tags or ("", "")
        out.append(
            f"the reasoning arrives between {open_tag} and {close_tag} in the content: "
            f"without --reasoning-tags {found.tag_name} it shows as answer text"
        )
    if found.reasoning == "tags" and found.starts_in_reasoning:
        close_tag = (found.tags or ("", ""))[1]
        out.append(
            f"only {close_tag} arrives (the chat template opened the reasoning): without "
            "--starts-in-reasoning the reasoning shows as answer text"
        )
    by_name = {answer.name: answer for answer in answers}
    tools = by_name.get("tools")
    if tools is not None and tools.error is not None:
        out.append(f"a request with a tool failed: {tools.error.message} [{tools.error.code}]")
    elif tools is not None and found.tool_calls == "none":
        if str(_TOOL["name"]) in found.tool_text:
            excerpt = found.tool_text.strip()[:120]
            out.append(
                "the model seems to write its tool calls as text in a format the bridge does "
                f"not know; they will show as text: {excerpt!r}"
            )
        else:
            out.append("asked to use a tool, the model called none")
    if found.reasoning == "none" and found.responses_reasoning:
        out.append(
            "Chat Completions shows no reasoning but the Responses API does: serve with "
            "--upstream-api responses"
        )
    if by_name.get("plain") is not None and by_name["plain"].ok and not found.usage:
        out.append("the upstream reports no token usage in its streams: runs end without usage")
    if found.round_trip == "rejected" and found.round_trip_error is not None:
        error = found.round_trip_error
        out.append(
            "the upstream refuses reasoning sent back on an assistant message "
            f"({error.message} [{error.code}]): serve with --reasoning-history drop"
        )
    elif found.round_trip == "unknown" and found.round_trip_error is not None:
        error = found.round_trip_error
        out.append(f"a tool loop sent back failed: {error.message} [{error.code}]")
    return out


def _key_refused(error: BridgeError | None) -> bool:
    return isinstance(error, UpstreamHTTPError) and error.status in (401, 403)


def _failure(error: BridgeError, key_env: str) -> str:
    if _key_refused(error):
        return (
            f"the upstream rejected the key: {error.message} [{error.code}]; "
            f"is ${key_env} set to the right key?"
        )
    if isinstance(error, UpstreamConnectionError | UpstreamTimeoutError):
        return f"the upstream is unreachable: {error.message} [{error.code}]"
    return f"a streamed answer failed: {error.message} [{error.code}]"


def _bridge_view(answers: Sequence[Answer], flags: list[str]) -> dict[str, Any]:
    """What the bridge, with the flags proposed, makes of the two chat answers: the events'
    reasoning and text, and the tool calls it would hand the frontend."""
    options = TranslateOptions(
        reasoning_tags=[_flag(flags, "--reasoning-tags") or "think"],
        starts_in_reasoning="--starts-in-reasoning" in flags,
        text_tool_format=_flag(flags, "--text-tool-format") or "auto",
    )
    view: dict[str, Any] = {}
    for answer in answers:
        if answer.name not in ("plain", "tools") or not answer.chunks:
            continue
        tools = {str(_TOOL["name"]): _TOOL["parameters"]} if answer.name == "tools" else {}
        events = _translate(answer.chunks, options, tools)
        view[answer.name] = {
            "reasoning": _deltas(events, EventType.REASONING_MESSAGE_CONTENT),
            "text": _deltas(events, EventType.TEXT_MESSAGE_CONTENT),
            "tool_calls": [
                getattr(e, "tool_call_name", "")
                for e in events
                if e.type == EventType.TOOL_CALL_START
            ],
        }
    return view


def _translate(
    chunks: Sequence[dict[str, Any] | str], options: TranslateOptions, tools: Mapping[str, Any]
) -> list[BaseEvent]:
    translator = ChatStreamTranslator(options, tool_names=tools)
    events: list[BaseEvent] = []
    try:
        for chunk in chunks:
            events += translator.feed(chunk)
    except BridgeError:
        pass  # the probe's own error says it; what came before is still worth showing
    return events + translator.close()


def _deltas(events: Sequence[BaseEvent], kind: EventType) -> str:
    return "".join(getattr(e, "delta", "") for e in events if e.type == kind)


def _flag(flags: list[str], name: str) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else None


# --- the server ---------------------------------------------------------------------------------


async def _get(http: httpx.AsyncClient, url: str) -> _Get:
    try:
        response = await http.get(url)
    except httpx.HTTPError as exc:
        return _Get(None, {}, None, f"{type(exc).__name__}")
    try:
        data = response.json()
    except ValueError:
        data = None
    return _Get(response.status_code, response.headers, data)


def _model_ids(data: Any) -> list[str]:
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        entries = data.get("models") if isinstance(data, dict) else None  # some servers
    return [
        str(entry.get("id") or entry.get("name"))
        for entry in entries or ()
        if isinstance(entry, dict) and (entry.get("id") or entry.get("name"))
    ]


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
    owners = (
        {
            str(entry.get("owned_by"))
            for entry in (listed.data or {}).get("data", ()) or ()
            if isinstance(entry, dict)
        }
        if isinstance(listed.data, dict)
        else set()
    )
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


# --- for people -------------------------------------------------------------------------------


def render_table(report: Mapping[str, Any]) -> str:
    """The report as a two-column table, the ``serve`` line and the warnings."""
    models = report.get("models") or []
    shown = ", ".join(models[:4]) + (f", … ({len(models)} in all)" if len(models) > 4 else "")
    tags = report.get("reasoning_tags")
    rows = [
        ("upstream", report["upstream"]),
        ("server", report.get("server") or "(not told)"),
        ("models", shown or "(none listed)"),
        ("model probed", report.get("model") or "(none)"),
        ("usable", _yes(report.get("usable"))),
        ("reasoning", report.get("reasoning")),
        ("reasoning_tags", f"{tags[0]} … {tags[1]}" if tags else "-"),
        ("starts_in_reasoning", _yes(report.get("starts_in_reasoning"))),
        ("tool_calls", report.get("tool_calls")),
        ("usage", _yes(report.get("usage"))),
        ("responses_api", _yes(report.get("responses_api"))),
        ("reasoning_round_trip", report.get("reasoning_round_trip")),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
    lines += ["", "serve it with:", f"  {report['serve_command']}"]
    warnings = report.get("warnings") or []
    if warnings:
        lines += ["", "warnings:", *(f"  - {warning}" for warning in warnings)]
    return "\n".join(lines)


def _yes(value: Any) -> str:
    return "yes" if value else "no"


def redacted_output(report: Mapping[str, Any], key: str | None, *, as_json: bool) -> str:
    """The report as printed: a table or one JSON object, never with the key in it."""
    text = json.dumps(report, ensure_ascii=False, indent=2) if as_json else render_table(report)
    return Redactor((key,)).redact(text)
