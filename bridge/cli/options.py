"""The CLI's flags for reading the model's output, the history and the upstream (``cli.py``)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bridge.config import MAX_INSTRUCTIONS_BYTES, PROVIDERS
from bridge.core.reasoning_tags import KNOWN_REASONING_TAGS
from bridge.core.text_tools.filter import FORMAT_ALIASES, TEXT_TOOL_FORMATS


def add_translate_options(parser: argparse.ArgumentParser) -> None:
    """The flags of ``serve`` and ``demo`` that set how the model's output is read, what goes back
    upstream, and how the upstream is talked to."""
    agent = parser.add_argument_group("the agent")
    agent.add_argument(
        "--instructions",
        metavar="TEXT|@FILE",
        help="the operator's system message, first in every request upstream and the same "
        "bytes in every run (the server's prompt cache keeps it); @FILE reads it from a file "
        f"(UTF-8, at most {MAX_INSTRUCTIONS_BYTES // 1024} KiB)",
    )
    agent.add_argument(
        "--client-system",
        choices=["follow", "refuse"],
        default="follow",
        help="the client's own system and developer messages: follow the instructions "
        "(default) or refuse the run (HTTP 400 client_system_refused)",
    )
    group = parser.add_argument_group("reading the model's output and sending history")
    group.add_argument(
        "--reasoning-tags",
        default="think",
        help="comma-separated reasoning tag pairs looked for in content: "
        f"{', '.join(KNOWN_REASONING_TAGS)}, or OPEN...CLOSE (default: think)",
    )
    group.add_argument(
        "--text-tool-format",
        choices=["auto", "none", *TEXT_TOOL_FORMATS, *FORMAT_ALIASES],
        default="auto",
        metavar="FORMAT",
        help="tool calls the model writes as text in content: one of "
        f"{', '.join(TEXT_TOOL_FORMATS)} (vLLM's parser names such as llama3_json, "
        "qwen3_xml, glm4_moe or openai are accepted too); auto reads every format, only when "
        "the request offered tools, and harmony's reasoning channels always (default); none "
        "never",
    )
    group.add_argument(
        "--starts-in-reasoning",
        action="store_true",
        help="the chat template opens the reasoning tag in the prompt: content starts inside "
        "reasoning and only the closing tag arrives",
    )
    group.add_argument(
        "--starts-in-reasoning-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="like --starts-in-reasoning, for one model only (repeatable)",
    )
    group.add_argument(
        "--reasoning-history",
        choices=["auto", "field", "tags", "drop"],
        default="auto",
        help="how earlier reasoning goes back upstream: as reasoning_content (field; auto), "
        "as <think> text in content (tags), or not at all (drop)",
    )
    group.add_argument(
        "--reasoning-scope",
        choices=["auto", "current-turn", "all", "last"],
        default="auto",
        help="which assistant messages carry their reasoning back: those since the last user "
        "message (current-turn), all, or the last one; auto (default): all when llama.cpp's "
        "/props says its chat template preserves reasoning, else current-turn",
    )
    group.add_argument(
        "--unsupported-parts",
        choices=["error", "note"],
        default="error",
        help="a user's attachment the upstream says it cannot take (llama.cpp's /props: no "
        "--mmproj, no images): error (default) ends the run naming it and what would take it; "
        "note sends the model a short note in its place ('[report.pdf, application/pdf, "
        "120 KB: this model cannot read it]') so the chat goes on",
    )
    group.add_argument(
        "--include-state", action="store_true", help="send the run's state to the model as context"
    )
    group.add_argument(
        "--shared-state",
        action="store_true",
        help="the model edits the run's state (a JSON object) with an update_state tool (JSON "
        "Patch); the client follows by STATE_DELTA and STATE_SNAPSHOT",
    )
    group.add_argument(
        "--state-schema",
        metavar="FILE",
        help="a JSON Schema (a file) every state the model makes must keep to",
    )
    group.add_argument(
        "--max-state-bytes",
        type=int,
        default=1_000_000,
        metavar="N",
        help="the largest state (its JSON) a patch may make (default %(default)s)",
    )
    group.add_argument(
        "--predict-state",
        action="append",
        default=[],
        metavar="KEY=TOOL.ARGUMENT",
        help="stream a tool's argument into a state key while the model writes it (a CUSTOM "
        "PredictState event at each run's start; repeatable)",
    )
    group.add_argument(
        "--upstream-api",
        choices=["chat", "responses"],
        default="chat",
        help="the upstream's API: chat (/v1/chat/completions, default) or responses "
        "(/v1/responses: reasoning summaries, encrypted reasoning carried across turns)",
    )
    group.add_argument(
        "--responses-store",
        action="store_true",
        help="with --upstream-api responses: let the upstream store responses (default: "
        "store false, stateless; the encrypted reasoning goes back with the history)",
    )
    group.add_argument(
        "--provider",
        choices=list(PROVIDERS),
        default="auto",
        metavar="NAME",
        help="whose rules the requests follow: what reasoning goes back and in which field, "
        f"what is left out ({', '.join(PROVIDERS)}); auto (default) by the upstream URL's "
        "host, else generic",
    )
    group.add_argument(
        "--upstream-body",
        metavar="JSON",
        help="the operator's own fields merged into every request upstream, a JSON object (a "
        "TOML table in the config file): a provider's switches, say '{\"enable_thinking\": "
        "true}'; the fields the bridge makes (model, messages, stream, tools…) are refused",
    )
    group.add_argument(
        "--upstream-stream",
        choices=["on", "off"],
        default="on",
        help="ask the upstream to stream (default on); off for servers whose streaming breaks "
        "with tools: whole answers go through the same translation",
    )
    group.add_argument(
        "--upstream-transport",
        choices=["aiohttp", "httpx"],
        default="aiohttp",
        help="the HTTP client under httpx's API: aiohttp (default; about a third of the CPU per "
        "upstream read) or httpx's own transport",
    )
    group.add_argument(
        "--no-usage",
        action="store_true",
        help="do not ask for stream_options.include_usage (for servers that reject it)",
    )
    group.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        help="seconds to connect upstream (default 10)",
    )
    group.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="seconds of upstream silence allowed before and between chunks (default 300)",
    )
    group.add_argument(
        "--agui-protocol",
        choices=["auto", "1.0", "0.0"],
        default="auto",
        help="the AG-UI client line the events are shaped for: auto (default) reads each "
        "run's protocolVersion (@ag-ui/client 1.x sends 1.0; 0.0.x clients such as "
        "CopilotKit 1.74's send none); 1.0 or 0.0 pins it",
    )
    tools = parser.add_argument_group("server-side tools (run by the bridge itself)")
    tools.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=COMMAND|URL",
        help="an MCP server whose tools the bridge runs, offered to the model as NAME__tool: "
        "a command speaking MCP on stdio (NAME='python server.py --flag'; python is the "
        "bridge's own interpreter) or a streamable HTTP URL (NAME=http://host:port/mcp); "
        "repeatable; needs pip install 'agui-bridge[mcp]'",
    )
    tools.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="PACKAGE.MODULE",
        help="a Python module whose functions named in its __all__ the bridge runs as server "
        "tools (@requires_approval kept); imported from the current directory or the "
        "Python path; repeatable",
    )
    tools.add_argument(
        "--mcp-optional",
        action="append",
        default=[],
        metavar="NAME",
        help="serve without this --mcp server when it cannot be reached at start (logged; "
        "/health says degraded); by default such a server stops the start (repeatable)",
    )
    tools.add_argument(
        "--tool-timeout",
        type=float,
        default=30.0,
        help="seconds a server tool may take before the model is told it timed out (default 30)",
    )
    tools.add_argument(
        "--max-tool-rounds",
        type=int,
        default=16,
        help="rounds of server tool calls in one run; past them the run ends with RUN_ERROR "
        "tool_rounds_exceeded (default 16)",
    )
    tools.add_argument(
        "--max-parallel-tools",
        type=int,
        default=16,
        metavar="N",
        help="server tool calls of one run that run at once; the model's further calls wait "
        "their turn (default 16)",
    )
    tools.add_argument(
        "--tool-threads",
        type=int,
        default=8,
        metavar="N",
        help="threads that run sync Python tools, shared by all runs (default 8)",
    )
    tools.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="PATTERN",
        help="server tools that wait for a person's approval before they run, by a "
        "shell-style pattern on their name ('files__write_*', 'mail__*', '*'): the run ends "
        "with an AG-UI interrupt and the next run's resume answers it (repeatable)",
    )
    tools.add_argument(
        "--ask-user",
        action="store_true",
        help="offer the model an ask_user tool: it asks the person a question (optionally "
        "with a JSON Schema for the answer), the run ends with an input_required interrupt, "
        "and the next run's resume answers it",
    )
    tools.add_argument(
        "--secret-env",
        default="AGUI_BRIDGE_SECRET",
        type=variable_name,
        metavar="VAR",
        help="environment variable holding the key that signs interrupts (at least 16 "
        "bytes; bridges with the same key accept each other's interrupts; default: "
        "AGUI_BRIDGE_SECRET; unset: one per process, lost at a restart)",
    )
    tools.add_argument(
        "--approval-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="seconds a person has to answer an approval (its expiresAt; default 900)",
    )
    tools.add_argument(
        "--approval-store",
        default="memory",
        metavar="URL",
        help="where used approvals are kept, so that each runs its call once: memory (this "
        "process; default), redis://HOST:PORT/DB or valkey://… (replicas), file:///FOLDER "
        "(processes of one machine; serve --workers makes one)",
    )
    limits = parser.add_argument_group("reliability and security")
    for flag, kind, default, text in _LIMIT_FLAGS:
        limits.add_argument(flag, type=kind, default=default, help=f"{text} (default %(default)s)")
    limits.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the bridge cross-origin (repeatable; "
        "CORS is closed by default; * allows any)",
    )
    limits.add_argument(
        "--auth-token",
        help="require Authorization: Bearer TOKEN on every request "
        "(default: $AGUI_BRIDGE_AUTH_TOKEN; prefer the variable, a flag shows in `ps`)",
    )

    seen = parser.add_argument_group('observability (README "Observability")')
    seen.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at GET /metrics (behind --auth-token, if set)",
    )
    seen.add_argument(
        "--metrics-public",
        action="store_true",
        help="serve /metrics without --auth-token (a scraper inside your network)",
    )
    seen.add_argument(
        "--otel",
        action="store_true",
        help="trace runs with OpenTelemetry (pip install 'agui-bridge[otel]'); on by itself "
        "when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER is set; the exporter follows "
        "the OTEL_* variables",
    )
    seen.add_argument(
        "--otel-content",
        action="store_true",
        help="put message content (prompts, answers, tool arguments and results) on the spans",
    )
    seen.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="the log's lines, one per run among them: text or one JSON object each (default text)",
    )


#: The variables by which the OpenTelemetry SDK's own setup turns tracing on.
OTEL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)


def otel_requested(flag: bool, environ: Mapping[str, str]) -> bool | None:
    """Whether tracing is asked for: ``True`` by ``--otel``, ``None`` by the environment
    alone (the SDK's variables; ``OTEL_TRACES_EXPORTER=none`` and ``OTEL_SDK_DISABLED=true``
    say no), ``False`` when not at all."""
    if flag:
        return True
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return None if any(environ.get(name, "").strip() for name in OTEL_VARIABLES) else False


_LIMIT_FLAGS: list[tuple[str, type, float, str]] = [
    ("--retries", int, 2, "retries before the answer begins (connection errors, 429, 502-504)"),
    (
        "--retry-after-cap",
        float,
        10.0,
        "longest Retry-After waited out, in seconds; longer fails at once, saying when",
    ),
    (
        "--keepalive-interval",
        float,
        15.0,
        "seconds of upstream silence before an SSE keep-alive comment is sent",
    ),
    ("--max-body-bytes", int, 16 * 1024 * 1024, "largest request body accepted, else HTTP 413"),
    ("--max-messages", int, 5000, "most messages in one run's history, else HTTP 413"),
    (
        "--max-attachment-bytes",
        int,
        10 * 1024 * 1024,
        "largest attachment (inline bytes, decoded) a message may carry, else HTTP 413",
    ),
    (
        "--max-request-attachment-bytes",
        int,
        12 * 1024 * 1024,
        "most attachment bytes in one request, every message's together, else HTTP 413",
    ),
    ("--max-line-bytes", int, 4 * 1024 * 1024, "longest upstream SSE line accepted"),
    ("--max-concurrent-runs", int, 512, "runs served at once; more get HTTP 503 + Retry-After"),
    (
        "--shutdown-grace",
        float,
        10.0,
        "on SIGTERM, seconds running runs get before they end with RUN_ERROR shutting_down",
    ),
]


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def variable_name(value: str) -> str:
    """``--api-key-env VAR`` and ``--secret-env VAR``: an environment variable's name. What is
    not one is refused without being shown: it is most likely the key itself."""
    if not _VARIABLE_NAME.match(value):
        raise argparse.ArgumentTypeError(
            "wants the name of an environment variable (letters, digits and _), which this is "
            "not; it is not shown here, as it may be the key itself"
        )
    return value


def add_key_variable(parser: argparse.ArgumentParser, *, text: str) -> None:
    """``--api-key-env VAR``, and ``--api-key``, which is refused: a key on the command line
    is visible to every user of the machine (``ps``, ``/proc/PID/cmdline``)."""
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        type=variable_name,
        metavar="VAR",
        help=f"{text} (there is no --api-key: a key on the command line is visible to every "
        "user of the machine)",
    )
    parser.add_argument("--api-key", nargs="?", action=_NoKeyFlag, help=argparse.SUPPRESS)


class _NoKeyFlag(argparse.Action):
    """``--api-key KEY`` stops the command, naming the way to give a key and not the key."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            "there is no --api-key: the key is read from the environment variable that "
            "--api-key-env names (default OPENAI_API_KEY), never from a command line, which "
            "every user of the machine can read; the value given is not shown"
        )


def mcp_servers(values: list[str]) -> dict[str, str]:
    """``--mcp NAME=COMMAND|URL`` flags → ``BridgeConfig.mcp_servers``."""
    servers: dict[str, str] = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or not target.strip():
            raise ValueError(f"--mcp wants NAME=COMMAND or NAME=URL, not {value!r}")
        if name in servers:
            raise ValueError(f"--mcp names {name!r} twice")
        servers[name] = target
    return servers
