"""Chat Completions chunks (streamed deltas, or a whole non-streamed response) → parts.

Reads every reasoning dialect of the table in DESIGN.md without configuration:
``delta.reasoning_content`` (llama.cpp, DeepSeek, SGLang, Kimi), ``delta.reasoning`` (vLLM,
Ollama, Groq, LM Studio, OpenRouter), ``delta.reasoning_details[]`` (OpenRouter), and a
``content`` list with ``thinking`` items (Mistral Magistral). A non-streamed response's
``message`` is read like a delta, so both paths share this code.
"""

from __future__ import annotations

import json
from typing import Any

from bridge.core.errors import UpstreamProtocolError, UpstreamStreamError
from bridge.core.parts import (
    EncryptedReasoning,
    Failed,
    Finish,
    Part,
    Reasoning,
    Text,
    ToolCallDelta,
    Usage,
)
from bridge.core.usage import token_usage_from_openai

_REASONING_KEYS = frozenset({"reasoning_content", "reasoning", "reasoning_details"})
#: A streamed tool call's own keys; any other is a provider's (Gemini 3's ``extra_content``,
#: whose thought signature must come back on the same call: ``ToolCallDelta.fields``).
_CALL_KEYS = frozenset({"index", "id", "type", "function"})


def decode_chat_chunk(chunk: dict[str, Any]) -> list[Part]:
    """Parts of one chunk, in the order a reader meets them: reasoning, text, tool calls, finish.

    Raises ``UpstreamStreamError`` for an ``{"error": …}`` chunk and ``UpstreamProtocolError``
    for a chunk whose shape is not a chat completion's.
    """
    fast = _one_text_field(chunk)
    if fast is not None:
        return fast
    error = chunk.get("error")
    if error is not None:
        raise UpstreamStreamError.from_payload(error)
    parts: list[Part] = []
    choices = chunk.get("choices")
    choice = None
    if choices:
        if not isinstance(choices, list):
            raise UpstreamProtocolError("upstream chunk has a 'choices' that is not a list")
        choice = _first_choice(choices)
        if choice is not None:
            _decode_choice(choice, parts)
    usage = chunk.get("usage")
    if not usage and choice is not None:
        usage = choice.get("usage")  # Kimi streams its usage in the choice
    if usage:
        if not isinstance(usage, dict):
            raise UpstreamProtocolError("upstream chunk has a 'usage' that is not an object")
        model = chunk.get("model")
        token_usage = token_usage_from_openai(usage, model if isinstance(model, str) else None)
        if token_usage is not None:
            parts.append(Usage(token_usage))
    return parts


_ONE_FIELD = {"content": Text, "reasoning_content": Reasoning, "reasoning": Reasoning}


def one_text_field(chunk: dict[str, Any]) -> tuple[str, str] | None:
    """Most chunks of every stream: one choice whose delta is one text field (``content``,
    ``reasoning_content`` or ``reasoning``), nothing else. That field's name and text; ``None``
    for any other chunk."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or "error" in chunk or chunk.get("usage"):
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") or choice.get("index", 0) != 0:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    ((key, value),) = delta.items()
    if key not in _ONE_FIELD or type(value) is not str:
        return None
    return key, value


def _one_text_field(chunk: dict[str, Any]) -> list[Part] | None:
    """The parts of a chunk ``one_text_field`` reads, exactly what the full reading below
    gives; ``None`` for any other chunk."""
    field = one_text_field(chunk)
    if field is None:
        return None
    key, value = field
    return [_ONE_FIELD[key](value)] if value else []


def _first_choice(choices: list[Any]) -> dict[str, Any] | None:
    # The bridge never asks for n > 1; only choice 0 is the answer.
    for choice in choices:
        if not isinstance(choice, dict):
            raise UpstreamProtocolError("upstream chunk has a choice that is not an object")
        if choice.get("index", 0) == 0:
            return choice
    return None


def _decode_choice(choice: dict[str, Any], parts: list[Part]) -> None:
    delta = choice.get("delta")
    if delta is None:
        delta = choice.get("message")  # a non-streamed response: the whole message at once
    if delta is not None:
        if not isinstance(delta, dict):
            raise UpstreamProtocolError("upstream chunk has a 'delta' that is not an object")
        _decode_reasoning(delta, parts)
        _decode_content(delta.get("content"), parts)
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            _decode_tool_calls(tool_calls, parts)
    finish_reason = choice.get("finish_reason")
    if finish_reason == "error":
        # OpenRouter: the provider failed mid-answer, said with no `error` object; the
        # provider's own reason, when given, in `native_finish_reason`.
        native = choice.get("native_finish_reason")
        why = f" ({str(native)[:200]})" if native and native != "error" else ""
        parts.append(Failed(f"the upstream ended the answer with an error{why}"))
    elif finish_reason == "content_filter":
        parts.append(Finish("content_filter", _filtered(choice.get("content_filter_results"))))
    elif finish_reason:
        parts.append(Finish(str(finish_reason)))


def _filtered(results: Any) -> str | None:
    """The categories Azure OpenAI's content filter stopped an answer for
    (``content_filter_results``: ``{"hate": {"filtered": true, "severity": "medium"}, …}``),
    as ``hate (medium), jailbreak (detected)``; ``None`` when it names none."""
    if not isinstance(results, dict):
        return None
    named = [
        f"{str(name)[:40]} ({str(verdict.get('severity') or 'detected')[:20]})"
        for name, verdict in list(results.items())[:20]
        if isinstance(verdict, dict) and verdict.get("filtered") is True
    ]
    return ", ".join(named) or None


def _decode_reasoning(delta: dict[str, Any], parts: list[Part]) -> None:
    if not _REASONING_KEYS.intersection(delta):
        return
    detail_text = ""
    secrets: list[str] = []
    details = delta.get("reasoning_details")
    if details:
        if not isinstance(details, list):
            raise UpstreamProtocolError("upstream chunk has 'reasoning_details' that is not a list")
        detail_text = _read_details(details, secrets)
    # OpenRouter sends the same text as `reasoning` and in `reasoning_details`; a LiteLLM proxy
    # can add `reasoning_content` too. One chunk's reasoning is emitted once: the fields agree,
    # and where they do not, the longest is kept so that nothing is lost.
    text = ""
    for value in (delta.get("reasoning_content"), delta.get("reasoning"), detail_text):
        if value and isinstance(value, str) and len(value) > len(text):
            text = value
        elif value and not isinstance(value, str):
            raise UpstreamProtocolError("upstream chunk has a reasoning field that is not a string")
    if text:
        parts.append(Reasoning(text))
    parts.extend(EncryptedReasoning(secret) for secret in secrets)


def _read_details(details: list[Any], secrets: list[str]) -> str:
    """The reasoning text of OpenRouter's ``reasoning_details``; signed and encrypted details
    are added to ``secrets`` (as the JSON of the detail without its text)."""
    texts: list[str] = []
    for detail in details:
        if not isinstance(detail, dict):
            raise UpstreamProtocolError(
                "upstream chunk has a reasoning detail that is not an object"
            )
        kind = detail.get("type")
        if kind == "reasoning.text":
            texts.append(detail.get("text") or "")
        elif kind == "reasoning.summary":
            texts.append(detail.get("summary") or "")
        if detail.get("signature") or (kind == "reasoning.encrypted" and detail.get("data")):
            # The detail itself, less its text (that is the reasoning message's content): it
            # goes back on the assistant message next turn exactly as the provider sent it.
            kept = {k: v for k, v in detail.items() if k not in ("text", "summary")}
            secrets.append(json.dumps(kept, ensure_ascii=False, separators=(",", ":")))
    return "".join(texts)


def _decode_content(content: Any, parts: list[Part]) -> None:
    if not content:
        return
    if isinstance(content, str):
        parts.append(Text(content))
    elif isinstance(content, list):
        # Mistral's Magistral API: [{"type": "thinking", "thinking": [{"type": "text", ...}]}, ...]
        for item in content:
            if not isinstance(item, dict):
                raise UpstreamProtocolError("upstream content list holds a non-object item")
            if item.get("type") == "thinking":
                text = "".join(
                    sub.get("text") or ""
                    for sub in item.get("thinking") or []
                    if isinstance(sub, dict)
                )
                if text:
                    parts.append(Reasoning(text))
            elif item.get("type") == "text" and item.get("text"):
                parts.append(Text(str(item["text"])))
    else:
        raise UpstreamProtocolError(
            "upstream chunk has a 'content' that is neither text nor a list"
        )


def _decode_tool_calls(tool_calls: Any, parts: list[Part]) -> None:
    if not isinstance(tool_calls, list):
        raise UpstreamProtocolError("upstream chunk has 'tool_calls' that is not a list")
    for position, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            raise UpstreamProtocolError("upstream chunk has a tool call that is not an object")
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = position  # non-streamed messages (and some servers) leave the index out
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise UpstreamProtocolError("upstream tool call has a 'function' that is not an object")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            # Some servers send an object; the only way to pass it on is as JSON text.
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("id")
        name = function.get("name")
        fields = None
        if not _CALL_KEYS.issuperset(call):  # a provider's own (Gemini's): no set made
            fields = {
                str(key): json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                for key, value in call.items()
                if key not in _CALL_KEYS and value is not None  # a null says nothing
            }
        parts.append(
            ToolCallDelta(
                index=index,
                id=str(call_id) if call_id else None,
                name=str(name) if name else None,
                arguments=arguments,
                fields=fields,
            )
        )
