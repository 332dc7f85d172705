"""The ``agui-bridge`` command's flags: one ``argparse`` tree (``build_parser``), each command
naming itself in ``args.command``. No flag is taken for a prefix of its name (argparse's
default): ``--api-key sk-…`` read as ``--api-key-env sk-…`` sent no key and named the key as a
variable; and arguments not understood are named without their values (``parse``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from bridge import __version__
from bridge.cli.demo import SCRIPTED_MODELS
from bridge.cli.options import add_key_variable, add_translate_options
from bridge.cli.threads import add_thread_options


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that takes no prefix of a flag for the flag; its subparsers are
    ``Parser`` too (argparse makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, but arguments it does not know are named by their flags
    alone: the value after a mistyped ``--api-kye`` is a key, and an error is printed."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        flags = [word.split("=", 1)[0] for word in unknown if word.startswith("-")]
        values = len(unknown) - len(flags)
        shown = " ".join(flags)
        if values:
            shown = f"{shown} ({values} value(s) not shown)".lstrip()
        parser.error(f"unrecognized arguments: {shown}")
    return args


def build_parser(*, given_only: bool = False) -> argparse.ArgumentParser:
    """``given_only``: ``serve`` and ``config`` set only the flags given (``given_parser``)."""
    parser = Parser(
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
    add_serve_flags(serve)
    serve.set_defaults(command="serve")
    if given_only:
        given_parser(serve)

    shown = commands.add_parser(
        "config",
        help="print serve's effective settings and where each came from",
        description="Print the settings `agui-bridge serve` would run with these flags, the "
        "AGUI_BRIDGE_* variables and the --config file, secrets masked, each with where it "
        "came from (a flag, a variable, FILE:LINE, the default); exit status 2 when serve "
        "would refuse them.",
    )
    add_serve_flags(shown)
    shown.set_defaults(command="config")
    if given_only:
        given_parser(shown)

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
    add_key_variable(
        doctor, text="environment variable holding the upstream API key (default: OPENAI_API_KEY)"
    )
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.set_defaults(command="doctor")

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
    replay.set_defaults(command="replay")

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
    add_thread_options(demo, default="memory")
    demo.set_defaults(command="demo")

    scripted = commands.add_parser(
        "scripted-upstream",
        help="run only the scripted OpenAI-compatible model server",
        description=f"Serve the scripted model alone; models: {', '.join(SCRIPTED_MODELS)}.",
    )
    _add_listen(scripted, port=8001)
    scripted.add_argument(
        "--pace", type=float, default=0.0, help="seconds between streamed chunks (default 0)"
    )
    scripted.set_defaults(command="scripted-upstream")
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


def given_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` (``serve``'s flags) made to set only the flags it is given: no defaults, none
    required, so that ``bridge.cli.layers`` tells a flag given from one not."""
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            action.default = argparse.SUPPRESS
            action.required = False
    return parser


def serve_parser() -> argparse.ArgumentParser:
    """``serve``'s flags alone (``bridge.cli.settings.config_from_env`` reads them from the
    environment)."""
    parser = Parser(prog="agui-bridge serve")
    add_serve_flags(parser)
    return parser


def add_serve_flags(serve: argparse.ArgumentParser) -> None:
    """``serve``'s flags (and ``config``'s): each is also a variable and a key of the file
    (``bridge.cli.layers``); a flag's default is the default, never read from the
    environment here."""
    serve.add_argument(
        "--config",
        metavar="FILE",
        help='a TOML file of settings, a key for each flag (README "The configuration '
        'file"); flags and AGUI_BRIDGE_* variables win over it',
    )
    serve.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective settings, secrets masked, each with where it came from, "
        "and exit (as `agui-bridge config`)",
    )
    serve.add_argument(
        "--upstream-url",
        help="base URL of the OpenAI-compatible API, including /v1 "
        "(default: $OPENAI_BASE_URL), e.g. http://127.0.0.1:8080/v1",
    )
    serve.add_argument("--model", help="model to ask for when the client names none (required)")
    serve.add_argument(
        "--models",
        default="",
        help="comma-separated further models a client may pick with forwardedProps.model "
        "(and the demo page's picker); '*' admits every model the upstream lists at /v1/models",
    )
    add_key_variable(
        serve,
        text="environment variable holding the upstream API key, sent as a Bearer token "
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
    add_thread_options(serve)
    serve.add_argument(
        "--workers",
        default="1",
        metavar="N",
        help="processes serving the one port, each with this configuration (default 1; "
        "'auto': one per core); a worker that dies is replaced, SIGTERM drains them all",
    )
