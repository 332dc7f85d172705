"""A ``RunAgentInput`` → the request body sent upstream (Chat Completions or Responses API).
Pure, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import RunAgentInput

from bridge.config import ANY_UPSTREAM_MODEL, BridgeConfig
from bridge.core.errors import InvalidRunInputError
from bridge.serve.run.forwarded import FORWARDED_PARAMS, forwarded_params
from bridge.serve.run.history import ReasoningScope, to_openai_messages, to_openai_tools
from bridge.serve.run.parts import chat_part, responses_part
from bridge.serve.run.profiles import Profile, profile_of, shaped
from bridge.serve.tools.state import shares_state, state_prompt


def build_chat_request(
    run_input: RunAgentInput,
    config: BridgeConfig,
    upstream_models: Sequence[str] = (),
    *,
    scope: ReasoningScope | None = None,
) -> dict[str, Any]:
    """The streaming request for this run. ``forwardedProps`` may set only the allow-listed
    parameters (``bridge.serve.run.forwarded``), each to a value it takes, and ``model`` among
    the configured models; anything else there is ignored, and nothing a client sends reaches
    the URL or the headers. ``scope``: the reasoning scope ``auto`` resolved to
    (``bridge.serve.run.props``); without it, the configured one, ``auto`` read as
    ``current-turn``."""
    forwarded = forwarded_params(run_input)
    model = _model(forwarded, config, upstream_models)
    profile, _ = profile_of(config)
    messages = _messages(run_input, config, scope, profile)
    body: dict[str, Any] = {
        **config.upstream_body,
        "model": model,
        "messages": messages,
        "stream": config.upstream_stream,
    }
    if config.include_usage and config.upstream_stream:
        body["stream_options"] = {"include_usage": True}
    if run_input.tools:
        body["tools"] = to_openai_tools(run_input.tools)
    for key in sorted(FORWARDED_PARAMS.intersection(forwarded)):
        body[key] = forwarded[key]
    return shaped(body, profile)


def build_responses_request(
    run_input: RunAgentInput,
    config: BridgeConfig,
    upstream_models: Sequence[str] = (),
    *,
    scope: ReasoningScope | None = None,
) -> dict[str, Any]:
    """The Responses API request for this run: the history as input items (reasoning items
    carry back the ``encrypted_content`` the client kept, whatever the ``scope``), tools as
    function tools, reasoning summaries and encrypted reasoning asked for, ``store`` off unless
    configured."""
    forwarded = forwarded_params(run_input)
    model = _model(forwarded, config, upstream_models)
    profile, _ = profile_of(config)
    items = to_responses_input(_messages(run_input, config, scope, profile, responses=True))
    reasoning: dict[str, Any] = {"summary": "auto"}
    if "reasoning_effort" in forwarded:
        reasoning["effort"] = forwarded["reasoning_effort"]
    body: dict[str, Any] = {
        **config.upstream_body,
        "model": model,
        "input": items,
        "stream": config.upstream_stream,
        "store": config.responses_store,
        "include": ["reasoning.encrypted_content"],
        "reasoning": reasoning,
    }
    if run_input.tools:
        body["tools"] = [
            {"type": "function", **tool["function"]} for tool in to_openai_tools(run_input.tools)
        ]
    for key in sorted(_RESPONSES_PARAMS.intersection(forwarded)):
        body[key] = forwarded[key]
    limit = forwarded.get("max_completion_tokens", forwarded.get("max_tokens"))
    if limit is not None:
        body["max_output_tokens"] = limit
    choice = forwarded.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        body["tool_choice"] = {"type": "function", "name": choice["function"].get("name")}
    return body


def to_responses_input(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages (and the reasoning entries ``to_openai_messages`` leaves with
    ``encrypted_reasoning=True``, its user parts made by ``responses_part``) → Responses API
    input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "reasoning":
            summary = [{"type": "summary_text", "text": text} for text in message["summary"]]
            items.append(
                {
                    "type": "reasoning",
                    "id": message["id"],
                    "summary": summary,
                    "encrypted_content": message["encrypted_content"],
                }
            )
        elif role == "tool":
            # A result with images or files (RESPONSES_TOOL_MEDIA) is a list of parts, made
            # in the Responses API's shape already (``responses_part``).
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message["content"],
                }
            )
        elif role == "assistant":
            if message.get("content"):
                items.append({"role": "assistant", "content": message["content"]})
            for call in message.get("tool_calls") or ():
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function["arguments"],
                    }
                )
        else:  # system, developer, user (its parts are the Responses API's already)
            items.append({"role": role, "content": message["content"]})
    return items


def configured_scope(config: BridgeConfig) -> ReasoningScope:
    """The reasoning scope before anything is read from the upstream: ``auto`` sends the turn
    in progress until llama.cpp's ``/props`` says otherwise (``bridge.serve.run.props``)."""
    return "current-turn" if config.reasoning_scope == "auto" else config.reasoning_scope


def served_models(config: BridgeConfig, upstream_models: Sequence[str] = ()) -> list[str]:
    """The models a client may pick: the configured ones, and the upstream's list for ``*``."""
    named = [model for model in config.models if model != ANY_UPSTREAM_MODEL]
    if ANY_UPSTREAM_MODEL in config.models:
        named += upstream_models
    return list(dict.fromkeys(named))


#: The media parts a Responses API ``function_call_output`` carries itself (its ``output`` takes
#: ``input_text``, ``input_image`` and ``input_file``); a tool's audio or video follows the
#: turn's results in a user message, as every media part does for Chat Completions.
RESPONSES_TOOL_MEDIA = frozenset({"image", "document"})

#: forwardedProps parameters the Responses API takes as they are (``max_tokens``,
#: ``reasoning_effort`` and ``tool_choice`` are mapped apart; the rest is Chat Completions only).
_RESPONSES_PARAMS = frozenset({"temperature", "top_p", "parallel_tool_calls", "tool_choice"})


def _model(forwarded: dict[str, Any], config: BridgeConfig, upstream_models: Sequence[str]) -> Any:
    model = forwarded.get("model", config.model)
    allowed = served_models(config, upstream_models)
    if model not in allowed:
        raise InvalidRunInputError(
            f"model {model!r} is not served here; choose one of: {', '.join(allowed)}"
        )
    return model


def _messages(
    run_input: RunAgentInput,
    config: BridgeConfig,
    scope: ReasoningScope | None,
    profile: Profile,
    *,
    responses: bool = False,
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages, as ``profile``'s provider takes them
    back; with ``responses``, as the Responses request reads them (``to_responses_input``):
    reasoning as encrypted items, the user's parts as the Responses API's."""
    if scope is None:
        scope = configured_scope(config)
    policy = config.reasoning_history
    if policy == "auto":
        policy = "field" if profile.reasoning_field else "drop"
    if config.client_system == "refuse":
        _refuse_client_system(run_input)
    # A run whose state the model may edit is shown it with the tool to edit it.
    shared = shares_state(run_input.state, config)
    try:
        messages = to_openai_messages(
            run_input.messages,
            # Responses: reasoning goes back as encrypted items, never inside messages.
            reasoning="drop" if responses else policy,
            reasoning_field=profile.reasoning_field or "reasoning_content",
            tool_turns=profile.tool_turns,
            call_fields=profile.call_fields,
            scope=scope,
            context=run_input.context or (),
            state=run_input.state
            if config.include_state and run_input.state and not shared
            else None,
            state_note=state_prompt(run_input.state, config.state_schema) if shared else None,
            encrypted_reasoning=responses,
            part_of=responses_part if responses else chat_part,
            # The Responses API's function_call_output takes images and files itself.
            tool_media=RESPONSES_TOOL_MEDIA if responses else (),
        )
    except ValueError as exc:
        raise InvalidRunInputError(str(exc)) from exc
    if config.instructions is not None:
        # First, and the same object every turn of every run: the prompt's prefix, which the
        # model server caches, stays byte for byte the same whatever the client sends.
        messages.insert(0, {"role": "system", "content": config.instructions})
    return messages


def _refuse_client_system(run_input: RunAgentInput) -> None:
    """``client_system="refuse"``: a client's system or developer message is not run."""
    for message in run_input.messages:
        if message.role in ("system", "developer"):
            raise InvalidRunInputError(
                f"this agent takes no {message.role} message from its client: its "
                "instructions are the operator's",
                code="client_system_refused",
            )
