"""Moved to ``bridge.serve.sse`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.serve.sse")
