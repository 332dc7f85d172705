"""``agui-bridge serve | demo | doctor | replay | scripted-upstream``: flags only map onto
``BridgeConfig`` (or the doctor's and the replay's few settings)."""

from __future__ import annotations

import argparse
import asyncio
import copy
import errno
import logging
import logging.config
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import bridge
from bridge import __version__
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, SCRIPTED_MODELS, create_scripted_upstream
from bridge.cli.demo.tools import DEMO_TOOLS
from bridge.cli.doctor import DEFAULT_KEY_ENV, diagnose, redacted_output
from bridge.cli.options import add_translate_options, mcp_servers, otel_requested
from bridge.cli.replay import load_recording, replay_summary, serve_replay
from bridge.config import BridgeConfig, importable
from bridge.core.translate import TranslateOptions
from bridge.core.upstream_url import shown_url
from bridge.serve.app import Bridge, create_app, mount
from bridge.serve.mcp_tools import McpStartError

#: The scripted model whose template "opened" the tag: the demo reads it as such.
_SCRIPTED_OPEN_TAG_MODEL = "scripted-think-no-open"

#: The built demo page, inside the package so that the wheel carries it (``make demo`` or
#: ``npm run build`` in web-demo/ writes it in a checkout).
WEB_DEMO_DIR = Path(bridge.__file__).resolve().parent / "web"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args))
    # A bad flag value (BridgeConfig validates them), an address or an MCP server not to be had.
    except (ValueError, CannotListen, McpStartError) as exc:
        print(f"agui-bridge: {exc}", file=sys.stderr)
        return 2


class CannotListen(Exception):
    """The address to listen on cannot be had (in use, not this machine's, not allowed)."""


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is printed, so a port in use is one clear
    line (and port 0 is the free port the server then really uses)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise CannotListen(f"cannot listen on {host!r}: {exc.strerror}: check --host") from exc
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise CannotListen(
                f"port {port} on {host} is in use: stop what holds it or pick another with "
                "--port N (--port 0 takes a free one)"
            ) from exc
        raise CannotListen(
            f"cannot listen on {host}:{port}: {exc.strerror}: check --host and --port"
        ) from exc
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agui-bridge",
        description="Serve an OpenAI-compatible model server as an AG-UI agent (POST /agent).",
    )
    parser.add_argument("--version", action="version", version=f"agui-bridge {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="serve a real upstream",
        description="Serve a real OpenAI-compatible upstream.",
    )
    serve.add_argument(
        "--upstream-url",
        default=os.environ.get("OPENAI_BASE_URL"),
        help="base URL of the OpenAI-compatible API, including /v1 "
        "(default: $OPENAI_BASE_URL), e.g. http://127.0.0.1:8080/v1",
    )
    serve.add_argument("--model", required=True, help="model to ask for when the client names none")
    serve.add_argument(
        "--models",
        default="",
        help="comma-separated further models a client may pick with forwardedProps.model "
        "(and the demo page's picker); '*' admits every model the upstream lists at /v1/models",
    )
    serve.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the upstream API key, sent as a Bearer token "
        "(default: OPENAI_API_KEY; unset means no key)",
    )
    serve.add_argument(
        "--web-demo",
        action="store_true",
        help="also serve the demo page at / (in a checkout, `make demo` builds it)",
    )
    serve.add_argument(
        "--record",
        metavar="DIR",
        help="record every run in DIR (one JSON Lines file each: the upstream request without "
        "the key, its status, headers and raw bytes with their times, the events sent); "
        "`agui-bridge replay DIR` serves them again",
    )
    _add_listen(serve, port=8000)
    add_translate_options(serve)
    serve.set_defaults(handler=_serve)

    doctor = commands.add_parser(
        "doctor",
        help="probe an upstream and tell which serve flags it needs",
        description="Probe an OpenAI-compatible upstream with a few small requests and report "
        "how it sends reasoning, tool calls and usage, and the serve command it needs. Exit "
        "status 0 when the upstream is usable.",
    )
    doctor.add_argument(
        "--upstream-url",
        default=os.environ.get("OPENAI_BASE_URL"),
        help="base URL of the OpenAI-compatible API, including /v1 (default: $OPENAI_BASE_URL)",
    )
    doctor.add_argument("--model", help="model to probe (default: the first the upstream lists)")
    doctor.add_argument(
        "--api-key-env",
        default=DEFAULT_KEY_ENV,
        metavar="VAR",
        help="environment variable holding the upstream API key (default: OPENAI_API_KEY)",
    )
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.set_defaults(handler=_doctor)

    replay = commands.add_parser(
        "replay",
        help="serve recorded runs (serve --record DIR) as an OpenAI-compatible upstream",
        description="Serve the upstream answers recorded by `serve --record DIR`, with their "
        "read boundaries and pace: point a bridge at it to reproduce the recorded runs.",
    )
    replay.add_argument("directory", metavar="DIR", help="the folder given to serve --record")
    replay.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="pace factor: 2 replays twice as fast, 0.5 at half speed (default 1)",
    )
    _add_listen(replay, port=8001)
    replay.set_defaults(handler=_replay)

    demo = commands.add_parser(
        "demo",
        help="serve the demo with the built-in scripted model",
        description="Serve the bridge with the embedded scripted upstream: no model server needed.",
    )
    _add_listen(demo, port=8000)
    demo.add_argument(
        "--pace", type=float, default=0.03, help="seconds between the scripted model's tokens"
    )
    add_translate_options(demo)
    demo.set_defaults(handler=_demo)

    scripted = commands.add_parser(
        "scripted-upstream",
        help="run only the scripted OpenAI-compatible model server",
        description=f"Serve the scripted model alone; models: {', '.join(SCRIPTED_MODELS)}.",
    )
    _add_listen(scripted, port=8001)
    scripted.add_argument(
        "--pace", type=float, default=0.0, help="seconds between streamed chunks (default 0)"
    )
    scripted.set_defaults(handler=_scripted)
    return parser


def _add_listen(parser: argparse.ArgumentParser, *, port: int) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=port,
        help=f"port to listen on (default {port}; 0 picks a free one)",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")


def _config(
    args: argparse.Namespace,
    *,
    upstream_url: str,
    model: str,
    models: Sequence[str],
    api_key: str | None,
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
        connect_timeout=args.connect_timeout,
        idle_timeout=args.idle_timeout,
        translate=translate,
        translate_overrides={name: open_tag for name in args.starts_in_reasoning_model},
        reasoning_history=args.reasoning_history,
        reasoning_scope=args.reasoning_scope,
        include_state=args.include_state,
        include_usage=not args.no_usage,
        upstream_stream=args.upstream_stream == "on",
        upstream_transport=args.upstream_transport,
        upstream_api=args.upstream_api,
        responses_store=args.responses_store,
        retries=args.retries,
        retry_after_cap=args.retry_after_cap,
        keepalive_interval=args.keepalive_interval,
        max_body_bytes=args.max_body_bytes,
        max_messages=args.max_messages,
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
        secret=os.environ.get(args.secret_env) or None,
        approval_timeout=args.approval_timeout,
        record_dir=getattr(args, "record", None),
        metrics=args.metrics or args.metrics_public,
        metrics_public=args.metrics_public,
        otel=_otel(args),
        otel_content=args.otel_content,
        log_format=args.log_format,
    )


def _otel(args: argparse.Namespace) -> bool:
    """``--otel``, or the SDK's variables; asked by the variables alone without the SDK
    installed, the bridge says so and serves untraced (``--otel`` without it is an error)."""
    wanted = otel_requested(args.otel, os.environ)
    if wanted is not None:
        return wanted
    if not importable("opentelemetry.sdk"):
        logging.getLogger("agui_bridge").warning(
            "OTEL_* variables are set but the OpenTelemetry SDK is not installed: serving "
            "without traces (pip install 'agui-bridge[otel]')"
        )
        return False
    return True


def _serve(args: argparse.Namespace) -> int:
    _configure_logging(args)
    if not args.upstream_url:
        print("agui-bridge: give --upstream-url or set OPENAI_BASE_URL", file=sys.stderr)
        return 2
    config = _config(
        args,
        upstream_url=args.upstream_url,
        model=args.model,
        models=[m for m in args.models.split(",") if m],
        api_key=os.environ.get(args.api_key_env) or None,
    )
    listener = _listen(args.host, args.port)
    page = _web_demo() if args.web_demo else None
    note = f"-> {shown_url(config.upstream_url)}"
    return _run_agent(args, listener, create_app(config), [], note, page)


def _demo(args: argparse.Namespace) -> int:
    _configure_logging(args)
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]
    if _SCRIPTED_OPEN_TAG_MODEL not in args.starts_in_reasoning_model:
        args.starts_in_reasoning_model.append(_SCRIPTED_OPEN_TAG_MODEL)
    # The bridge reaches the scripted model over real HTTP, as it would a real one.
    config = _config(
        args,
        upstream_url=f"http://{_display_host(args.host)}:{port}/scripted/v1",
        model=DEFAULT_SCRIPTED_MODEL,
        models=SCRIPTED_MODELS,
        api_key=None,
    )
    scripted = Mount("/scripted", app=create_scripted_upstream(pace=args.pace))
    # The demo's server tool (get_time) runs here, beside the page's frontend tools.
    agent = create_app(config, tools=DEMO_TOOLS)
    return _run_agent(args, listener, agent, [scripted], "(the scripted model)", _web_demo())


def _web_demo() -> Mount | None:
    if not (WEB_DEMO_DIR / "index.html").is_file():
        print(
            f"agui-bridge: the demo page is not built ({WEB_DEMO_DIR} is missing), serving a "
            "plain index instead: run `make demo`, or `npm ci && npm run build` in web-demo/",
            file=sys.stderr,
        )
        return None
    return Mount("/", app=StaticFiles(directory=WEB_DEMO_DIR, html=True))


def _run_agent(
    args: argparse.Namespace,
    listener: socket.socket,
    app: Starlette,
    extra: list[BaseRoute],
    note: str,
    page: Mount | None,
) -> int:
    home: BaseRoute = page if page is not None else Route("/", _index)
    agent: Bridge = app.state.bridge
    if agent.config.metrics:  # where scrapers look first, as well as /agent/metrics
        extra = [Route("/metrics", agent.metrics, methods=["GET"]), *extra]
    routes: list[BaseRoute] = [*mount("/agent", app), *extra, home]
    parent = Starlette(routes=routes, lifespan=app.router.lifespan_context)
    base = f"http://{_display_host(args.host)}:{listener.getsockname()[1]}"
    config = uvicorn.Config(
        parent,
        host=args.host,
        port=listener.getsockname()[1],
        log_level=args.log_level,
        log_config=None,  # set by _configure_logging before the app was made
        timeout_graceful_shutdown=int(args.shutdown_grace) + 5,
    )
    opened = f"agui-bridge: open {base}/  (agent at POST {base}/agent) {note}"
    server = _GracefulServer(config, agent, args.shutdown_grace, opened)
    server.run(sockets=[listener])
    return 0


def _configure_logging(args: argparse.Namespace) -> None:
    """uvicorn's logging, and the bridge's loggers (its run lines among them) beside uvicorn's:
    text in uvicorn's style, or one JSON object per line for every logger. Before the app is
    made, so that what it logs while it is made is written the same way."""
    logging.config.dictConfig(_log_config(args.log_format, args.log_level))


def _log_config(log_format: str, level: str) -> dict[str, Any]:
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    if log_format == "json":
        for formatter in config["formatters"].values():
            formatter.clear()
            formatter["()"] = "bridge.serve.observe.JsonFormatter"
    config["handlers"]["agui_bridge"] = {
        "formatter": "default",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["agui_bridge"] = {
        "handlers": ["agui_bridge"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


class _GracefulServer(uvicorn.Server):
    """Starts the bridge's MCP servers before serving (one that cannot be reached raises
    ``McpStartError`` before anything is printed: one line, exit 2), then prints ``opened``.
    On SIGTERM/SIGINT: refuse new runs, let running ones finish for a grace period, then end
    them with RUN_ERROR ``shutting_down``; uvicorn then closes, and the lifespan closes the
    upstream client and the MCP servers."""

    def __init__(self, config: uvicorn.Config, bridge: Bridge, grace: float, opened: str) -> None:
        super().__init__(config)
        self._bridge = bridge
        self._grace = grace
        self._opened = opened

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        # In uvicorn's event loop, where the MCP connections' tasks live on; the lifespan's
        # start() then finds them started.
        try:
            await self._bridge.start()
        except BaseException:
            await self._bridge.aclose()  # what did start (the thread pool, say)
            raise
        print(self._opened, flush=True)
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._bridge.begin_shutdown(self._grace)
        super().handle_exit(sig, frame)


def _doctor(args: argparse.Namespace) -> int:
    if not args.upstream_url:
        print("agui-bridge: give --upstream-url or set OPENAI_BASE_URL", file=sys.stderr)
        return 2
    key = os.environ.get(args.api_key_env) or None
    report = asyncio.run(
        diagnose(args.upstream_url, model=args.model, api_key=key, api_key_env=args.api_key_env)
    )
    print(redacted_output(report, key, as_json=args.json), flush=True)
    return 0 if report["usable"] else 1


def _replay(args: argparse.Namespace) -> int:
    recording = load_recording(args.directory)
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]
    for line in replay_summary(recording, f"http://{_display_host(args.host)}:{port}"):
        print(line, flush=True)
    serve_replay(recording, listener=listener, speed=args.speed, log_level=args.log_level)
    return 0


def _scripted(args: argparse.Namespace) -> int:
    listener = _listen(args.host, args.port)
    port = listener.getsockname()[1]
    print(
        f"agui-bridge scripted upstream: http://{_display_host(args.host)}:{port}/v1 "
        f"(models: {', '.join(SCRIPTED_MODELS)})",
        flush=True,
    )
    app = create_scripted_upstream(pace=args.pace)
    config = uvicorn.Config(app, host=args.host, port=port, log_level=args.log_level)
    uvicorn.Server(config).run(sockets=[listener])
    return 0


async def _index(request: object) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><title>agui-bridge</title><h1>agui-bridge</h1>"
        "<p>The AG-UI agent is at <code>POST /agent</code>; capabilities at "
        "<code>GET /agent/capabilities</code>.</p><p>The demo page is not built: run "
        "<code>make demo</code> (or <code>npm ci &amp;&amp; npm run build</code> in "
        "<code>web-demo/</code>).</p>"
    )


def _display_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else host
