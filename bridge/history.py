"""Moved to ``bridge.serve.history`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.serve.history")
