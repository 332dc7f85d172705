"""From flags (or the environment) to a ``BridgeConfig``: the flags only map onto it."""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bridge.cli.layers import layered
from bridge.cli.options import mcp_servers, otel_requested
from bridge.cli.tomlfile import bounded_text
from bridge.cli.tool_modules import imported_tools
from bridge.config import MAX_INSTRUCTIONS_BYTES, BridgeConfig, importable, seconds_problem
from bridge.core.translate import TranslateOptions


def config_from_args(
    args: argparse.Namespace,
    *,
    upstream_url: str,
    model: str,
    models: Sequence[str],
    api_key: str | None,
    environ: Mapping[str, str] = os.environ,
) -> BridgeConfig:
    translate = TranslateOptions(
        reasoning_tags=[tag for tag in args.reasoning_tags.split(",") if tag],
        starts_in_reasoning=args.starts_in_reasoning,
        text_tool_format=args.text_tool_format,
    )
    open_tag = replace(translate, starts_in_reasoning=True)
    return BridgeConfig(
        upstream_url=upstream_url,
        model=model,
        models=tuple(models),
        api_key=api_key,
        instructions=instructions(args.instructions),
        client_system=args.client_system,
        connect_timeout=args.connect_timeout,
        idle_timeout=args.idle_timeout,
        translate=translate,
        translate_overrides={name: open_tag for name in args.starts_in_reasoning_model},
        reasoning_history=args.reasoning_history,
        reasoning_scope=args.reasoning_scope,
        unsupported_parts=args.unsupported_parts,
        include_state=args.include_state,
        shared_state=args.shared_state,
        state_schema=_state_schema(args.state_schema),
        max_state_bytes=args.max_state_bytes,
        predict_state=tuple(_predicted(entry) for entry in args.predict_state),
        include_usage=not args.no_usage,
        upstream_stream=args.upstream_stream == "on",
        upstream_transport=args.upstream_transport,
        upstream_api=args.upstream_api,
        responses_store=args.responses_store,
        upstream_body=upstream_body(args.upstream_body),
        provider=args.provider,
        retries=args.retries,
        retry_after_cap=args.retry_after_cap,
        keepalive_interval=args.keepalive_interval,
        max_body_bytes=args.max_body_bytes,
        max_messages=args.max_messages,
        max_attachment_bytes=args.max_attachment_bytes,
        max_request_attachment_bytes=args.max_request_attachment_bytes,
        max_line_bytes=args.max_line_bytes,
        max_concurrent_runs=args.max_concurrent_runs,
        cors_origins=tuple(args.cors_origin),
        auth_token=args.auth_token or None,
        agui_protocol=args.agui_protocol,
        mcp_servers=mcp_servers(args.mcp),
        mcp_optional=tuple(args.mcp_optional),
        tool_timeout=args.tool_timeout,
        max_tool_rounds=args.max_tool_rounds,
        max_parallel_tools=args.max_parallel_tools,
        tool_threads=args.tool_threads,
        approve=tuple(args.approve),
        ask_user=args.ask_user,
        secret=environ.get(args.secret_env) or None,
        approval_timeout=args.approval_timeout,
        approval_store=args.approval_store,
        threads=None
        if (args.threads or "none").strip().lower() in ("none", "off")
        else args.threads,
        thread_ttl=args.thread_ttl,
        max_thread_bytes=args.max_thread_bytes,
        thread_store_bytes=args.thread_store_bytes,
        run_grace=args.run_grace,
        run_timeout=args.run_timeout,
        thread_owner_header=args.thread_owner_header,
        record_dir=getattr(args, "record", None),
        metrics=args.metrics or args.metrics_public,
        metrics_public=args.metrics_public,
        otel=_otel(args, environ),
        otel_content=args.otel_content,
        log_format=args.log_format,
    )


def _otel(args: argparse.Namespace, environ: Mapping[str, str]) -> bool:
    """``--otel``, or the SDK's variables; asked by the variables alone without the SDK
    installed, the bridge says so and serves untraced (``--otel`` without it is an error)."""
    wanted = otel_requested(args.otel, environ)
    if wanted is not None:
        return wanted
    if not importable("opentelemetry.sdk"):
        logging.getLogger("agui_bridge").warning(
            "OTEL_* variables are set but the OpenTelemetry SDK is not installed: serving "
            "without traces (pip install 'agui-bridge[otel]')"
        )
        return False
    return True


def serve_config(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> BridgeConfig:
    """``agui-bridge serve``'s configuration (its upstream, models and key, then the shared
    flags); ``environ`` holds the variables the flags name (the key's, the secret's)."""
    if not args.upstream_url:
        raise ValueError("give --upstream-url or set OPENAI_BASE_URL")
    if not args.model:
        raise ValueError("give --model")
    # Not BridgeConfig's (the server's, not the app's), so checked here as it checks its own.
    grace = seconds_problem(args.shutdown_grace, zero=True)
    if grace is not None:
        raise ValueError(f"--shutdown-grace {grace}")
    return config_from_args(
        args,
        upstream_url=args.upstream_url,
        model=args.model,
        models=[m for m in args.models.split(",") if m],
        api_key=environ.get(args.api_key_env) or None,
        environ=environ,
    )


def config_from_env(environ: Mapping[str, str]) -> BridgeConfig:
    """The ``BridgeConfig`` ``agui-bridge serve`` would build with the flags the environment
    sets (``AGUI_BRIDGE_MODEL``, ``AGUI_BRIDGE_METRICS``…, and the file ``AGUI_BRIDGE_CONFIG``
    names; README "Deploy"); ``ValueError`` names what is missing or wrong."""
    return served_from_env(environ)[0]


def served_from_env(environ: Mapping[str, str]) -> tuple[BridgeConfig, list[Callable[..., Any]]]:
    """``config_from_env``'s configuration and the Python tools ``AGUI_BRIDGE_TOOLS`` (or the
    file's ``tools``) names. One agent: a file with ``[agents.NAME]`` is refused."""
    settings = layered(argparse.Namespace(command="serve"), environ)
    if settings.agents:
        raise ValueError(
            "bridge.app:from_env serves one agent: the file's [agents.*] tables need "
            "agui-bridge serve --config"
        )
    try:
        return serve_config(settings.args, environ), imported_tools(settings.args.tools)
    except ValueError as exc:
        raise ValueError(settings.explained(str(exc), unset="variable")) from None


def upstream_body(value: str | None) -> dict[str, Any]:
    """``--upstream-body JSON``: the object it names (``BridgeConfig`` checks its fields)."""
    if value is None:
        return {}
    try:
        body = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"--upstream-body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise ValueError('--upstream-body must be a JSON object: {"field": value, …}')
    return body


def instructions(value: str | None) -> str | None:
    """``--instructions TEXT|@FILE``: the text, or the file's (UTF-8), its size checked before
    it is read."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return bounded_text(Path(value[1:]).expanduser(), MAX_INSTRUCTIONS_BYTES)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--instructions {value}: {exc}") from None


def _state_schema(path: str | None) -> dict[str, Any] | None:
    """``--state-schema FILE``: the JSON Schema the file holds."""
    if path is None:
        return None
    try:
        schema = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--state-schema {path}: {exc}") from None
    if not isinstance(schema, dict):
        raise ValueError(f"--state-schema {path}: a JSON Schema is a JSON object")
    return schema


def _predicted(entry: str) -> tuple[str, str, str]:
    """``--predict-state KEY=TOOL.ARGUMENT``."""
    key, _, target = entry.partition("=")
    tool, _, argument = target.rpartition(".")
    if not key.strip() or not tool or not argument:
        raise ValueError(f"--predict-state {entry!r}: say STATE_KEY=TOOL.ARGUMENT")
    return key.strip(), tool, argument
