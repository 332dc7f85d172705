"""Moved to ``bridge.core.decode_responses`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.core.decode_responses")
