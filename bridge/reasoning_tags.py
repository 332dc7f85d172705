"""Moved to ``bridge.core.reasoning_tags`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.core.reasoning_tags")
