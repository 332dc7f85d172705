"""OpenAI-style ``usage`` objects → AG-UI ``TokenUsage``, in the protocol's accounting.

AG-UI counts ``inputTokens`` and ``outputTokens`` as totals, with reasoning and cached tokens
as parts of them (never additions). OpenAI already counts that way; a provider reporting a
part larger than its total evidently left it out, so it is added in, as the protocol asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ag_ui.core import TokenUsage

_MAX_COUNT = 2**53 - 1


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= _MAX_COUNT:
        return value
    return None


def _details(usage: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = usage.get(key)
    return value if isinstance(value, Mapping) else {}


def token_usage_from_openai(
    usage: Mapping[str, Any], model: str | None = None
) -> TokenUsage | None:
    """Map a chat-completions ``usage`` object; ``None`` when it holds no usable count."""
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    prompt_details = _details(usage, "prompt_tokens_details")
    completion_details = _details(usage, "completion_tokens_details")
    reasoning = _count(completion_details.get("reasoning_tokens"))
    if reasoning is None:
        reasoning = _count(usage.get("reasoning_tokens"))
    cached = _count(prompt_details.get("cached_tokens"))
    if cached is None:  # DeepSeek reports prompt_cache_hit_tokens at the top level
        cached = _count(usage.get("prompt_cache_hit_tokens"))
    cache_write = _count(prompt_details.get("cache_write_tokens"))

    if completion is not None and reasoning is not None and reasoning > completion:
        completion += reasoning
    if prompt is not None:
        parts = (cached or 0) + (cache_write or 0)
        if parts > prompt:
            prompt += parts
    total = None
    if prompt is not None and completion is not None:
        total = prompt + completion
    elif prompt is None and completion is None:
        total = _count(usage.get("total_tokens"))

    counts = {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": total,
        "reasoning_tokens": reasoning,
        "cached_input_tokens": cached,
        "cache_write_input_tokens": cache_write,
    }
    present: dict[str, Any] = {key: value for key, value in counts.items() if value is not None}
    if not present:
        return None
    if model:
        present["model"] = model
    return TokenUsage(**present)
