"""``agui-bridge replay DIR``: recorded runs (``serve --record DIR``) served again as an
OpenAI-compatible upstream, so a bug report reproduces anywhere with the same events.

Every recorded upstream exchange (``bridge/serve/upstream/record.py`` describes the files) is
an answer the replay server can give. An exchange is known by its endpoint: its path relative to the
recorded base URL (``/chat/completions``, ``/responses``, ``/models``; llama.cpp's ``/props``
relative to the base without its ``/v1``), so a recording made through any path prefix
(OpenRouter's ``/api/v1``) replays behind any ``--upstream-url http://host:port/<prefix>``: a
request path that ends with the endpoint matches. A record without its base URL (written by
hand) is matched by the absolute path. A request gets the recorded answer whose method, endpoint
and body match it; failing that, the next recorded answer for that method and endpoint, in the
order they were recorded (once all were given, they are given again from the first).

Each answer keeps its status, headers and read boundaries: every recorded network read is
written as one piece, at its recorded time after the request (divided by ``speed``). A body the
recorder decoded (its ``response`` line's ``decoded``: gzip, deflate) is served decoded, its
``Content-Encoding`` without those codings, so the bridge reads the same bytes. An answer
whose connection failed mid-body is cut the same way (the connection is dropped); a request that
failed before any answer (refused, timed out) gets an HTTP 502 saying so (ASGI cannot refuse a
connection).
"""

from __future__ import annotations

import base64
import json
import logging
import shlex
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bridge import __version__
from bridge.core.reasoning_tags import DEFAULT_REASONING_TAGS, KNOWN_REASONING_TAGS
from bridge.serve.redact import MASK
from bridge.serve.upstream.record import READABLE_FORMATS
from bridge.serve.upstream.recording import as_recorded, request_body

#: Response headers that describe the recorded connection, not the answer: the replay's own
#: server sets them for its connection.
_CONNECTION_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "date"}
)


@dataclass
class Exchange:
    """One recorded upstream request and its answer."""

    method: str
    path: str
    body: Any
    endpoint: str | None = None  # the path relative to the recorded base URL
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    wait: float = 0.0  # seconds from the request to the answer's head
    reads: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds after the head, …)
    decoded: list[str] = field(default_factory=list)  # content codings the reads are decoded of
    error: str | None = None  # the connection failed (before an answer when status is None)


@dataclass
class Recording:
    """Every exchange of every run in a folder, in the order they were recorded."""

    exchanges: list[Exchange]
    upstream_urls: list[str]  # the recorded runs' upstream base URLs
    runs: int
    configs: list[dict[str, Any]] = field(default_factory=list)  # each run's settings
    versions: list[str] = field(default_factory=list)  # the bridge versions that recorded

    @property
    def base_path(self) -> str:
        """The path to serve the replay under: ``/v1`` when every exchange is known by its
        endpoint (any would do), else the path of the recorded base URL."""
        if all(exchange.endpoint is not None for exchange in self.exchanges):
            return "/v1"
        paths = {urlsplit(url).path.rstrip("/") for url in self.upstream_urls}
        return paths.pop() if len(paths) == 1 else "/v1"


def load_recording(directory: str | Path) -> Recording:
    """Read every ``*.jsonl`` run record in ``directory`` (sorted by name: by time)."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of recorded runs")
    recording = Recording([], [], 0)
    for path in sorted(folder.glob("*.jsonl")):
        recording.runs += 1
        recording.exchanges += _exchanges(path, recording)
    if not recording.runs:
        raise ValueError(f"{folder} holds no recorded runs (*.jsonl)")
    return recording


def _exchanges(path: Path, recording: Recording) -> list[Exchange]:
    by_number: dict[int, Exchange] = {}
    began: dict[int, float] = {}
    head: dict[int, float] = {}
    base: str | None = None
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line") from exc
            kind, t = item.get("type"), float(item.get("t", 0.0))
            if kind == "run":
                if item.get("format") not in READABLE_FORMATS:
                    readable = " or ".join(READABLE_FORMATS)
                    raise ValueError(f"{path}: not an {readable} record: {item.get('format')!r}")
                config = item.get("config") or {}
                url = item.get("upstream_url") or config.get("upstream_url")
                if url:
                    recording.upstream_urls.append(url)
                    base = urlsplit(url).path.rstrip("/")
                if config:
                    recording.configs.append(config)
                if item.get("bridge_version"):
                    recording.versions.append(str(item["bridge_version"]))
                continue
            exchange_id = item.get("exchange")
            if kind == "request":
                url_path = urlsplit(item["url"]).path
                # A record made before attachments were kept as digests matches as one made after.
                body = as_recorded(item.get("body"))
                by_number[exchange_id] = Exchange(
                    item["method"], url_path, body, _endpoint(url_path, base)
                )
                began[exchange_id] = t
            elif exchange_id in by_number:
                exchange = by_number[exchange_id]
                if kind == "response":
                    exchange.status = int(item["status"])
                    exchange.headers = [(str(k), str(v)) for k, v in item["headers"]]
                    exchange.decoded = [str(coding) for coding in item.get("decoded") or ()]
                    exchange.wait = max(0.0, t - began[exchange_id])
                    head[exchange_id] = t
                elif kind == "read":
                    data = (
                        base64.b64decode(item["base64"])
                        if "base64" in item
                        else item["text"].encode()
                    )
                    exchange.reads.append((max(0.0, t - head.get(exchange_id, t)), data))
                elif kind in ("end", "error"):
                    exchange.error = item.get("error")
                    if kind == "error":
                        exchange.wait = max(0.0, t - began[exchange_id])
    return [by_number[n] for n in sorted(by_number)]


def _endpoint(path: str, base: str | None) -> str | None:
    """``path`` relative to the recorded base path, or to that path without its ``/v1`` (where
    servers keep their own routes: llama.cpp's ``/props``); ``None`` if neither holds it."""
    if base is None:
        return None
    for root in (base, base.removesuffix("/v1")):
        if path.startswith(root + "/"):
            return path[len(root) :]
    return None


class ReplayServer:
    """Picks the recorded answer for each request (see the module docstring)."""

    def __init__(self, recording: Recording, *, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be a positive factor, got {speed}")
        self.recording = recording
        self.speed = speed
        self._given: list[int] = [0] * len(recording.exchanges)

    def pick(self, method: str, path: str, body: Any) -> Exchange | None:
        """The answer for a request (see the module docstring), or ``None``."""
        exchanges = self.recording.exchanges
        matched = {
            i: len(exchange.endpoint or exchange.path)
            for i, exchange in enumerate(exchanges)
            if exchange.method == method
            and (
                path.endswith(exchange.endpoint)
                if exchange.endpoint is not None
                else exchange.path == path
            )
        }
        if not matched:
            return None
        # The longest endpoint that matches: /chat/completions, not /completions.
        longest = max(matched.values())
        candidates = [i for i, length in matched.items() if length == longest]
        same = [i for i in candidates if self.recording.exchanges[i].body == body]
        if same:
            chosen = min(same, key=lambda i: self._given[i])  # the first not given yet
        else:
            fewest = min(self._given[i] for i in candidates)
            chosen = next(i for i in candidates if self._given[i] == fewest)
        self._given[chosen] += 1
        return self.recording.exchanges[chosen]

    async def answer(self, request: Request) -> Response:
        body = request_body(await request.body())
        exchange = self.pick(request.method, request.url.path, body)
        if exchange is None:
            message = f"no recorded answer for {request.method} {request.url.path}"
            return JSONResponse(
                {"error": {"message": message, "type": "not_found_error"}}, status_code=404
            )
        return _Replayed(exchange, self.speed)


class _Replayed(Response):
    """One recorded answer, written read by read at the recorded pace."""

    def __init__(self, exchange: Exchange, speed: float) -> None:
        self._exchange = exchange
        self._speed = speed
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        exchange = self._exchange
        await anyio.sleep(exchange.wait / self._speed)
        if exchange.status is None:
            # ASGI cannot refuse a connection it was handed: say what the recording saw.
            message = f"recorded: the upstream request failed before any answer ({exchange.error})"
            error = {"error": {"message": message, "type": "replayed_connection_error"}}
            await JSONResponse(error, status_code=502)(scope, receive, send)
            return
        headers = _answer_headers(exchange)
        await send({"type": "http.response.start", "status": exchange.status, "headers": headers})
        clock = anyio.current_time()
        for offset, data in exchange.reads:
            delay = clock + offset / self._speed - anyio.current_time()
            if delay > 0:
                await anyio.sleep(delay)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        if exchange.error is not None:
            # The recorded connection failed mid-answer: so does this one (no end of body).
            raise _RecordedFailure(exchange.error)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _answer_headers(exchange: Exchange) -> list[tuple[bytes, bytes]]:
    """The recorded headers less the connection's, and less the content codings the recorded
    reads are already decoded of."""
    headers: list[tuple[bytes, bytes]] = []
    for name, value in exchange.headers:
        lowered = name.lower()
        if lowered in _CONNECTION_HEADERS:
            continue
        if lowered == "content-encoding" and exchange.decoded:
            codings = [coding.strip() for coding in value.split(",") if coding.strip()]
            value = ", ".join(c for c in codings if c.lower() not in exchange.decoded)
            if not value:
                continue
        headers.append((lowered.encode("latin-1"), value.encode("latin-1")))
    return headers


class _RecordedFailure(Exception):
    """Raised to make the server drop the connection, as the recorded upstream's did."""


def _not_a_recorded_failure(record: logging.LogRecord) -> bool:
    """uvicorn logs the exception that drops a connection; a replayed cut is no error of ours."""
    return not (record.exc_info and isinstance(record.exc_info[1], _RecordedFailure))


def create_replay_app(recording: Recording, *, speed: float = 1.0) -> Starlette:
    """The replay server as an ASGI app: every method and path, answered from ``recording``."""
    server = ReplayServer(recording, speed=speed)
    uvicorn_errors = logging.getLogger("uvicorn.error")
    if _not_a_recorded_failure not in uvicorn_errors.filters:
        uvicorn_errors.addFilter(_not_a_recorded_failure)
    methods = sorted({exchange.method for exchange in recording.exchanges} | {"GET", "POST"})
    app = Starlette(routes=[Route("/{path:path}", server.answer, methods=methods)])
    app.state.replay = server
    return app


def replay_summary(recording: Recording, base_url: str) -> Iterable[str]:
    """What the CLI prints: where the replay listens and the ``serve`` line to point a bridge
    at it (``serve_command``)."""
    counts: dict[str, int] = {}
    for exchange in recording.exchanges:
        key = f"{exchange.method} {exchange.endpoint or exchange.path}"
        counts[key] = counts.get(key, 0) + 1
    upstream_url = f"{base_url}{recording.base_path}"
    versions = ", ".join(sorted(set(recording.versions))) or "a version that did not say"
    yield (
        f"agui-bridge replay: {len(recording.exchanges)} recorded answers from "
        f"{recording.runs} runs at {upstream_url}"
    )
    yield f"  recorded by agui-bridge {versions}; this is {__version__}"
    for key, count in counts.items():
        yield f"  {key}: {count}"
    if len({json.dumps(config, sort_keys=True) for config in recording.configs}) > 1:
        yield "  the runs were recorded with different settings: this line has the first's"
    command = serve_command(recording, upstream_url)
    yield f"point a bridge at it: {shlex.join(command)}"
    if any(MASK in word for word in command):
        yield f"  (the record keeps no credentials: put yours where it says {MASK})"


def serve_command(recording: Recording, upstream_url: str) -> list[str]:
    """``agui-bridge serve`` pointed at ``upstream_url``, with the first recorded run's model,
    the other models the runs asked for (``--models``), and the settings that shape what the
    bridge asks the upstream and how it reads the answers."""
    config = recording.configs[0] if recording.configs else {}
    asked = dict.fromkeys(
        str(e.body["model"])
        for e in recording.exchanges
        if isinstance(e.body, dict) and e.body.get("model")
    )
    model = str(config.get("model") or next(iter(asked), "MODEL"))
    command = ["agui-bridge", "serve", "--upstream-url", upstream_url, "--model", model]
    others = [name for name in asked if name != model]
    if others:
        command += ["--models", ",".join(others)]
    return command + _serve_flags(config)


#: Recorded settings that are a flag with their value, and the value the flag defaults to.
_VALUED = {
    "upstream_api": ("--upstream-api", "chat"),
    "reasoning_history": ("--reasoning-history", "auto"),
    "reasoning_scope": ("--reasoning-scope", "auto"),
    "unsupported_parts": ("--unsupported-parts", "error"),
    "agui_protocol": ("--agui-protocol", "auto"),
}
#: Recorded settings that are a switch, and the value that turns it on.
_SWITCHES = {
    "include_state": ("--include-state", True),
    "responses_store": ("--responses-store", True),
    "include_usage": ("--no-usage", False),
}


def _serve_flags(config: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for key, (flag, default) in _VALUED.items():
        if config.get(key, default) != default:
            flags += [flag, str(config[key])]
    for key, (flag, on) in _SWITCHES.items():
        if config.get(key, not on) == on:
            flags.append(flag)
    if config.get("upstream_stream") is False:
        flags += ["--upstream-stream", "off"]
    translate = config.get("translate") or {}
    tags = [tuple(pair) for pair in translate.get("reasoning_tags") or ()]
    if tags and tags != list(DEFAULT_REASONING_TAGS):
        names = {pair: name for name, pair in KNOWN_REASONING_TAGS.items()}
        flags += ["--reasoning-tags", ",".join(names.get(p) or "...".join(p) for p in tags)]
    if translate.get("starts_in_reasoning"):
        flags.append("--starts-in-reasoning")
    if translate.get("text_tool_format", "auto") != "auto":
        flags += ["--text-tool-format", str(translate["text_tool_format"])]
    for model, options in (config.get("translate_overrides") or {}).items():
        if isinstance(options, dict) and options.get("starts_in_reasoning"):
            flags += ["--starts-in-reasoning-model", str(model)]
    for name, target in (config.get("mcp_servers") or {}).items():
        flags += ["--mcp", f"{name}={target}"]
    return flags


def serve_replay(
    recording: Recording, *, listener: socket.socket, speed: float, log_level: str
) -> None:
    """Run the replay server with uvicorn on ``listener`` until it is stopped (Ctrl-C)."""
    host, port = listener.getsockname()[:2]
    config = uvicorn.Config(
        create_replay_app(recording, speed=speed),
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,  # the recorded answers carry their own
        date_header=False,
    )
    uvicorn.Server(config).run(sockets=[listener])
