"""Moved to ``bridge.serve.run`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.serve.run")
