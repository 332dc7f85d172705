"""What ``serve`` serves: one agent at ``/agent``, or the file's ``[agents.NAME]`` tables, each
at ``/NAME`` with its own configuration and tools, sharing one pool of upstream connections
where they share an upstream."""

from __future__ import annotations

import argparse

from starlette.applications import Starlette

from bridge.cli.settings import serve_config
from bridge.cli.tool_modules import imported_tools
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.upstream.pool import UpstreamPool

#: Where the one agent is served when the file names none.
AGENT_PATH = "/agent"


def agent_configs(args: argparse.Namespace) -> dict[str, BridgeConfig]:
    """Each agent's path and configuration, checked with its tools' modules before anything
    starts (``ValueError`` names the agent)."""
    agents = _agents(args)
    if not agents:
        imported_tools(args.tools)
        return {AGENT_PATH: serve_config(args)}
    configs = {}
    for name, own in agents.items():
        try:
            configs[f"/{name}"] = serve_config(own)
            imported_tools(own.tools)
        except ValueError as exc:
            raise ValueError(f"agent {name}: {exc}") from None
    return configs


def agent_apps(args: argparse.Namespace) -> list[tuple[str, Starlette]]:
    """Each agent's path and app (its configuration and tools as ``agent_configs`` checked
    them), the agents' sharing one pool of upstream clients."""
    agents = _agents(args)
    if not agents:
        return [(AGENT_PATH, create_app(serve_config(args), tools=imported_tools(args.tools)))]
    pool = UpstreamPool()
    return [
        (
            f"/{name}",
            create_app(serve_config(own), tools=imported_tools(own.tools), upstreams=pool),
        )
        for name, own in agents.items()
    ]


def _agents(args: argparse.Namespace) -> dict[str, argparse.Namespace]:
    agents: dict[str, argparse.Namespace] = getattr(args, "agents", None) or {}
    return agents
