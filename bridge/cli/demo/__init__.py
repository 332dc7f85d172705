"""The embedded scripted upstream: a deterministic "reasoning model" behind a real
OpenAI-compatible HTTP API, speaking any of the reasoning dialects the bridge reads."""

from bridge.cli.demo.dialects import DEFAULT_SCRIPTED_MODEL, SCRIPTED_MODELS
from bridge.cli.demo.server import create_scripted_upstream, serve_scripted_upstream

__all__ = [
    "DEFAULT_SCRIPTED_MODEL",
    "SCRIPTED_MODELS",
    "create_scripted_upstream",
    "serve_scripted_upstream",
]
