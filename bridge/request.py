"""A ``RunAgentInput`` → the Chat Completions request body sent upstream. Pure, no I/O."""

from __future__ import annotations

from typing import Any

from ag_ui.core import RunAgentInput

from bridge.config import FORWARDED_PARAMS, BridgeConfig
from bridge.errors import InvalidRunInputError
from bridge.history import to_openai_messages, to_openai_tools


def build_chat_request(run_input: RunAgentInput, config: BridgeConfig) -> dict[str, Any]:
    """The streaming request for this run. ``forwardedProps`` may set only the allow-listed
    parameters (``FORWARDED_PARAMS``) and ``model`` among the configured models; anything else
    there is ignored, and nothing a client sends reaches the URL or the headers."""
    forwarded = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    model = forwarded.get("model", config.model)
    if model not in config.models:
        raise InvalidRunInputError(
            f"model {model!r} is not served here; choose one of: {', '.join(config.models)}"
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
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    if config.include_usage:
        body["stream_options"] = {"include_usage": True}
    if run_input.tools:
        body["tools"] = to_openai_tools(run_input.tools)
    for key in sorted(FORWARDED_PARAMS.intersection(forwarded)):
        body[key] = forwarded[key]
    return body
