"""What the scripted model "says" for a request: reasoning, answer and tool calls, as tokens.

Pure and deterministic: the same request always gets the same script. How a script is laid out on
the wire (which field carries the reasoning, tags, chunking) is ``dialects.py``'s job.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from bridge.cli.demo.attachments import Received, received, say_received, without_documents
from bridge.cli.demo.state import UPDATE_STATE, Turn, state_turn

_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")
# Argument fragment sizes, cycled: models stream tool-call JSON in pieces of a few characters.
_FRAGMENT_SIZES = (3, 2, 4, 5, 2, 3, 5)
_ALPHANUMERICS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Reasoning markers a bridge might split on; echoed user or tool text must never contain them.
_TAG_LIKE = re.compile(r"<(/?)(think|thinking|reasoning|thought|seed:think)>|\[(/?)THINK\]")

# (words in a tool's name, words in the user's text that call for it)
_TOOL_TOPICS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("weather",), ("weather", "temperature", "forecast")),
    (("background", "color", "colour"), ("background", "color", "colour")),
    (("time",), ("time", "clock")),
    (("mail",), ("email", "e-mail", "mail")),
    (("ask_user",), ("book a table", "ask me")),
)
#: What the scripted model asks with ``ask_user`` (``--ask-user``): a form of three fields.
ASK_USER_ARGUMENTS: dict[str, Any] = {
    "question": "Which day, what time, and for how many?",
    "schema": {
        "type": "object",
        "properties": {
            "date": {"type": "string", "format": "date", "title": "Day"},
            "time": {"type": "string", "enum": ["12:00", "19:00", "20:30"], "title": "Time"},
            "seats": {"type": "integer", "minimum": 1, "maximum": 8, "title": "Seats"},
        },
        "required": ["date", "time", "seats"],
    },
}
_CSS_COLORS = (
    "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white",
    "gray", "grey", "cyan", "magenta", "teal", "navy", "lime", "olive", "maroon", "silver",
    "gold", "indigo", "violet", "coral", "salmon", "beige", "lavender", "turquoise",
    "lightblue", "lightgreen", "darkblue", "darkgreen",
)  # fmt: skip
_COLOR = re.compile(
    r"#(?:[0-9a-f]{6}|[0-9a-f]{3})\b|\b(?:" + "|".join(_CSS_COLORS) + r")\b", re.IGNORECASE
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
#: "Email alice@example.com that the demo works." → the message is "The demo works."
_THAT = re.compile(r"\bthat\s+(\S.*)", re.IGNORECASE | re.DOTALL)
_PLACE_AFTER = re.compile(r"\b(?:in|for|at)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")
#: A user message asking for this gets interleaved thinking: reasoning resumes after text.
_INTERLEAVE = re.compile(r"\binterleave", re.IGNORECASE)
_INTERLEAVED: tuple[tuple[Literal["reasoning", "text"], str], ...] = (
    ("reasoning", "First I look at the question."),
    ("text", "Here is a first thought."),
    ("reasoning", "Now I reconsider."),
    ("text", " And here is the answer."),
)


def tokenize(text: str) -> tuple[str, ...]:
    """Split text into word-like tokens (leading whitespace attached), losslessly."""
    return tuple(_TOKEN.findall(text))


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call the model makes: its whole JSON arguments and the fragments they stream in."""

    id: str
    name: str
    arguments: str
    fragments: tuple[str, ...]


#: Reasoning or text, and its tokens.
Segment = tuple[Literal["reasoning", "text"], tuple[str, ...]]


@dataclass(frozen=True)
class Script:
    """Everything the model generates for one request, as tokens."""

    reasoning: tuple[str, ...]
    answer: tuple[str, ...]
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    #: Interleaved thinking (reasoning resumes after text), in the order written; ``reasoning``
    #: and ``answer`` then hold all of each, joined. Empty for the usual reasoning-then-answer.
    interleaved: tuple[Segment, ...] = ()

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Reasoning and text in the order written (before any tool calls)."""
        return self.interleaved or (("reasoning", self.reasoning), ("text", self.answer))

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


def write_script(request: Mapping[str, Any]) -> Script:
    """The script for a chat-completions request body (assumed to have a ``messages`` list)."""
    messages: list[Mapping[str, Any]] = [m for m in request.get("messages", []) if _is_map(m)]
    tools = [t["function"] for t in request.get("tools") or [] if _is_tool(t)]
    digest = hashlib.sha256(
        json.dumps([messages, tools, request.get("seed")], sort_keys=True, default=str).encode()
    ).digest()

    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    user_text = message_text(messages[last_user]) if last_user >= 0 else ""
    since_user = messages[last_user + 1 :]
    attached = received(messages[last_user].get("content")) if last_user >= 0 else []
    if attached and not since_user:
        return _answer_attachments(user_text, attached)
    if any(t["name"] == UPDATE_STATE for t in tools):
        turn = state_turn(user_text, messages, since_user, message_text)
        if turn is not None:
            script = _state_script(turn, digest, len(since_user))
            others = [t for t in tools if t["name"] != UPDATE_STATE]
            asked = _choose_tools(user_text, others, request) if not since_user else []
            if not script.tool_calls or not asked:
                return script
            # The other tools asked for too, in parallel with the edit (a clock and a to-do).
            calls = _call_tools(user_text, asked, digest)
            return Script(
                calls.reasoning + script.reasoning, (), calls.tool_calls + script.tool_calls
            )
    if any(m.get("role") == "tool" for m in since_user):
        return _answer_tool_results(since_user)
    if messages and messages[-1].get("role") == "user" and tools:
        chosen = _choose_tools(user_text, tools, request)
        if chosen:
            return _call_tools(user_text, chosen, digest)
    if _INTERLEAVE.search(user_text):
        return _interleave()
    return _answer(user_text, digest)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message's ``content``: a string, or the text parts of a list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if _is_map(part) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return ""


def count_prompt_tokens(messages: Sequence[Any]) -> int:
    """A deterministic stand-in for prompt tokens: the number of words in the messages."""
    return sum(len(message_text(m).split()) for m in messages if _is_map(m))


# --- the kinds of turn ---------------------------------------------------------------------


def _call_tools(
    user_text: str, chosen: list[tuple[Mapping[str, Any], int]], digest: bytes
) -> Script:
    calls: list[ScriptedToolCall] = []
    plans: list[str] = []
    for index, (tool, anchor) in enumerate(chosen):
        name = str(tool["name"])
        arguments = (
            ASK_USER_ARGUMENTS
            if name == "ask_user"
            else _fill_arguments(tool.get("parameters"), user_text, anchor)
        )
        encoded = json.dumps(arguments)
        calls.append(ScriptedToolCall(_call_id(digest, index), name, encoded, _fragments(encoded)))
        shown = ", ".join(f"{key} {value}" for key, value in arguments.items()) or "no arguments"
        plans.append(f"{_clean(name)} ({_clean(shown)})")
    reasoning = [f"The user asks: {_quote(user_text)} I will call {' and '.join(plans)}."]
    if len(calls) > 1:
        reasoning.append("The calls are independent, so I will make them in parallel.")
    return Script(tokenize(" ".join(reasoning)), (), tuple(calls))


def _state_script(turn: Turn, digest: bytes, index: int) -> Script:
    reasoning, answer, patch = turn
    calls: tuple[ScriptedToolCall, ...] = ()
    if patch is not None:
        encoded = json.dumps({"patch": patch})
        calls = (
            # Apart from the other tools' call ids, which count from 0.
            ScriptedToolCall(
                _call_id(digest, 100 + index), UPDATE_STATE, encoded, _fragments(encoded)
            ),
        )
    return Script(tokenize(reasoning), tokenize(answer), calls)


def _answer_tool_results(since_user: Sequence[Mapping[str, Any]]) -> Script:
    names: dict[str, str] = {}
    for message in since_user:
        for call in message.get("tool_calls") or []:
            if _is_map(call) and _is_map(call.get("function")):
                names[str(call.get("id"))] = str(call["function"].get("name", "tool"))
    results = [m for m in since_user if m.get("role") == "tool"]
    if len(results) == 1 and "mail" in names.get(str(results[0].get("tool_call_id")), ""):
        return _answer_mail_result(message_text(results[0]))
    reasoning = (
        f"The tools returned {len(results)} result{'s' if len(results) != 1 else ''}. "
        "I will answer with what they said, quoting them."
    )
    lines = [
        f"- **{_clean(names.get(str(m.get('tool_call_id')), 'tool'))}**: {_quote(message_text(m))}"
        for m in results
    ]
    answer = "Here is what the tools returned:\n\n" + "\n".join(lines)
    return Script(tokenize(reasoning), tokenize(answer))


def _answer_mail_result(result: str) -> Script:
    """After a mail tool that waited for a person: sent, or not (declined, or an error)."""
    if result.startswith("The user declined"):
        reasoning, answer = (
            "The user declined the email.",
            f"OK, I did not send it: {_quote(result)}",
        )
    elif result.startswith("Error"):
        reasoning, answer = "The email failed.", f"The email was not sent: {_quote(result)}"
    else:
        reasoning, answer = "The email went out.", f"Done: {_quote(result)}"
    return Script(tokenize(reasoning + " I will say so, quoting the result."), tokenize(answer))


_OPENERS = ("Good question", "Happy to help", "Here is a short answer")


def _answer(user_text: str, digest: bytes) -> Script:
    topic = " ".join(user_text.split()[:6]) or "your message"
    reasoning = (
        f"The user wrote: {_quote(topic)} I am a scripted model, "
        "so I cannot really know the answer. "
        "I will reply briefly, with a bold word and a short list."
    )
    answer = (
        f"{_OPENERS[digest[0] % len(_OPENERS)]}! You asked about **{_clean(topic)}**.\n\n"
        "- This reply is streamed token by token.\n"
        "- It is the same every time you ask.\n\n"
        "Ask about the weather or the time to see tool calls."
    )
    return Script(tokenize(reasoning), tokenize(answer))


def _answer_attachments(user_text: str, attached: Sequence[Received]) -> Script:
    """Says what arrived beside the text: each attachment's name, type and size."""
    count = f"{len(attached)} attachment{'s' if len(attached) != 1 else ''}"
    words = without_documents(user_text)
    said = f"with the words {_quote(words)}" if words.strip() else "and no text"
    reasoning = (
        f"The user sent {count} {said}. I am a scripted model, so I cannot read them; "
        "I will say what arrived."
    )
    answer = (
        f"{_clean(say_received(attached))}\n\n"
        "I am a scripted model: I can tell what arrived, not what it shows or says."
    )
    return Script(tokenize(reasoning), tokenize(answer))


def _interleave() -> Script:
    segments: tuple[Segment, ...] = tuple((kind, tokenize(text)) for kind, text in _INTERLEAVED)
    reasoning = " ".join(text for kind, text in _INTERLEAVED if kind == "reasoning")
    answer = "".join(text for kind, text in _INTERLEAVED if kind == "text")
    return Script(tokenize(reasoning), tokenize(answer), interleaved=segments)


# --- choosing tools and filling their arguments ----------------------------------------------


def _choose_tools(
    user_text: str, tools: list[Mapping[str, Any]], request: Mapping[str, Any]
) -> list[tuple[Mapping[str, Any], int]]:
    """Up to two tools the user's text asks for, each with where in the text it was asked for."""
    choice = request.get("tool_choice")
    if choice == "none":
        return []
    if _is_map(choice) and _is_map(choice.get("function")):
        named = [t for t in tools if t["name"] == choice["function"].get("name")]
        return [(named[0], 0)] if named else []
    chosen = [(tool, at) for tool in tools if (at := _asked_at(user_text, tool["name"])) >= 0]
    if not chosen and choice == "required":
        chosen = [(tools[0], 0)]
    limit = 1 if request.get("parallel_tool_calls") is False else 2
    return chosen[:limit]


def _asked_at(user_text: str, tool_name: str) -> int:
    """Where the user's text asks for this tool, or -1."""
    name, text = tool_name.lower(), user_text.lower()
    for name_words, keywords in _TOOL_TOPICS:
        if any(word in name for word in name_words):
            hits = [m.start() for k in keywords if (m := re.search(rf"\b{k}", text))]
            if hits:
                return min(hits)
    return text.find(name) if name else -1


def _fill_arguments(parameters: Any, user_text: str, anchor: int) -> dict[str, Any]:
    properties = parameters.get("properties") if _is_map(parameters) else None
    if not _is_map(properties) or not properties:
        return {}
    required = [r for r in parameters.get("required") or [] if r in properties]
    keys = required or [next(iter(properties))]
    return {key: _value_for(str(key), properties[key], user_text, anchor) for key in keys}


def _value_for(name: str, schema: Any, user_text: str, anchor: int) -> Any:
    schema = schema if _is_map(schema) else {}
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return _pick_enum(enum, user_text, anchor)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return _string_for(name.lower(), user_text, anchor)


def _string_for(name: str, user_text: str, anchor: int) -> str:
    if any(word in name for word in ("color", "colour", "background", "hex")):
        return _find_color(user_text, anchor) or "lightblue"
    if any(word in name for word in ("zone", "tz")) or name == "time":
        return "UTC"
    if any(word in name for word in ("city", "location", "place", "town", "country", "where")):
        return _find_place(user_text, anchor) or "Paris"
    if name in ("to", "recipient", "recipients", "email", "address"):
        found = _EMAIL.search(user_text)
        return found.group(0) if found else "alice@example.com"
    if name in ("subject", "title"):
        return _mail_body(user_text).rstrip(".!") or "Hello"
    if name in ("body", "message", "text", "content"):
        return _mail_body(user_text)
    return _clean(" ".join(user_text.split())[:40]) or "example"


def _mail_body(user_text: str) -> str:
    """What to write: the words after "that" ("… that the demo works." → "The demo works.")."""
    match = _THAT.search(user_text)
    said = " ".join(match.group(1).split())[:80] if match else "Hello from the agui-bridge demo."
    said = _clean(said[:1].upper() + said[1:])
    return said if said.endswith((".", "!", "?")) else said + "."


def _find_place(user_text: str, anchor: int) -> str | None:
    match = _PLACE_AFTER.search(user_text, anchor) or _PLACE_AFTER.search(user_text)
    return match.group(1) if match else None


def _find_color(user_text: str, anchor: int) -> str | None:
    match = _COLOR.search(user_text, anchor) or _COLOR.search(user_text)
    return match.group(0).lower() if match else None


def _pick_enum(enum: list[Any], user_text: str, anchor: int) -> Any:
    """The enum value the user's text names first (after ``anchor`` if possible), else the first."""
    text = user_text.lower()
    for start in (anchor, 0):
        found = [
            (at, position)
            for position, value in enumerate(enum)
            for name in (str(value), str(value).rsplit("/", 1)[-1])  # "Asia/Tokyo" or "Tokyo"
            if name and (at := text.find(name.lower(), start)) >= 0
        ]
        if found:
            return enum[min(found)[1]]
    return enum[0]


# --- small helpers ----------------------------------------------------------------------------


def _fragments(text: str) -> tuple[str, ...]:
    pieces: list[str] = []
    position = 0
    while position < len(text):
        size = _FRAGMENT_SIZES[len(pieces) % len(_FRAGMENT_SIZES)]
        pieces.append(text[position : position + size])
        position += size
    return tuple(pieces)


def _call_id(digest: bytes, index: int) -> str:
    """32 alphanumerics, as llama.cpp's tool-call ids, derived from the request."""
    seed = hashlib.sha256(digest + bytes([index])).digest()
    return "".join(_ALPHANUMERICS[b % len(_ALPHANUMERICS)] for b in seed)


def _clean(text: str) -> str:
    """Text echoed into the model's output, with reasoning markers defused."""
    return _TAG_LIKE.sub(_defuse, text)


def _defuse(match: re.Match[str]) -> str:
    return match.group(0).translate(str.maketrans("<>[]", "()()"))


def _quote(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f"“{_clean(flat)}”"


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping)


def _is_tool(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return (
        _is_map(value)
        and _is_map(value.get("function"))
        and isinstance(value["function"].get("name"), str)
    )
