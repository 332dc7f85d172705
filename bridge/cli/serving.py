"""Serving the bridge from the command: the listening socket (bound before anything is
printed), the log's form, the app's routes (the agent at ``/agent``, the page at ``/``) and the
server that drains runs on SIGTERM."""

from __future__ import annotations

import argparse
import copy
import ctypes
import ctypes.util
import errno
import gc
import logging
import logging.config
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
import uvicorn.logging
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Lifespan

import bridge
from bridge.core.errors import InvalidRunInputError
from bridge.serve.http.app import mount
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.scrape import scrape
from bridge.serve.observe import JsonFormatter

#: The built demo page, inside the package so that the wheel carries it (``make demo`` or
#: ``npm run build`` in web-demo/ writes it in a checkout).
WEB_DEMO_DIR = Path(bridge.__file__).resolve().parent / "web"


class CannotListen(Exception):
    """The address to listen on cannot be had (in use, not this machine's, not allowed)."""


def listen(host: str, port: int) -> socket.socket:
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


def web_demo() -> Mount | None:
    if not (WEB_DEMO_DIR / "index.html").is_file():
        print(
            f"agui-bridge: the demo page is not built ({WEB_DEMO_DIR} is missing), serving a "
            "plain index instead: run `make demo`, or `npm ci && npm run build` in web-demo/",
            file=sys.stderr,
        )
        return None
    return Mount("/", app=StaticFiles(directory=WEB_DEMO_DIR, html=True))


def serve_app(
    args: argparse.Namespace,
    listener: socket.socket,
    apps: Sequence[tuple[str, Starlette]],
    extra: list[BaseRoute],
    note: str,
    page: Mount | None,
) -> int:
    """Serve each of ``apps`` at its path (and ``extra`` routes, the page at ``/``) on
    ``listener``, printing the line that says where once the bridge has started."""
    opened = opened_line(args, listener, [path for path, _ in apps], note)
    server_for(args, listener, apps, extra, page, opened=opened).run(sockets=[listener])
    return 0


#: glibc's ``mallopt`` parameter: the size from which an allocation is a mapping of its own.
_M_MMAP_THRESHOLD = -3


def return_big_allocations() -> None:
    """Give the memory of each big allocation (1 MiB or more: a body, a thread, a snapshot of
    megabytes) back to the system as it is freed. glibc raises that threshold as big blocks are
    freed (up to 32 MiB), and then keeps their memory for reuse: forty 6 MB threads kept within a
    64 MiB budget grew a bridge by 258 MiB, 149 MiB with it pinned (``tests/threads/
    test_threads_budget.py``). Nothing on another C library."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(_M_MMAP_THRESHOLD, 1024 * 1024)
    except OSError:  # no C library to load: nothing to tune
        return


def settle_the_collector() -> None:
    """Keep what the process is made of at start (its modules, schemas, agents: some 70,000
    objects) out of the garbage collector's full passes: each pass walked them all and held
    the event loop some 50 ms while forty hydrates came at once (``benchmarks/
    hydrate_stall.py``). Done once the apps have started, in ``serve``'s own process only; an
    app that mounts the bridge tunes its own collector."""
    gc.collect()
    gc.freeze()


def opened_line(
    args: argparse.Namespace, listener: socket.socket, paths: Sequence[str], note: str
) -> str:
    """The line that says where the bridge serves, once it does."""
    base = f"http://{display_host(args.host)}:{listener.getsockname()[1]}"
    where = ", ".join(f"{base}{path}" for path in paths)
    agents = "agent" if len(paths) == 1 else "agents"
    return f"agui-bridge: open {base}/  ({agents} at POST {where}) {note}"


def server_for(
    args: argparse.Namespace,
    listener: socket.socket,
    apps: Sequence[tuple[str, Starlette]],
    extra: list[BaseRoute],
    page: Mount | None,
    *,
    opened: str | None = None,
    started: Callable[[], None] | None = None,
) -> GracefulServer:
    """The server of one process: each agent at its path (``/metrics`` at the root too, with
    ``--metrics``), ``GET /agents`` (which the page reads), ``extra``, the page or a plain
    index at ``/``."""
    return_big_allocations()
    home: BaseRoute = page if page is not None else Route("/", _index)
    bridges: list[Bridge] = [app.state.bridge for _, app in apps]
    metered = [agent for agent in bridges if agent.config.metrics]
    if metered:  # where scrapers look first, as well as /agent/metrics
        extra = [Route("/metrics", partial(scrape, metered[0]), methods=["GET"]), *extra]
    routes: list[BaseRoute] = [route for path, app in apps for route in mount(path, app)]
    listed = Route("/agents", partial(_agents, apps), methods=["GET"])
    parent = Starlette(routes=[*routes, listed, *extra, home], lifespan=_lifespans(apps))
    config = uvicorn.Config(
        parent,
        host=args.host,
        port=listener.getsockname()[1],
        log_level=args.log_level,
        log_config=None,  # set by configure_logging before the app was made
        timeout_graceful_shutdown=int(args.shutdown_grace) + 5,
    )
    return GracefulServer(config, bridges, args.shutdown_grace, opened=opened, started=started)


def _lifespans(apps: Sequence[tuple[str, Starlette]]) -> Lifespan[Starlette]:
    """Every app's lifespan, entered in order and left in reverse."""

    @asynccontextmanager
    async def lifespan(parent: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for _, app in apps:
                await stack.enter_async_context(app.router.lifespan_context(app))
            settle_the_collector()
            yield

    return lifespan


def configure_logging(args: argparse.Namespace) -> None:
    """uvicorn's logging, and the bridge's loggers (its run lines among them) beside uvicorn's:
    text in uvicorn's style, or one JSON object per line for every logger. Before the app is
    made, so that what it logs while it is made is written the same way."""
    logging.config.dictConfig(_log_config(args.log_format, args.log_level))


def log_to_stderr(log_format: str) -> None:
    """The bridge's loggers (its run lines among them) to stderr, at INFO, in uvicorn's style
    or as JSON, unless something set them up already (an app in another server)."""
    family = logging.getLogger("agui_bridge")
    if family.level == logging.NOTSET:
        family.setLevel(logging.INFO)
    if family.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(uvicorn.logging.DefaultFormatter("%(levelprefix)s %(message)s"))
    family.addHandler(handler)


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
    # Propagating: the root has no handler of its own here (a test's capture may add one).
    config["loggers"]["agui_bridge"] = {"handlers": ["agui_bridge"], "level": level.upper()}
    return config


class GracefulServer(uvicorn.Server):
    """Starts the bridge's MCP servers before serving (one that cannot be reached raises
    ``McpStartError`` before anything is printed: one line, exit 2), then prints ``opened``.
    On SIGTERM/SIGINT: refuse new runs, let running ones finish for a grace period, then end
    them with RUN_ERROR ``shutting_down``; uvicorn then closes, and the lifespan closes the
    upstream client and the MCP servers."""

    def __init__(
        self,
        config: uvicorn.Config,
        bridges: Sequence[Bridge],
        grace: float,
        *,
        opened: str | None = None,
        started: Callable[[], None] | None = None,
    ) -> None:
        """``opened``: the line printed once the bridge has started (none for a worker, whose
        parent prints it); ``started``: called then."""
        super().__init__(config)
        self._bridges = bridges
        self._grace = grace
        self._opened = opened
        self._started = started

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        # In uvicorn's event loop, where the MCP connections' tasks live on; the lifespan's
        # start() then finds them started.
        try:
            for agent in self._bridges:
                await agent.start()
        except BaseException:
            for agent in self._bridges:
                await agent.aclose()  # what did start (the thread pool, say)
            raise
        if self._opened is not None:
            print(self._opened, flush=True)
        if self._started is not None:
            self._started()
        await super().serve(sockets)

    #: A worker of ``serve --workers``: its parent alone says stop (SIGTERM), so a terminal's
    #: Ctrl-C, which reaches every process, is not a second signal that cuts the drain short.
    worker = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.worker and sig == signal.SIGINT:
            return
        for agent in self._bridges:
            agent.begin_shutdown(self._grace)
        super().handle_exit(sig, frame)


async def _agents(apps: Sequence[tuple[str, Starlette]], request: Request) -> JSONResponse:
    """The agents the caller may talk to (each checks its own ``--auth-token``), in the file's
    order: ``{"agents": [{"name": "sales", "path": "/sales"}, …]}``."""
    shown = []
    for path, app in apps:
        agent: Bridge = app.state.bridge
        try:
            agent.authorize(request)
        except InvalidRunInputError:
            continue
        shown.append({"name": path.strip("/"), "path": path})
    return JSONResponse({"agents": shown}, headers={"Cache-Control": "no-store"})


async def _index(request: object) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><title>agui-bridge</title><h1>agui-bridge</h1>"
        "<p>The AG-UI agent is at <code>POST /agent</code>; capabilities at "
        "<code>GET /agent/capabilities</code>.</p><p>The demo page is not built: run "
        "<code>make demo</code> (or <code>npm ci &amp;&amp; npm run build</code> in "
        "<code>web-demo/</code>).</p>"
    )


def display_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else host
