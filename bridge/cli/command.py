"""``agui-bridge serve | demo | doctor | replay | scripted-upstream``: flags only map onto
``BridgeConfig`` (or the doctor's and the replay's few settings)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence

import uvicorn
from starlette.routing import Mount

from bridge.cli.agents import AGENT_PATH, agent_apps, agent_configs
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, SCRIPTED_MODELS, create_scripted_upstream
from bridge.cli.demo.tools import DEMO_TOOLS
from bridge.cli.doctor import diagnose, redacted_output
from bridge.cli.effective import printed
from bridge.cli.layers import Settings, env_name, layered
from bridge.cli.parser import build_parser, parse
from bridge.cli.replay import load_recording, replay_summary, serve_replay
from bridge.cli.serving import (
    CannotListen,
    configure_logging,
    display_host,
    listen,
    serve_app,
    web_demo,
)
from bridge.cli.settings import config_from_args
from bridge.cli.threads import check_threads
from bridge.cli.tool_modules import imported_tools
from bridge.cli.workers import WorkerFailed, run_workers, worker_count
from bridge.core.oneline import say_refused
from bridge.core.upstream_url import shown_url, url_secrets
from bridge.serve.http.app import create_app
from bridge.serve.tools.mcp_tools import McpStartError

#: The scripted model whose template "opened" the tag: the demo reads it as such.
_SCRIPTED_OPEN_TAG_MODEL = "scripted-think-no-open"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(build_parser(), argv)
    try:
        if args.command in ("serve", "config"):
            return _layered(args.command, argv)
        return int(_COMMANDS[args.command](args))
    # A bad flag value (BridgeConfig validates them), an address or an MCP server not to be had:
    # one line (an MCP server's failure is in its own words).
    except (ValueError, CannotListen, McpStartError, WorkerFailed) as exc:
        say_refused(exc)
        return 2


def _serve(args: argparse.Namespace) -> int:
    configure_logging(args)
    workers = worker_count(args.workers)
    # Checked here, before anything starts, in every case: each agent's settings and tools.
    configs = agent_configs(args)
    for config in configs.values():
        check_threads(config, args.host, workers)
    listener = listen(args.host, args.port)
    note = "-> " + ", ".join(dict.fromkeys(shown_url(c.upstream_url) for c in configs.values()))
    if workers > 1:
        return run_workers(args, listener, workers, list(configs), note)
    page = web_demo() if args.web_demo else None
    return serve_app(args, listener, agent_apps(args), [], note, page)


def _layered(command: str, argv: Sequence[str] | None) -> int:
    """``serve`` and ``config``: the flags given (parsed again alone: they win over the
    variables and the file) over the rest; a wrong setting named where it was set."""
    settings = layered(parse(build_parser(given_only=True), argv), os.environ)
    try:
        if command == "config" or settings.args.print_config:
            return _print_config(settings)
        return _serve(settings.args)
    except ValueError as exc:
        # An agent's setting is named where its table (or what it shares) set it.
        agent, said, rest = str(exc).partition(": ")
        if said and agent.startswith("agent ") and agent[6:] in settings.agents:
            raise ValueError(f"{agent}: {settings.agents[agent[6:]].explained(rest)}") from None
        raise ValueError(settings.explained(str(exc))) from None


def _print_config(settings: Settings) -> int:
    """The effective settings on stdout; then, if ``serve`` would refuse them, why (exit 2)."""
    print(printed(settings, os.environ), flush=True)
    agent_configs(settings.args)
    return 0


def _demo(args: argparse.Namespace) -> int:
    configure_logging(args)
    args.auth_token = args.auth_token or os.environ.get(env_name("--auth-token"))
    listener = listen(args.host, args.port)
    port = listener.getsockname()[1]
    if _SCRIPTED_OPEN_TAG_MODEL not in args.starts_in_reasoning_model:
        args.starts_in_reasoning_model.append(_SCRIPTED_OPEN_TAG_MODEL)
    # Shared state is on in the demo, so the page's plan and to-dos work with no flag (the page
    # sends its agent's state, an object, every run).
    args.shared_state = True
    # And the model may ask the person (the scripted one does for "book a table": a form).
    args.ask_user = True
    # The bridge reaches the scripted model over real HTTP, as it would a real one.
    config = config_from_args(
        args,
        upstream_url=f"http://{display_host(args.host)}:{port}/scripted/v1",
        model=DEFAULT_SCRIPTED_MODEL,
        models=SCRIPTED_MODELS,
        api_key=None,
    )
    check_threads(config, args.host)
    scripted = Mount("/scripted", app=create_scripted_upstream(pace=args.pace))
    # The demo's server tool (get_time) runs here, beside the page's frontend tools.
    agent = create_app(config, tools=[*DEMO_TOOLS, *imported_tools(args.tools)])
    apps = [(AGENT_PATH, agent)]
    return serve_app(args, listener, apps, [scripted], "(the scripted model)", web_demo())


def _doctor(args: argparse.Namespace) -> int:
    if not args.upstream_url:
        print("agui-bridge: give --upstream-url or set OPENAI_BASE_URL", file=sys.stderr)
        return 2
    key = os.environ.get(args.api_key_env) or None
    report = asyncio.run(
        diagnose(args.upstream_url, model=args.model, api_key=key, api_key_env=args.api_key_env)
    )
    secrets = (key, *url_secrets(args.upstream_url))
    print(redacted_output(report, secrets, as_json=args.json), flush=True)
    return 0 if report["usable"] else 1


def _replay(args: argparse.Namespace) -> int:
    recording = load_recording(args.directory)
    listener = listen(args.host, args.port)
    port = listener.getsockname()[1]
    for line in replay_summary(recording, f"http://{display_host(args.host)}:{port}"):
        print(line, flush=True)
    serve_replay(recording, listener=listener, speed=args.speed, log_level=args.log_level)
    return 0


def _scripted(args: argparse.Namespace) -> int:
    listener = listen(args.host, args.port)
    port = listener.getsockname()[1]
    print(
        f"agui-bridge scripted upstream: http://{display_host(args.host)}:{port}/v1 "
        f"(models: {', '.join(SCRIPTED_MODELS)})",
        flush=True,
    )
    app = create_scripted_upstream(pace=args.pace)
    config = uvicorn.Config(app, host=args.host, port=port, log_level=args.log_level)
    uvicorn.Server(config).run(sockets=[listener])
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "demo": _demo,
    "doctor": _doctor,
    "replay": _replay,
    "scripted-upstream": _scripted,
}
