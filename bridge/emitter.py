"""Moved to ``bridge.core.emitter`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.core.emitter")
