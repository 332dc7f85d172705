"""Tool calls laid out as text in ``content``, the way each model family writes them when the
server has no parser for them. Pure: calls in, content tokens out."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from bridge.cli.demo.script import ScriptedToolCall
from bridge.core.text_tools.sections import DEEPSEEK_V3

Layout = Callable[[Sequence[ScriptedToolCall]], list[str]]


def hermes(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``, one after another."""
    tokens: list[str] = []
    for number, call in enumerate(calls):
        head = f'{{"name": "{call.name}", "arguments": '
        tokens += ["\n" if number else "", "<tool_call>", "\n", head, *call.fragments, "}", "\n"]
        tokens.append("</tool_call>")
    return [token for token in tokens if token]


def mistral(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """All calls in one ``[TOOL_CALLS][…]`` array."""
    if not calls:
        return []
    tokens = ["[TOOL_CALLS]", "["]
    for number, call in enumerate(calls):
        head = f'{", " if number else ""}{{"name": "{call.name}", "arguments": '
        tokens += [head, *call.fragments, "}"]
    return [*tokens, "]"]


def llama(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """Bare JSON calls joined by ``; ``, as Llama 3.x writes them with JSON tool calling."""
    tokens: list[str] = []
    for number, call in enumerate(calls):
        head = f'{"; " if number else ""}{{"name": "{call.name}", "parameters": '
        tokens += [head, *call.fragments, "}"]
    return tokens


def pythonic(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """``[get_weather(city="Paris"), …]``, as Llama 3.2 / 4 write them."""
    if not calls:
        return []
    tokens = ["["]
    for number, call in enumerate(calls):
        tokens.append(f"{', ' if number else ''}{call.name}(")
        for position, (key, value) in enumerate(_arguments(call).items()):
            tokens.append(f"{', ' if position else ''}{key}=")
            tokens += _pieces(_python(value))
        tokens.append(")")
    return [*tokens, "]"]


def qwen3_coder(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """``<tool_call>\\n<function=name>\\n<parameter=k>\\nv\\n</parameter>\\n…``."""
    tokens: list[str] = []
    for number, call in enumerate(calls):
        tokens += ["\n" if number else "", "<tool_call>", "\n", f"<function={call.name}>", "\n"]
        for key, value in _arguments(call).items():
            tokens += [f"<parameter={key}>", "\n", *_pieces(_text(value)), "\n", "</parameter>"]
            tokens.append("\n")
        tokens += ["</function>", "\n", "</tool_call>"]
    return [token for token in tokens if token]


def glm45(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """``<tool_call>name\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>``."""
    tokens: list[str] = []
    for number, call in enumerate(calls):
        tokens += ["\n" if number else "", "<tool_call>", call.name, "\n"]
        for key, value in _arguments(call).items():
            tokens += ["<arg_key>", key, "</arg_key>", "\n", "<arg_value>"]
            tokens += [*_pieces(_text(value)), "</arg_value>", "\n"]
        tokens.append("</tool_call>")
    return [token for token in tokens if token]


def kimi_k2(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """Kimi K2's section tokens; each call's id is ``functions.name:n``."""
    if not calls:
        return []
    tokens = ["<|tool_calls_section_begin|>"]
    for number, call in enumerate(calls):
        tokens += ["<|tool_call_begin|>", f"functions.{call.name}:{number}"]
        tokens += ["<|tool_call_argument_begin|>", *call.fragments, "<|tool_call_end|>"]
    return [*tokens, "<|tool_calls_section_end|>"]


def deepseek_v3(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """DeepSeek V3 / R1: ``function`` + separator + the name, and the arguments fenced as JSON."""
    if not calls:
        return []
    tokens = [DEEPSEEK_V3.opens[0]]
    for call in calls:
        tokens += [DEEPSEEK_V3.call_begin, "function", DEEPSEEK_V3.header_end, call.name, "\n"]
        tokens += ["```json", "\n", *call.fragments, "\n", "```", DEEPSEEK_V3.call_end]
    return [*tokens, DEEPSEEK_V3.section_end]


def harmony(calls: Sequence[ScriptedToolCall]) -> list[str]:
    """gpt-oss: one ``commentary`` message to ``functions.name`` per call."""
    tokens: list[str] = []
    for call in calls:
        tokens += ["<|start|>", "assistant", "<|channel|>", f"commentary to=functions.{call.name}"]
        tokens += [" ", "<|constrain|>", "json", "<|message|>", *call.fragments, "<|call|>"]
    return tokens


def harmony_message(channel: str, tokens: Sequence[str], end: str) -> list[str]:
    """One harmony message on ``channel`` (the first one's ``<|start|>assistant`` is in the
    prompt, as the chat template leaves it)."""
    start = [] if channel == "analysis" else ["<|start|>", "assistant"]
    return [*start, "<|channel|>", channel, "<|message|>", *tokens, end]


def _arguments(call: ScriptedToolCall) -> dict[str, Any]:
    arguments = json.loads(call.arguments)
    return arguments if isinstance(arguments, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _python(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_python(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {_python(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(value)


def _pieces(text: str, size: int = 4) -> list[str]:
    """A value cut in small pieces, so that it streams."""
    return [text[i : i + size] for i in range(0, len(text), size)]
