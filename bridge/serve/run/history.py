"""AG-UI conversation → OpenAI Chat Completions ``messages`` and ``tools``. Pure, no I/O.

Reasoning messages (role ``reasoning``, which ``@ag-ui/client`` sends back every turn, placed
before the assistant message they belong to) are attached to the next assistant message and sent
back under a policy: as a field, as ``<think>`` text, or not at all. By default only the turn
since the last user message carries them: interleaved-thinking models need the reasoning of the
tool loop in progress, while earlier turns' reasoning only costs context; DeepSeek V4 and Kimi
K2.5+ want it on every assistant message that called tools, even empty (``tool_turns``, which
their provider profiles set: ``bridge.serve.run.profiles``).
Assistant messages with only reasoning between them are one upstream turn (the emitter starts a
new message where reasoning resumed, for the client's display): they go back joined, as the model
produced them.

A tool result's media parts (an MCP tool's image) go where the upstream's API takes them: a
Chat Completions tool message carries text only, so each is named in its place in the text and
sent in a user message after the turn's results (as pydantic-ai and others do); the Responses
API's ``function_call_output`` takes images and files itself (``tool_media``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, get_args

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    ContentPart,
    Context,
    DeveloperMessage,
    Message,
    ReasoningMessage,
    SystemMessage,
    TextPart,
    Tool,
    ToolMessage,
    UserMessage,
)

from bridge.serve.run.parts import MediaPart, UnmappablePartError, chat_part, file_name, mime_type
from bridge.serve.tools.results import tool_result_text

ReasoningHistory = Literal["field", "tags", "drop"]
"""How earlier reasoning goes back upstream: in ``reasoning_field`` on the assistant message,
as ``<think>…</think>`` before its content, or not at all. (``auto`` is resolved by the caller.)"""

ReasoningScope = Literal["current-turn", "all", "last"]
"""Which assistant messages get their reasoning back: those after the last user message (the
tool loop in progress), every one, or only the last assistant message of the conversation."""

PartMapping = Callable[[ContentPart], dict[str, Any]]
"""One AG-UI content part → the upstream API's (``bridge.serve.run.parts``)."""

_SYSTEM_ROLES = ("system", "developer")


def to_openai_messages(
    messages: Sequence[Message],
    *,
    reasoning: ReasoningHistory = "field",
    scope: ReasoningScope = "current-turn",
    reasoning_field: str = "reasoning_content",
    context: Sequence[Context] = (),
    state: Any = None,
    state_note: str | None = None,
    encrypted_reasoning: bool = False,
    part_of: PartMapping = chat_part,
    tool_media: Collection[str] = (),
    tool_turns: bool = False,
    call_fields: bool = True,
) -> list[dict[str, Any]]:
    """Convert an AG-UI conversation into Chat Completions ``messages``.

    ``context`` and ``state`` (when not ``None``), or ``state_note`` (the state as the model
    may edit it, written already), become system messages placed after the leading
    system/developer messages. Activity messages are UI-only and skipped.
    A user message's content parts become what ``part_of`` makes of each (Chat Completions
    parts; the Responses request passes ``responses_part``), and so do a tool message's
    (``tool_media``: the part types a tool message keeps as parts; the others follow the turn's
    tool results in a user message). Raises ``UnmappablePartError`` (a ``ValueError``) for a
    part the API has no place for, naming where it is, and ``ValueError`` for an unknown
    ``reasoning`` or ``scope``. ``tool_turns``: every assistant message with tool calls gets
    its reasoning back too, whatever the scope, ``""`` when it had none (DeepSeek, Kimi).
    ``call_fields``: what a provider put on a call goes back on it (``False``: a provider whose
    schema refuses any other property gets the call's own keys only).
    """
    if reasoning not in get_args(ReasoningHistory):
        raise ValueError(
            f"reasoning must be one of {get_args(ReasoningHistory)}, not {reasoning!r}"
        )
    if scope not in get_args(ReasoningScope):
        raise ValueError(f"scope must be one of {get_args(ReasoningScope)}, not {scope!r}")

    carriers = _reasoning_carriers(messages, scope) if reasoning != "drop" else set()
    if tool_turns and reasoning == "field":
        carriers |= {
            i for i, m in enumerate(messages) if isinstance(m, AssistantMessage) and m.tool_calls
        }
    summaries = _reasoning_summaries(messages) if encrypted_reasoning else {}
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    details: list[dict[str, Any]] = []  # OpenRouter's, when the reasoning was signed/encrypted
    signed = False
    joinable = False  # the last message out is an assistant one, with only reasoning since
    held: list[ContentPart] = []  # the turn's tool results' media, sent after the results
    for index, message in enumerate(messages):
        if held and not isinstance(message, (ToolMessage, ActivityMessage)):
            out.append(_tool_attachments(held, part_of, index))
            held = []
        if isinstance(message, ReasoningMessage):
            if message.content:
                pending.append(message.content)
            detail = _provider_detail(message.encrypted_value)
            signed = signed or detail is not None
            details += _details_of(message.content, detail)
            if encrypted_reasoning and message.encrypted_value:
                # Not a Chat Completions message: the Responses request turns it into a
                # reasoning item (Chat Completions has no place for encrypted reasoning).
                item_id = message.id.split("#")[0]
                out.append(
                    {
                        "role": "reasoning",
                        "id": item_id,
                        "summary": summaries.get(item_id, []),
                        "encrypted_content": message.encrypted_value,
                    }
                )
        elif isinstance(message, AssistantMessage):
            text = "\n\n".join(pending) if index in carriers else ""
            assistant = _assistant(message, text, reasoning, reasoning_field, call_fields)
            if tool_turns and index in carriers and message.tool_calls and reasoning == "field":
                assistant.setdefault(reasoning_field, "")  # required, even empty
            if signed and index in carriers and reasoning == "field":
                assistant["reasoning_details"] = details
            pending, details, signed = [], [], False
            if joinable and not encrypted_reasoning:
                _join_assistant(out[-1], assistant, reasoning_field)
            else:
                out.append(assistant)
            joinable = True
            continue
        elif isinstance(message, UserMessage):
            # Reasoning with no assistant message after it before the next user message
            # (a turn cut short) belongs to nothing.
            pending, details, signed = [], [], False
            content = _user_content(message.content, part_of, index)
            out.append({"role": "user", "content": content})
        elif isinstance(message, ToolMessage):
            out.append(_tool(message, tool_media, held, part_of, index))
        elif isinstance(message, (SystemMessage, DeveloperMessage)):
            out.append({"role": message.role, "content": message.content})
        elif isinstance(message, ActivityMessage):
            continue  # UI-only progress, never conversation content
        else:
            raise ValueError(f"unsupported message role {getattr(message, 'role', None)!r}")
        joinable = joinable and isinstance(message, ReasoningMessage)
    if held:
        out.append(_tool_attachments(held, part_of, len(messages)))

    extra = _context_messages(context, state, state_note)
    if extra:
        at = 0
        while at < len(out) and out[at]["role"] in _SYSTEM_ROLES:
            at += 1
        out[at:at] = extra
    return out


def to_openai_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """Convert AG-UI tools into Chat Completions ``tools`` (function tools)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                # Some servers reject a function without a schema; no schema means no arguments.
                "parameters": tool.parameters
                if tool.parameters is not None
                else {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def _provider_detail(value: str | None) -> dict[str, Any] | None:
    """The signed or encrypted OpenRouter detail ``decode.py`` kept as the encrypted value."""
    detail = _json_object(value)
    kind = detail.get("type") if detail is not None else None
    return detail if isinstance(kind, str) and kind.startswith("reasoning.") else None


def _json_object(value: str | None) -> dict[str, Any] | None:
    """An encrypted value the bridge made (a JSON object), read; ``None`` for any other: the
    client's, nested past the parser's depth, or not JSON."""
    if not value or not value.startswith("{"):
        return None
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _details_of(text: str, detail: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One reasoning message as OpenRouter ``reasoning_details``, its text put back in place."""
    kind = detail.get("type") if detail else None
    if detail is not None and kind == "reasoning.text":
        return [{"type": kind, "text": text, **{k: v for k, v in detail.items() if k != "type"}}]
    if detail is not None and kind == "reasoning.summary":
        rest = {k: v for k, v in detail.items() if k != "type"}
        return [{"type": kind, "summary": text, **rest}]
    texts = [{"type": "reasoning.text", "text": text}] if text else []
    return texts + ([detail] if detail is not None else [])


def _reasoning_summaries(messages: Sequence[Message]) -> dict[str, list[str]]:
    """The texts of each upstream reasoning item, by item id: the bridge names the reasoning
    message of an item's first summary part by the item's id and the next ones ``id#n``."""
    summaries: dict[str, list[str]] = {}
    for message in messages:
        if isinstance(message, ReasoningMessage) and message.content:
            summaries.setdefault(message.id.split("#")[0], []).append(message.content)
    return summaries


def _reasoning_carriers(messages: Sequence[Message], scope: ReasoningScope) -> set[int]:
    """Indexes of the assistant messages whose reasoning goes back under ``scope``."""
    assistants = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    if scope == "all":
        return set(assistants)
    if scope == "last":
        return set(assistants[-1:])
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    return {i for i in assistants if i > last_user}


def _assistant(
    message: AssistantMessage,
    reasoning_text: str,
    policy: ReasoningHistory,
    field: str,
    call_fields: bool = True,
) -> dict[str, Any]:
    content = message.content or ""
    if reasoning_text and policy == "tags":
        content = f"<think>\n{reasoning_text}\n</think>\n\n{content}"
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning_text and policy == "field":
        out[field] = reasoning_text
    if message.tool_calls:
        if not content:
            out["content"] = None
        # Arguments go back exactly as received: re-serialising them would change the
        # prompt's bytes and throw away the server's prefix cache.
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
                **(_provider_fields(call.encrypted_value) if call_fields else {}),
            }
            for call in message.tool_calls
        ]
    return out


def _provider_fields(value: str | None) -> dict[str, Any]:
    """What the provider put on a tool call (``decode.py``: Gemini's ``extra_content`` with its
    thought signature), kept by the client as the call's encrypted value: back on the call as
    it came. A value the bridge did not make (not a JSON object) goes back as nothing, and never
    in place of the call's own keys."""
    fields = _json_object(value) or {}
    return {k: v for k, v in fields.items() if k not in ("id", "type", "function")}


def _join_assistant(into: dict[str, Any], later: dict[str, Any], field: str) -> None:
    """Append a later stretch of the same turn to its assistant message: text as it came,
    reasoning after a blank line, the calls after the calls."""
    content = (into.get("content") or "") + (later.get("content") or "")
    into["content"] = content or None if "tool_calls" in into or "tool_calls" in later else content
    if later.get(field):
        into[field] = "\n\n".join(filter(None, (into.get(field), later[field])))
    for key in ("tool_calls", "reasoning_details"):
        if later.get(key):
            into[key] = [*into.get(key, []), *later[key]]


def _user_content(
    content: str | Sequence[ContentPart], part_of: PartMapping, index: int
) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    out = []
    for number, part in enumerate(content):
        try:
            out.append(part_of(part))
        except UnmappablePartError as exc:
            raise UnmappablePartError(f"messages.{index}.content.{number}: {exc}") from None
    return out


def _tool(
    message: ToolMessage,
    keeps: Collection[str],
    held: list[ContentPart],
    part_of: PartMapping,
    index: int,
) -> dict[str, Any]:
    """A tool message (``messages[index]``): text, or parts where it keeps media (``keeps``:
    their types), each as ``part_of`` makes it."""
    parts = message.content
    content: str | list[dict[str, Any]]
    if isinstance(parts, str) or all(isinstance(part, TextPart) for part in parts):
        content = tool_result_text(_tool_text(parts))
    else:
        kept = _kept_parts(message.tool_call_id, parts, keeps, held)
        texts = [part.text for part in kept if isinstance(part, TextPart)]
        content = (
            "\n".join(texts) if len(texts) == len(kept) else _user_content(kept, part_of, index)
        )
    error = message.error
    if error is not None and isinstance(content, list):
        content = [{"type": "text", "text": f"Error: {error}"}, *content]
    elif error is not None:
        content = f"Error: {error}\n\n{content}" if content else f"Error: {error}"
    return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}


def _kept_parts(
    call_id: str, parts: Sequence[ContentPart], keeps: Collection[str], held: list[ContentPart]
) -> list[ContentPart]:
    """A tool result's parts as its tool message keeps them: a media part of a type it does
    not keep is named in its place and added to ``held``, for the user message after the
    turn's results, with a label that says where it came from."""
    kept: list[ContentPart] = []
    for part in parts:
        if isinstance(part, TextPart) or part.type in keeps:
            kept.append(part)
            continue
        number = sum(not isinstance(attached, TextPart) for attached in held) + 1
        about = _about(part)
        kept.append(TextPart(text=f"[attachment {number}: {about}, sent after the tool results]"))
        held += [TextPart(text=f"[attachment {number}, from the call {call_id}: {about}]"), part]
    return kept


def _tool_attachments(
    held: Sequence[ContentPart], part_of: PartMapping, index: int
) -> dict[str, Any]:
    """The user message that brings the turn's tool results' media to the model, before
    ``messages[index]``."""
    return {"role": "user", "content": _user_content(held, part_of, index)}


def _about(part: MediaPart) -> str:
    """A media part as its label names it: its file name, if any, and its MIME type (or kind)."""
    kind = mime_type(part) or part.type
    name = file_name(part)
    return f"{name}, {kind}" if name else kind


def _tool_text(content: str | Sequence[ContentPart]) -> str:
    # Flattened to one string: every server and chat template accepts string tool content,
    # while content-part arrays in tool messages are not universally supported.
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if isinstance(part, TextPart))


def _part_type(part: object) -> object:
    return getattr(part, "type", type(part).__name__)


def _context_messages(
    context: Sequence[Context], state: Any, state_note: str | None = None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if context:
        lines = "\n".join(f"- {item.description}: {item.value}" for item in context)
        out.append({"role": "system", "content": f"Context:\n{lines}"})
    if state is not None:
        dumped = json.dumps(state, ensure_ascii=False, sort_keys=True)
        out.append({"role": "system", "content": f"Current state (JSON):\n{dumped}"})
    if state_note is not None:
        out.append({"role": "system", "content": state_note})
    return out
