"""Moved to ``bridge.serve.request`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.serve.request")
