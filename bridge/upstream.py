"""Moved to ``bridge.serve.upstream`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.serve.upstream")
