"""Responses API events (streamed), or a whole ``response`` object, → parts.

The same parts as Chat Completions, so the same filters and emitter: reasoning summaries and raw
reasoning text stream as reasoning (each summary part its own reasoning message, named by the
upstream's item id so that it can go back next turn), output text as text, function calls as
tool calls (started when their item is added, arguments live, ended at ``.done``), a reasoning
item's ``encrypted_content`` as an encrypted value on its reasoning message, usage and the end
of the response as ``Usage`` and ``Finish``. ``.done`` events fill in only what no delta carried
(servers that skip deltas, and non-streamed answers, which are read as a list of done items).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridge.core.errors import UpstreamProtocolError, UpstreamStreamError
from bridge.core.parts import (
    EncryptedReasoning,
    Finish,
    Part,
    Reasoning,
    Text,
    ToolCallDelta,
    ToolCallDone,
    Usage,
)
from bridge.core.usage import token_usage_from_openai

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class ResponsesDecoder:
    """One response's events → parts (stateful: it remembers what each item streamed)."""

    def __init__(self) -> None:
        self._item_ids: dict[int, str] = {}
        self._streamed: set[tuple[int, str]] = set()  # (output_index, "reasoning"|"text"|"args")
        self._calls: set[int] = set()  # function calls started
        self._ended: set[int] = set()  # function calls ended

    def decode(self, event: dict[str, Any]) -> list[Part]:
        kind = event.get("type")
        if kind is None and event.get("object") == "response":
            return self._whole(event)
        if kind == "error":
            raise _error(event)
        if not isinstance(kind, str):
            raise UpstreamProtocolError("upstream Responses event has no 'type'")
        index = event.get("output_index", 0)
        if not isinstance(index, int):
            raise UpstreamProtocolError("upstream Responses event has a bad 'output_index'")
        if kind.endswith(".delta"):
            return self._delta(kind, index, event)
        if kind == "response.output_item.added":
            return self._item_added(index, _object(event, "item"))
        if kind == "response.function_call_arguments.done":
            return self._call_done(index, event.get("arguments"))
        if kind == "response.output_item.done":
            return self._item_done(index, _object(event, "item"))
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            return self._end(_object(event, "response"))
        return []  # created, in_progress, content_part.*, *.done of text: nothing new

    def _delta(self, kind: str, index: int, event: dict[str, Any]) -> list[Part]:
        delta = event.get("delta")
        if not isinstance(delta, str):
            raise UpstreamProtocolError(f"upstream {kind} event has no text 'delta'")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self._streamed.add((index, "text"))
            return [Text(delta)]
        if kind == "response.function_call_arguments.delta":
            self._streamed.add((index, "args"))
            return [ToolCallDelta(index, None, None, delta)]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self._streamed.add((index, "reasoning"))
            item_id = event.get("item_id") or self._item_ids.get(index) or f"rs_{index}"
            part = event.get("summary_index", event.get("content_index", 0))
            return [Reasoning(delta, _reasoning_id(str(item_id), part))]
        return []  # audio, code interpreter, …: nothing a chat frontend shows

    def _item_added(self, index: int, item: Mapping[str, Any]) -> list[Part]:
        if isinstance(item.get("id"), str):
            self._item_ids[index] = item["id"]
        if item.get("type") != "function_call":
            return []  # reasoning and messages open lazily, on their first delta
        self._calls.add(index)
        arguments = item.get("arguments") or ""
        if arguments:
            self._streamed.add((index, "args"))
        return [ToolCallDelta(index, _call_id(item), _name(item), str(arguments))]

    def _call_done(self, index: int, arguments: Any) -> list[Part]:
        parts: list[Part] = []
        if (index, "args") not in self._streamed and isinstance(arguments, str) and arguments:
            self._streamed.add((index, "args"))
            parts.append(ToolCallDelta(index, None, None, arguments))
        if index not in self._ended:
            self._ended.add(index)
            parts.append(ToolCallDone(index))
        return parts

    def _item_done(self, index: int, item: Mapping[str, Any]) -> list[Part]:
        kind = item.get("type")
        parts: list[Part] = []
        if kind == "function_call":
            if index not in self._calls:
                parts += self._item_added(index, item)
            return parts + self._call_done(index, item.get("arguments"))
        if kind == "message" and (index, "text") not in self._streamed:
            for content in _list(item.get("content")):
                text = content.get("text") if content.get("type") == "output_text" else None
                text = content.get("refusal") if content.get("type") == "refusal" else text
                if isinstance(text, str) and text:
                    parts.append(Text(text))
        elif kind == "reasoning":
            item_id = str(item.get("id") or self._item_ids.get(index) or f"rs_{index}")
            if (index, "reasoning") not in self._streamed:
                pieces = _list(item.get("summary")) or _list(item.get("content"))
                for number, piece in enumerate(pieces):
                    text = piece.get("text")
                    if isinstance(text, str) and text:
                        parts.append(Reasoning(text, _reasoning_id(item_id, number)))
            secret = item.get("encrypted_content")
            if isinstance(secret, str) and secret:
                parts.append(EncryptedReasoning(secret, item_id))
        return parts

    def _end(self, response: Mapping[str, Any]) -> list[Part]:
        status = response.get("status")
        if status == "failed":
            raise _error(response.get("error") or {"message": "the upstream response failed"})
        parts: list[Part] = []
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            model = response.get("model")
            token_usage = token_usage_from_openai(
                _chat_usage(usage), model if isinstance(model, str) else None
            )
            if token_usage is not None:
                parts.append(Usage(token_usage))
        if status == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, Mapping) else None
            parts.append(Finish(_INCOMPLETE.get(str(reason), "length")))
        else:
            parts.append(Finish("tool_calls" if self._calls else "stop"))
        return parts

    def _whole(self, response: dict[str, Any]) -> list[Part]:
        if response.get("status") == "failed":
            return self._end(response)
        parts: list[Part] = []
        for index, item in enumerate(_list(response.get("output"))):
            parts += self._item_done(index, item)
        return parts + self._end(response)


def _reasoning_id(item_id: str, part: Any) -> str:
    """The reasoning message for one part of a reasoning item: the item's id for the first."""
    return item_id if not part else f"{item_id}#{part}"


def _chat_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """Responses usage in Chat Completions' words (``token_usage_from_openai`` reads those)."""
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    return {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "total_tokens": usage.get("total_tokens"),
        "prompt_tokens_details": input_details if isinstance(input_details, Mapping) else {},
        "completion_tokens_details": output_details if isinstance(output_details, Mapping) else {},
    }


def _error(payload: Any) -> UpstreamStreamError:
    error = UpstreamStreamError.from_payload(payload)
    if error.upstream_code and error.upstream_code not in str(error):
        error = UpstreamStreamError(
            f"{error} ({error.upstream_code})",
            upstream_code=error.upstream_code,
            upstream_type=error.upstream_type,
        )
    return error


def _object(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = event.get(key)
    if not isinstance(value, Mapping):
        raise UpstreamProtocolError(f"upstream {event.get('type')} event has no {key!r} object")
    return value


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _call_id(item: Mapping[str, Any]) -> str | None:
    value = item.get("call_id") or item.get("id")
    return str(value) if value else None


def _name(item: Mapping[str, Any]) -> str | None:
    name = item.get("name")
    return name if isinstance(name, str) and name else None
