"""One script, laid out on the wire the way each kind of server lays it out.

Pure: a script becomes a list of deltas (one generated token each), cut at ``max_tokens``, then
either streamed chunks or one whole ``chat.completion`` body accumulated from those same deltas, so
the two paths cannot disagree.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.cli.demo import text_calls
from bridge.cli.demo.script import Script, ScriptedToolCall

REASONING_CONTENT = "scripted-reasoning-content"
REASONING = "scripted-reasoning"
THINK_TAGS = "scripted-think-tags"
THINK_NO_OPEN = "scripted-think-no-open"
DEEPSEEK_LEGACY = "scripted-deepseek-legacy"
OPENROUTER = "scripted-openrouter"
PLAIN = "scripted-plain"
#: Gemini 3's OpenAI-compatible endpoint: the first tool call of each step signed with
#: ``extra_content.google.thought_signature``, which must come back on that call; reasoning in
#: ``reasoning_content`` (``include_thoughts``).
GEMINI = "scripted-gemini"
#: A server with no tool parser (llama.cpp without --jinja, vLLM without --tool-call-parser):
#: Qwen-style ``<think>`` reasoning and ``<tool_call>`` JSON calls, all as text in ``content``.
HERMES_TEXT = "scripted-hermes-text"
#: Mistral's calls as text: ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]``; the reasoning
#: in ``reasoning_content`` (a server that parses reasoning but not these tool calls).
MISTRAL_TEXT = "scripted-mistral-text"
#: Llama 3.x's calls as text: bare ``{"name": …, "parameters": {…}}`` objects joined by ``; ``
#: opening the answer; the reasoning in ``reasoning`` (a vLLM with a reasoning parser only).
LLAMA_TEXT = "scripted-llama-text"
#: Pythonic calls (``[get_weather(city="Paris"), …]``), reasoning in ``reasoning_content``.
PYTHONIC_TEXT = "scripted-pythonic-text"
#: Qwen3-Coder XML calls after ``<think>`` reasoning, all in ``content`` (Qwen3-Next, Qwen3.5).
QWEN3_CODER_TEXT = "scripted-qwen3-coder-text"
#: GLM-4.5's ``<arg_key>``/``<arg_value>`` calls, reasoning in ``reasoning_content``.
GLM_TEXT = "scripted-glm-text"
#: Kimi K2's section tokens, reasoning in ``reasoning``.
KIMI_TEXT = "scripted-kimi-text"
#: DeepSeek V3's tool tokens with fenced JSON, reasoning in ``reasoning_content``.
DEEPSEEK_V3_TEXT = "scripted-deepseek-v3-text"
#: gpt-oss's raw harmony: ``analysis``, ``final`` and ``commentary to=functions.…`` messages.
HARMONY_TEXT = "scripted-harmony-text"

#: Text-call models whose reasoning is in ``<think>`` tags in ``content`` too.
THINK_TAG_TEXT = (HERMES_TEXT, QWEN3_CODER_TEXT)
#: The models whose tool calls are text in ``content``, and how each lays them out.
TEXT_CALL_LAYOUTS: dict[str, text_calls.Layout] = {
    "scripted-hermes-text": text_calls.hermes,
    "scripted-mistral-text": text_calls.mistral,
    "scripted-llama-text": text_calls.llama,
    PYTHONIC_TEXT: text_calls.pythonic,
    QWEN3_CODER_TEXT: text_calls.qwen3_coder,
    GLM_TEXT: text_calls.glm45,
    KIMI_TEXT: text_calls.kimi_k2,
    DEEPSEEK_V3_TEXT: text_calls.deepseek_v3,
    HARMONY_TEXT: text_calls.harmony,
}

SCRIPTED_MODELS: tuple[str, ...] = (
    REASONING_CONTENT,
    REASONING,
    THINK_TAGS,
    THINK_NO_OPEN,
    DEEPSEEK_LEGACY,
    OPENROUTER,
    PLAIN,
    GEMINI,
    HERMES_TEXT,
    MISTRAL_TEXT,
    LLAMA_TEXT,
    PYTHONIC_TEXT,
    QWEN3_CODER_TEXT,
    GLM_TEXT,
    KIMI_TEXT,
    DEEPSEEK_V3_TEXT,
    HARMONY_TEXT,
)
DEFAULT_SCRIPTED_MODEL = REASONING_CONTENT
SYSTEM_FINGERPRINT = "scripted-1"


@dataclass(frozen=True)
class Step:
    """One delta the model streams, and whether it is part of the reasoning."""

    delta: dict[str, Any]
    reasoning: bool = False
    tokens: int = 1  # OpenRouter's closing signature detail is metadata, not a generated token


@dataclass(frozen=True)
class Generation:
    """What the model generated for one request in one dialect, cut at ``max_tokens``."""

    deltas: tuple[dict[str, Any], ...]
    finish_reason: str
    completion_tokens: int
    reasoning_tokens: int
    prompt_tokens: int

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }


def generate(
    script: Script, model: str, *, max_tokens: int | None = None, prompt_tokens: int = 0
) -> Generation:
    """Lay ``script`` out in ``model``'s dialect and stop after ``max_tokens`` generated tokens."""
    if model not in SCRIPTED_MODELS:
        raise ValueError(f"unknown scripted model {model!r}")
    layout = TEXT_CALL_LAYOUTS.get(model)
    if layout is not None:
        calls = [Step({"content": token}) for token in layout(script.tool_calls)]
    else:
        calls = _tool_call_steps(script.tool_calls, signed=model == GEMINI)
    steps = [*_segment_steps(script, model), *calls]
    deltas: list[dict[str, Any]] = []
    generated = reasoning = 0
    finish_reason = script.finish_reason
    if layout is not None and finish_reason == "tool_calls":
        finish_reason = "stop"  # the server did not see the calls: to it they are text
    for step in steps:
        if max_tokens is not None and generated + step.tokens > max_tokens:
            finish_reason = "length"
            break
        deltas.append(step.delta)
        generated += step.tokens
        reasoning += step.tokens if step.reasoning else 0
    return Generation(tuple(deltas), finish_reason, generated, reasoning, prompt_tokens)


def _segment_steps(script: Script, model: str) -> list[Step]:
    """The reasoning and text, in the order written (interleaved thinking: reasoning again after
    text, which each dialect writes as it writes its first reasoning)."""
    steps: list[Step] = []
    segments = script.segments
    last_text = max((i for i, (kind, _) in enumerate(segments) if kind == "text"), default=-1)
    resumed = 0  # reasoning segments so far
    for position, (kind, tokens) in enumerate(segments):
        if kind == "reasoning":
            steps += _reasoning_steps(tokens, model, resumed)
            resumed += 1 if tokens else 0
        else:
            if model == HARMONY_TEXT and tokens:
                end = "<|return|>" if position == last_text else "<|end|>"
                tokens = tuple(text_calls.harmony_message("final", tokens, end))
            steps += [Step({"content": token}) for token in tokens]
    return steps


def _reasoning_steps(tokens: Sequence[str], model: str, resumed: int = 0) -> list[Step]:
    """``resumed``: how many reasoning segments came before this one in the same turn."""
    if not tokens or model == PLAIN:
        return []
    if model in (
        REASONING_CONTENT,
        GEMINI,
        MISTRAL_TEXT,
        PYTHONIC_TEXT,
        GLM_TEXT,
        DEEPSEEK_V3_TEXT,
    ):
        return [Step({"reasoning_content": token}, True) for token in tokens]
    if model in (REASONING, LLAMA_TEXT, KIMI_TEXT):
        return [Step({"reasoning": token}, True) for token in tokens]
    if model == HARMONY_TEXT:
        start = ["<|start|>", "assistant"] if resumed else []  # a later message has its header
        return _content_steps([*start, *text_calls.harmony_message("analysis", tokens, "<|end|>")])
    if model == OPENROUTER:
        # OpenRouter repeats each piece in `reasoning_details` and closes with a signed, empty one
        # (one detail index per reasoning block).
        steps = [
            Step({"reasoning": token, "reasoning_details": [_detail(token, resumed)]}, True)
            for token in tokens
        ]
        signature = base64.b64encode(hashlib.sha256("".join(tokens).encode()).digest()).decode()
        closing = {"reasoning_details": [_detail("", resumed, signature=signature)]}
        return [*steps, Step(closing, True, tokens=0)]
    # THINK_NO_OPEN's template opens the first block in the prompt; the model opens later ones.
    tagged = (THINK_TAGS, DEEPSEEK_LEGACY, *THINK_TAG_TEXT, *((THINK_NO_OPEN,) if resumed else ()))
    opening = ["<think>", "\n"] if model in tagged else []
    closing_tags = ["\n", "</think>", "\n\n"]
    if model == DEEPSEEK_LEGACY:
        # llama.cpp deepseek-legacy: the raw text (tags included) in `content`, and the reasoning
        # alone in `reasoning_content` of the same chunks.
        both = [Step({"reasoning_content": t, "content": t}, True) for t in tokens]
        return [*_content_steps(opening), *both, *_content_steps(closing_tags)]
    return _content_steps([*opening, *tokens, *closing_tags])  # THINK_TAGS, THINK_NO_OPEN, …


def _content_steps(tokens: Sequence[str]) -> list[Step]:
    return [Step({"content": token}, True) for token in tokens]


def _detail(text: str, index: int = 0, *, signature: str | None = None) -> dict[str, Any]:
    detail: dict[str, Any] = {"type": "reasoning.text", "text": text}
    if signature is not None:
        detail["signature"] = signature
    return {**detail, "format": "unknown", "index": index}


def thought_signature(call_id: str) -> str:
    """What ``scripted-gemini`` signs a call with (as Gemini, opaque base64)."""
    return base64.b64encode(hashlib.sha256(f"signed {call_id}".encode()).digest()).decode()


def _tool_call_steps(calls: Sequence[ScriptedToolCall], *, signed: bool = False) -> list[Step]:
    """Argument fragments of parallel calls interleaved (a, b, a, b, …): state is per index.
    ``signed``: the first call carries Gemini's thought signature (its first delta)."""
    steps: list[Step] = []
    for position in range(max((len(call.fragments) for call in calls), default=0)):
        for index, call in enumerate(calls):
            if position >= len(call.fragments):
                continue
            fragment = call.fragments[position]
            if position == 0:
                first = {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": fragment},
                }
                if signed and index == 0:
                    google = {"thought_signature": thought_signature(call.id)}
                    first["extra_content"] = {"google": google}
                steps.append(Step({"tool_calls": [first]}))
            else:
                piece = {"index": index, "function": {"arguments": fragment}}
                steps.append(Step({"tool_calls": [piece]}))
    return steps


# --- the wire ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Envelope:
    """The fields every chunk or completion of one response shares."""

    id: str
    created: int
    model: str

    def wrap(self, obj: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            **fields,
        }


def stream_chunks(
    generation: Generation, envelope: Envelope, *, include_usage: bool = False
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed response (``[DONE]`` not included)."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return envelope.wrap("chat.completion.chunk", choices=[choice])

    yield chunk({"role": "assistant", "content": None})
    for delta in generation.deltas:
        yield chunk(delta)
    yield chunk({}, generation.finish_reason)
    if include_usage:
        yield envelope.wrap("chat.completion.chunk", choices=[], usage=generation.usage())


def completion_body(generation: Generation, envelope: Envelope) -> dict[str, Any]:
    """The ``chat.completion`` object of a whole response: the streamed deltas, accumulated."""
    choice = {
        "index": 0,
        "message": accumulate(generation.deltas),
        "finish_reason": generation.finish_reason,
    }
    return envelope.wrap("chat.completion", choices=[choice], usage=generation.usage())


def accumulate(deltas: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One assistant message from streamed deltas: texts joined, details and calls by index."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    details: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        for key in ("content", "reasoning_content", "reasoning"):
            if key in delta:
                message[key] = (message.get(key) or "") + delta[key]
        for detail in delta.get("reasoning_details", ()):
            merged = details.setdefault(detail["index"], {**detail, "text": ""})
            merged["text"] += detail.get("text", "")
            merged.update({k: v for k, v in detail.items() if k not in ("text", "index")})
        for piece in delta.get("tool_calls", ()):
            call = calls.setdefault(
                piece["index"], {"id": "", "type": "function", "function": {"name": ""}}
            )
            call["id"] = piece.get("id", call["id"])
            if "extra_content" in piece:
                call["extra_content"] = piece["extra_content"]
            function = call["function"]
            function["name"] += piece["function"].get("name", "")
            function["arguments"] = function.get("arguments", "") + piece["function"]["arguments"]
    if details:
        message["reasoning_details"] = [details[i] for i in sorted(details)]
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message
