"""Finding literal markers (tags, special tokens) in streamed text without rescanning it.

Shared by the reasoning-tag filter and the text tool-call parsers: find the earliest marker in
the text at hand, and otherwise tell how long a suffix could still grow into one (that much is
held back until the next chunk decides it).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable


class MarkerSet:
    def __init__(self, markers: Iterable[str]) -> None:
        self.markers = tuple(dict.fromkeys(markers))
        if not self.markers or not all(self.markers):
            raise ValueError("markers must be non-empty strings")
        #: The characters a marker begins with: text without any of them holds none.
        self.first_chars = frozenset(marker[0] for marker in self.markers)
        self._longest = max(len(marker) for marker in self.markers)

    def could_start_in(self, text: str) -> bool:
        """Whether any marker (or the start of one) could be in ``text``: its first character is."""
        return any(char in text for char in self.first_chars)

    def find(self, text: str) -> tuple[int, str]:
        """The earliest marker in ``text`` (the longest one at a tie), or ``(-1, "")``."""
        if not any(char in text for char in self.first_chars):
            return -1, ""
        best, found = len(text), ""
        for marker in self.markers:
            position = text.find(marker, 0, best + len(marker))
            if position != -1 and (
                position < best or (position == best and len(marker) > len(found))
            ):
                best, found = position, marker
        return (best, found) if found else (-1, "")

    def partial_length(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of a marker."""
        for i in range(max(0, len(text) - self._longest + 1), len(text)):
            if text[i] in self.first_chars:
                suffix = text[i:]
                if any(marker.startswith(suffix) for marker in self.markers):
                    return len(text) - i
        return 0


def marker_set(markers: Iterable[str]) -> MarkerSet:
    """The ``MarkerSet`` of ``markers``, one for every stream's filters and parsers that look
    for the same ones (it holds no state of a stream): a stream holds none of its own."""
    return _shared(tuple(markers))


@functools.lru_cache(maxsize=256)  # the formats' and the configured tags' sets: a few dozen
def _shared(markers: tuple[str, ...]) -> MarkerSet:
    return MarkerSet(markers)
