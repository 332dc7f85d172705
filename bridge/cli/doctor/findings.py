"""What the doctor's answers tell, read by the bridge's own decoder and filters (no I/O):
where the reasoning arrives, how tool calls come, the flags ``serve`` needs, the warnings, and
what the bridge with those flags makes of the answers."""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.cli.doctor.answer import Answer
from bridge.cli.doctor.llamacpp import (
    MODEL_CALLED_NONE,
    reasoning_format,
    template_takes_tools,
)
from bridge.cli.doctor.view import PROBE_TOOL, PROBE_TOOL_PROMPT, bridge_view
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
from bridge.core.upstream_url import suggested_upstream_url
from bridge.serve.run.modalities import takes_in_words
from bridge.serve.run.props import auto_reasoning_scope

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Harmony (gpt-oss) has no tags: its ``analysis`` channel is the reasoning.
HARMONY_REASONING: TagPair = ("<|channel|>analysis<|message|>", "<|end|>")


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
    reasoned: str = ""
    content: str = ""


def _analyse(answers: Sequence[Answer]) -> _Findings:
    found = _Findings()
    by_name = {answer.name: answer for answer in answers}
    chat = [by_name[n] for n in ("plain", "tools") if n in by_name and by_name[n].chunks]
    fields: set[str] = set()
    content = ""
    for answer in chat:
        fields |= delta_fields(answer.chunks)
        content += _joined(parts_of(answer.chunks), Text)
        found.usage = found.usage or any(isinstance(p, Usage) for p in parts_of(answer.chunks))
    for key in ("reasoning_details", "reasoning_content", "reasoning"):
        if key in fields:
            found.reasoning = key
            break
    found.tags, found.tag_name, found.starts_in_reasoning = _tags(content)
    found.content = content
    found.reasoned = "".join(_joined(parts_of(answer.chunks), Reasoning) for answer in chat)
    if found.reasoning == "none" and found.tags is not None:
        found.reasoning = "tags"
    tools = by_name.get("tools")
    forced = by_name.get("tools_forced")
    if tools is not None and tools.chunks:
        if "tool_calls" in delta_fields(tools.chunks):
            found.tool_calls = "structured"
        elif forced is not None and "tool_calls" in delta_fields(forced.chunks):
            found.tool_calls = "structured"  # the model calls when it must
        else:
            found.tool_text = _answer_text(_joined(parts_of(tools.chunks), Text), found)
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


def parts_of(chunks: Sequence[dict[str, Any] | str]) -> list[Part]:
    """A probe's chunks read as a run reads them, up to the first it cannot read."""
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


def delta_fields(chunks: Sequence[dict[str, Any] | str]) -> set[str]:
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
    schema = {str(PROBE_TOOL["name"]): PROBE_TOOL["parameters"]}
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


def finish(
    report: dict[str, Any],
    models: list[str],
    server: str | None,
    warnings: list[str],
    answers: Sequence[Answer],
    *,
    props: Mapping[str, Any] | None = None,
    key_env: str = DEFAULT_KEY_ENV,
) -> dict[str, Any]:
    """The report: usable when the plain streamed answer came; if not, the probe that failed
    (that answer, or ``GET /models`` when nothing got further) and no ``serve`` line."""
    found = _analyse(answers)
    by_name = {answer.name: answer for answer in answers}
    plain, listing = by_name.get("plain"), by_name.get("models")
    usable = plain is not None and plain.ok
    failed = None if usable else next((a for a in (plain, listing) if a and a.error), None)
    if failed is not None and failed.error is not None:
        warnings.insert(0, _failure(failed, key_env))
    flags = _flags(found)
    warnings += _advice(found, answers, template_takes_tools(props))
    # What the default --reasoning-scope auto sends back to this server (bridge.serve.run.props).
    scope, scope_reason = auto_reasoning_scope(props)
    # What the run's attachments become on this server (bridge.serve.run.modalities).
    attachments, attachments_reason = takes_in_words(props)
    command = ["agui-bridge", "serve", "--upstream-url", report["upstream"]]
    command += ["--model", report["model"] or "MODEL"]
    if key_env != DEFAULT_KEY_ENV:
        command += ["--api-key-env", key_env]
    report.update(
        usable=usable,
        failed_probe=None if failed is None else failed.summary(),
        suggested_upstream_url=_suggestion(report["upstream"], failed),
        server=server,
        models=models,
        reasoning=found.reasoning,
        reasoning_tags=list(found.tags) if found.tags else None,
        starts_in_reasoning=found.starts_in_reasoning,
        tool_calls=found.tool_calls,
        usage=found.usage,
        responses_api=found.responses_api,
        reasoning_round_trip=found.round_trip,
        reasoning_format=reasoning_format(found.reasoning, found.reasoned, found.content)
        if props is not None
        else None,
        reasoning_scope=scope,
        reasoning_scope_reason=scope_reason,
        attachments=attachments,
        attachments_reason=attachments_reason,
        serve_command=shlex.join(command + flags) if usable else None,
        warnings=warnings,
        bridge_view=bridge_view(answers, flags),
        probes=[answer.summary() for answer in answers],
    )
    return report


def _suggestion(upstream: str, failed: Answer | None) -> str | None:
    """The base URL probably meant, when the probe that failed got an HTTP 404."""
    if failed is None or not isinstance(failed.error, UpstreamHTTPError):
        return None
    return suggested_upstream_url(upstream) if failed.error.status == 404 else None


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


_TOOL_NAME = re.compile(re.escape(str(PROBE_TOOL["name"])))
#: The tool's name as its definition gives it (``"name": "get_weather", "description": …``).
_DEFINED = re.compile(_TOOL_NAME.pattern + r"""["'\s,:]*description""")


def _names_the_tool(text: str) -> bool:
    """Whether the model's text names the probe's tool other than by saying back what it was
    sent: a small model may echo the chat's turns, the prompt and the tool's definition
    (llama.cpp's GLM template with its tiny test model)."""
    text = text.replace(PROBE_TOOL_PROMPT, "")
    return any(_DEFINED.match(text, name.start()) is None for name in _TOOL_NAME.finditer(text))


def _advice(found: _Findings, answers: Sequence[Answer], takes_tools: bool) -> list[str]:
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
    plain = by_name.get("plain")
    if tools is not None and tools.error is not None:
        if plain is not None and plain.ok:  # else the plain answer's failure says it all
            error = tools.error
            out.append(f"a request with a tool failed: {error.message} [{error.code}]")
    elif tools is not None and found.tool_calls == "none":
        if _names_the_tool(found.tool_text):
            excerpt = found.tool_text.strip()[:120]
            out.append(
                "the model seems to write its tool calls as text in a format the bridge does "
                f"not know; they will show as text: {excerpt!r}"
            )
        elif takes_tools:
            out.append(MODEL_CALLED_NONE)
        else:
            out.append("asked to use a tool, the model called none")
    if found.reasoning == "none" and found.responses_reasoning:
        out.append(
            "Chat Completions shows no reasoning but the Responses API does: serve with "
            "--upstream-api responses"
        )
    if plain is not None and plain.ok and not found.usage:
        out.append("the upstream reports no token usage in its streams: runs end without usage")
    if found.round_trip == "rejected" and found.round_trip_error is not None:
        error = found.round_trip_error
        out.append(
            "the upstream refuses reasoning sent back on an assistant message "
            f"({error.message} [{error.code}]): serve with --reasoning-history drop, or a "
            "--provider whose profile sends none back (groq, mistral, perplexity)"
        )
    elif found.round_trip == "unknown" and found.round_trip_error is not None:
        error = found.round_trip_error
        hint = next((f": serve with --provider {p}" for w, p in _HINTS if w in error.message), "")
        out.append(f"a tool loop sent back failed: {error.message} [{error.code}]{hint}")
    return out


#: What a refused tool loop's words name, and the profile that sends what it wants.
_HINTS = (
    ("thought_signature", "gemini"),
    ("reasoning_content` in the thinking mode must be passed back", "deepseek"),
    ("Missing `reasoning_content` field", "deepseek"),
)


def key_refused(error: BridgeError | None) -> bool:
    return isinstance(error, UpstreamHTTPError) and error.status in (401, 403)


def _failure(answer: Answer, key_env: str) -> str:
    error = answer.error
    assert error is not None
    if key_refused(error):
        return (
            f"the upstream rejected the key: {error.message} [{error.code}]; "
            f"is ${key_env} set to the right key?"
        )
    if isinstance(error, UpstreamConnectionError | UpstreamTimeoutError):
        return f"the upstream is unreachable: {error.message} [{error.code}]"
    what = "GET /models" if answer.name == "models" else "a streamed answer"
    return f"{what} failed: {error.message} [{error.code}]"
