"""What each provider takes back in a tool loop's next request (README "Provider profiles").
Pure, no I/O.

A tool loop is two requests, and the second carries what the model said in the first: its
reasoning, its calls and what the provider put on them. Providers disagree on what they take:
Gemini 3 wants its thought signature back on the call, DeepSeek and Kimi want the reasoning of
every earlier turn that called tools (even empty), Groq, Cerebras and Mistral refuse
``reasoning_content`` on an assistant message, vLLM and Ollama read ``reasoning``, Mistral
refuses ``stream_options``. A profile says it for one provider; ``--provider auto`` picks it by
the upstream URL's host, else ``generic`` (what the bridge sends any OpenAI-compatible server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bridge.config import BridgeConfig

#: Gemini 3's documented stand-in for a signature a history never had
#: (https://ai.google.dev/gemini-api/docs/thought-signatures, "FAQs").
SKIP_SIGNATURE = "skip_thought_signature_validator"


@dataclass(frozen=True)
class Profile:
    """One provider's rules for the requests the bridge sends it."""

    name: str
    #: The field earlier reasoning goes back in (``--reasoning-history auto``); ``None``: it
    #: does not go back (the provider refuses it, or reads it nowhere).
    reasoning_field: str | None = "reasoning_content"
    #: Reasoning goes back on every earlier assistant message that called tools, in later
    #: turns too, and as ``""`` on one that had none (DeepSeek V4, Kimi K2.5+).
    tool_turns: bool = False
    #: What a provider put on a tool call (``extra_content``) goes back on it; ``False``: a
    #: provider whose schema refuses unknown properties gets the call's own keys only.
    call_fields: bool = True
    #: Put on the first call of each step of the current turn that has no signature of its own.
    signature_stand_in: str | None = None
    #: Request fields renamed (``max_completion_tokens`` → ``max_tokens``) or, to ``None``,
    #: never sent.
    renamed: dict[str, str | None] = field(default_factory=dict)
    #: ``content: null`` beside ``tool_calls``; ``False``: ``""`` (llama-cpp-python's server
    #: answers HTTP 500 to a null).
    null_content: bool = True
    #: Where its rules are written (README's table).
    source: str = ""


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("generic", source="OpenAI's Chat Completions; llama.cpp, SGLang"),
        Profile(
            "gemini",
            reasoning_field=None,
            signature_stand_in=SKIP_SIGNATURE,
            source="https://ai.google.dev/gemini-api/docs/thought-signatures",
        ),
        Profile(
            "groq",
            reasoning_field=None,
            call_fields=False,
            source="Groq 400: property 'reasoning_content' is unsupported (hermes-agent #11089)",
        ),
        Profile(
            "cerebras",
            reasoning_field="reasoning",
            call_fields=False,
            source="https://inference-docs.cerebras.ai/capabilities/reasoning",
        ),
        Profile(
            "mistral",
            reasoning_field=None,
            call_fields=False,
            renamed={"stream_options": None, "max_completion_tokens": "max_tokens"},
            source="https://docs.mistral.ai/api/ (422 on unknown fields)",
        ),
        Profile(
            "deepseek",
            tool_turns=True,
            call_fields=False,
            source="https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
        ),
        Profile(
            "kimi",
            tool_turns=True,
            call_fields=False,
            source="https://platform.moonshot.ai/docs/guide/use-kimi-k2-thinking-model",
        ),
        Profile("vllm", reasoning_field="reasoning", source="vLLM 0.16+: reasoning on input"),
        Profile("ollama", reasoning_field="reasoning", source="Ollama /v1: reasoning on input"),
        Profile(
            "openrouter",
            reasoning_field="reasoning",
            source="https://openrouter.ai/docs/use-cases/reasoning-tokens",
        ),
        Profile(
            "perplexity",
            reasoning_field=None,
            call_fields=False,
            source="https://docs.perplexity.ai/api-reference/chat-completions-post",
        ),
        Profile(
            "llama-cpp-python",
            reasoning_field=None,
            call_fields=False,
            null_content=False,
            source="llama-cpp-python 0.3.36's server: HTTP 500 on content null",
        ),
    )
}

#: ``auto``: the profile of an upstream URL's host (or a host under it).
_HOSTS = {
    "generativelanguage.googleapis.com": "gemini",
    "aiplatform.googleapis.com": "gemini",
    "api.groq.com": "groq",
    "api.cerebras.ai": "cerebras",
    "api.mistral.ai": "mistral",
    "api.deepseek.com": "deepseek",
    "api.moonshot.ai": "kimi",
    "api.moonshot.cn": "kimi",
    "openrouter.ai": "openrouter",
    "api.perplexity.ai": "perplexity",
}


def profile_of(config: BridgeConfig) -> tuple[Profile, str]:
    """The profile in force, and why (``doctor`` says it): the one ``--provider`` names, or
    for ``auto`` the upstream URL's host's, else ``generic``."""
    if config.provider != "auto":
        return PROFILES[config.provider], "--provider"
    host = (urlsplit(config.upstream_url).hostname or "").lower()
    for known, name in _HOSTS.items():
        if host == known or host.endswith("." + known):
            return PROFILES[name], f"the upstream's host ({host})"
        # Vertex AI's regions: ``us-central1-aiplatform.googleapis.com``.
        if known == "aiplatform.googleapis.com" and host.endswith("-" + known):
            return PROFILES[name], f"the upstream's host ({host})"
    return PROFILES["generic"], "no provider known by the upstream's host"


def shaped(body: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """A Chat Completions request as ``profile``'s provider takes it: fields renamed or left
    out, a signature stand-in, ``""`` for a null content. (What goes back on a call, and which
    reasoning, the history already made as the profile says: ``request._messages``.)"""
    for old, new in profile.renamed.items():
        if old in body:
            value = body.pop(old)
            if new is not None:
                body.setdefault(new, value)
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        if not profile.null_content and message.get("content") is None:
            message["content"] = ""
        if profile.signature_stand_in and index > last_user and "extra_content" not in calls[0]:
            # Only where the history truly has none; the step's other calls stay unsigned.
            google = {"thought_signature": profile.signature_stand_in}
            message["tool_calls"] = [{**calls[0], "extra_content": {"google": google}}, *calls[1:]]
    return body
