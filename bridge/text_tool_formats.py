"""Moved to ``bridge.core.text_tools.formats`` (deprecated path, kept for one release)."""

from bridge._moved import alias

alias(__name__, "bridge.core.text_tools.formats")
