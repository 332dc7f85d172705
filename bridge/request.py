"""A ``RunAgentInput`` → the Chat Completions request body sent upstream. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import RunAgentInput

from bridge.config import ANY_UPSTREAM_MODEL, FORWARDED_PARAMS, BridgeConfig
from bridge.errors import InvalidRunInputError
from bridge.history import to_openai_messages, to_openai_tools


def build_chat_request(
    run_input: RunAgentInput, config: BridgeConfig, upstream_models: Sequence[str] = ()
) -> dict[str, Any]:
    """The streaming request for this run. ``forwardedProps`` may set only the allow-listed
    parameters (``FORWARDED_PARAMS``) and ``model`` among the configured models; anything else
    there is ignored, and nothing a client sends reaches the URL or the headers."""
    forwarded = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    model = forwarded.get("model", config.model)
    allowed = served_models(config, upstream_models)
    if model not in allowed:
        raise InvalidRunInputError(
            f"model {model!r} is not served here; choose one of: {', '.join(allowed)}"
        )
    try:
        messages = to_openai_messages(
            run_input.messages,
            reasoning="field" if config.reasoning_history == "auto" else config.reasoning_history,
            scope=config.reasoning_scope,
            context=run_input.context or (),
            state=run_input.state if config.include_state and run_input.state else None,
        )
    except ValueError as exc:
        raise InvalidRunInputError(str(exc)) from exc
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": config.upstream_stream}
    if config.include_usage and config.upstream_stream:
        body["stream_options"] = {"include_usage": True}
    if run_input.tools:
        body["tools"] = to_openai_tools(run_input.tools)
    for key in sorted(FORWARDED_PARAMS.intersection(forwarded)):
        body[key] = forwarded[key]
    return body


def served_models(config: BridgeConfig, upstream_models: Sequence[str] = ()) -> list[str]:
    """The models a client may pick: the configured ones, and the upstream's list for ``*``."""
    named = [model for model in config.models if model != ANY_UPSTREAM_MODEL]
    if ANY_UPSTREAM_MODEL in config.models:
        named += upstream_models
    return list(dict.fromkeys(named))
