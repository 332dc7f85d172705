"""The ASGI app: ``POST /`` runs the agent (``runs``; a widget's request, ``widgets``),
``GET /health``, ``GET /capabilities``, and ``GET /metrics`` with ``--metrics`` (``scrape``),
each a module of its own on the state they share (``Bridge``).

Mount it where you like (``Mount("/agent", app=create_app(config))``); ``mount()`` also routes
``POST /agent`` itself, which a bare ``Mount`` answers with a redirect to ``/agent/``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import Receive, Scope, Send

from bridge.config import BridgeConfig
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.capabilities import describe
from bridge.serve.http.health import health
from bridge.serve.http.runs import run
from bridge.serve.http.scrape import scrape
from bridge.serve.http.stream import SERVER_SEND
from bridge.serve.http.threads import cancel_run, forget_thread, list_threads, run_events
from bridge.serve.threads.owner import OwnerOf
from bridge.serve.upstream.pool import UpstreamPool


def create_app(
    config: BridgeConfig,
    *,
    tools: Sequence[Callable[..., Any]] = (),
    transport: httpx.AsyncBaseTransport | None = None,
    owner: OwnerOf | None = None,
    upstreams: UpstreamPool | None = None,
) -> Starlette:
    """The bridge as an ASGI app. ``tools``: Python functions (sync or async) the bridge runs
    itself when the model calls them (README "Server-side tools"). ``transport`` replaces the
    network (tests of one module). ``owner``: with ``--threads``, a function of the request
    that names whose threads it reads (the app's user; README "Threads"). ``upstreams``: the
    pool whose client this app shares with the others of the process that have the same
    upstream (``serve``'s agents); by default its own."""
    bridge = Bridge(config, tools=tools, transport=transport, owner=owner, upstreams=upstreams)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await bridge.start()  # the MCP servers' tools, listed at start
        try:
            yield
        finally:
            await bridge.aclose()

    middleware: list[Middleware] = []
    if config.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(config.cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["authorization", "content-type", "accept", "last-event-id"],
            )
        )
    run_route = Route("/", _Runs(bridge), methods=["POST"])
    routes = [
        run_route,
        Route("/health", partial(health, bridge), methods=["GET"]),
        Route("/capabilities", partial(describe, bridge), methods=["GET"]),
    ]
    if config.threads is not None:
        routes += [
            Route("/threads", partial(list_threads, bridge), methods=["GET"]),
            Route("/threads/{thread_id:path}", partial(forget_thread, bridge), methods=["DELETE"]),
            Route("/runs/{run_id:path}/events", partial(run_events, bridge), methods=["GET"]),
            Route("/runs/{run_id:path}/cancel", partial(cancel_run, bridge), methods=["POST"]),
        ]
    if config.metrics:
        routes.append(Route("/metrics", partial(scrape, bridge), methods=["GET"]))
    app = BridgeApp(middleware=middleware, run_route=run_route, routes=routes, lifespan=lifespan)
    app.state.bridge = bridge
    return app


class _Runs:
    """``POST /`` as its route's ASGI app, not a function Starlette wraps in two more layers
    (a request handler and an exception handler of its own, closures and frames held for the
    whole stream, each open stream)."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await run(self.bridge, Request(scope, receive, send))
        await response(scope, receive, send)


class BridgeApp(Starlette):
    """Starlette, keeping the server's own ``send`` in each request's scope (``SERVER_SEND``)
    for a run's frames while the app's middleware is the bridge's own: Starlette's error and
    exception middleware and its CORS look only at a response's head. Middleware added later
    (``app.add_middleware``) may read the body too: then the frames go through it."""

    def __init__(
        self, *, middleware: Sequence[Middleware], run_route: Route, **kwargs: Any
    ) -> None:
        super().__init__(middleware=middleware, **kwargs)
        self._own_middleware = len(middleware)
        self._run_route = run_route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or len(self.user_middleware) != self._own_middleware:
            await super().__call__(scope, receive, send)
            return
        scope[SERVER_SEND] = send
        try:
            runs = self._run_directly(scope)
            if runs is None:
                await super().__call__(scope, receive, send)
            else:  # what ``runs`` does, here: one frame fewer for the stream's life
                response = await run(runs.bridge, Request(scope, receive, send))
                await response(scope, receive, send)
        finally:
            # The server's send is its request's bound method: left in the scope, the request
            # would hold itself (a cycle for the garbage collector, each request).
            scope.pop(SERVER_SEND, None)

    def _run_directly(self, scope: Scope) -> _Runs | None:
        """The run route's app, when the request is a run and the app has no middleware at
        all: straight to it, not through Starlette's error and exception middleware and
        router, whose frames and closures each open stream would hold for its life (what it
        raises, the server answers 500 as the error middleware would). A function, not a
        coroutine: no frame of its own held either."""
        if self._own_middleware or scope["method"] != "POST":
            return None
        route = self._run_route
        match, child_scope = route.matches(scope)
        if match is not Match.FULL:
            return None
        scope.update(child_scope, app=self, route=route)
        scope.setdefault("router", self.router)
        runs = route.app
        assert isinstance(runs, _Runs)
        return runs


def mount(path: str, app: Starlette) -> list[BaseRoute]:
    """Routes that serve a ``create_app`` app under ``path``: ``POST {path}`` and ``{path}/…``.

    Pass ``lifespan=app.router.lifespan_context`` to the parent app so the upstream client is
    closed on shutdown.
    """
    path = path.rstrip("/")
    return [Route(path, _AtRoot(app, path), methods=["POST", "OPTIONS"]), Mount(path, app=app)]


class _AtRoot:
    """Hands a request for ``{path}`` to the app as a request for its ``/`` (with its middleware:
    CORS and all), as ``Mount`` does for ``{path}/``."""

    def __init__(self, app: Starlette, path: str) -> None:
        self._app = app
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        root_path = scope.get("root_path", "") + self._path
        await self._app({**scope, "path": root_path + "/", "root_path": root_path}, receive, send)
