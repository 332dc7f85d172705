"""Moved to ``bridge.core.parts`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.core.parts")
