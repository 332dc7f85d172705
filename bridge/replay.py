"""``agui-bridge replay DIR``: recorded runs (``serve --record DIR``) served again as an
OpenAI-compatible upstream, so a bug report reproduces anywhere with the same events.

Every recorded upstream exchange (``bridge/serve/record.py`` describes the files) is an answer
the replay server can give. A request gets the recorded answer whose method, path and body match
it; failing that, the next recorded answer for that method and path, in the order they were
recorded (once all were given, they are given again from the first). Each answer keeps its
status, headers and read boundaries: every recorded network read is written as one piece, at
its recorded time after the request (divided by ``speed``). An answer whose connection failed
mid-body is cut the same way (the connection is dropped); a request that failed before any
answer (refused, timed out) gets an HTTP 502 saying so (ASGI cannot refuse a connection).
"""

from __future__ import annotations

import base64
import json
import logging
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

from bridge.serve.record import FORMAT, request_body

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
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    wait: float = 0.0  # seconds from the request to the answer's head
    reads: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds after the head, …)
    error: str | None = None  # the connection failed (before an answer when status is None)


@dataclass
class Recording:
    """Every exchange of every run in a folder, in the order they were recorded."""

    exchanges: list[Exchange]
    upstream_urls: list[str]  # the recorded runs' upstream base URLs (config.upstream_url)
    runs: int

    @property
    def base_path(self) -> str:
        """The path of the recorded upstream base URL (``/v1`` for most servers)."""
        paths = {urlsplit(url).path.rstrip("/") for url in self.upstream_urls}
        return paths.pop() if len(paths) == 1 else "/v1"


def load_recording(directory: str | Path) -> Recording:
    """Read every ``*.jsonl`` run record in ``directory`` (sorted by name: by time)."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of recorded runs")
    exchanges: list[Exchange] = []
    urls: list[str] = []
    runs = 0
    for path in sorted(folder.glob("*.jsonl")):
        runs += 1
        exchanges += _exchanges(path, urls)
    if not runs:
        raise ValueError(f"{folder} holds no recorded runs (*.jsonl)")
    return Recording(exchanges, urls, runs)


def _exchanges(path: Path, urls: list[str]) -> list[Exchange]:
    by_number: dict[int, Exchange] = {}
    began: dict[int, float] = {}
    head: dict[int, float] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line") from exc
            kind, t = item.get("type"), float(item.get("t", 0.0))
            if kind == "run":
                if item.get("format") != FORMAT:
                    raise ValueError(f"{path}: not an {FORMAT} record: {item.get('format')!r}")
                url = (item.get("config") or {}).get("upstream_url")
                if url:
                    urls.append(url)
                continue
            exchange_id = item.get("exchange")
            if kind == "request":
                url = urlsplit(item["url"])
                by_number[exchange_id] = Exchange(item["method"], url.path, item.get("body"))
                began[exchange_id] = t
            elif exchange_id in by_number:
                exchange = by_number[exchange_id]
                if kind == "response":
                    exchange.status = int(item["status"])
                    exchange.headers = [(str(k), str(v)) for k, v in item["headers"]]
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


class ReplayServer:
    """Picks the recorded answer for each request (see the module docstring)."""

    def __init__(self, recording: Recording, *, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be a positive factor, got {speed}")
        self.recording = recording
        self.speed = speed
        self._given: list[int] = [0] * len(recording.exchanges)

    def pick(self, method: str, path: str, body: Any) -> Exchange | None:
        candidates = [
            i
            for i, exchange in enumerate(self.recording.exchanges)
            if exchange.method == method and exchange.path == path
        ]
        if not candidates:
            return None
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
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in exchange.headers
            if name.lower() not in _CONNECTION_HEADERS
        ]
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
    """What the CLI prints: where the replay listens and how to point a bridge at it."""
    counts: dict[str, int] = {}
    for exchange in recording.exchanges:
        key = f"{exchange.method} {exchange.path}"
        counts[key] = counts.get(key, 0) + 1
    yield (
        f"agui-bridge replay: {len(recording.exchanges)} recorded answers from "
        f"{recording.runs} runs at {base_url}{recording.base_path}"
    )
    for key, count in counts.items():
        yield f"  {key}: {count}"
    yield f"point a bridge at it: agui-bridge serve --upstream-url {base_url}{recording.base_path}"


def serve_replay(
    recording: Recording, *, host: str, port: int, speed: float, log_level: str
) -> None:
    """Run the replay server with uvicorn until it is stopped (Ctrl-C)."""
    config = uvicorn.Config(
        create_replay_app(recording, speed=speed),
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,  # the recorded answers carry their own
        date_header=False,
    )
    uvicorn.Server(config).run()
