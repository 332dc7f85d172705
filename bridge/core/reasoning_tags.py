"""The streaming reasoning-tag splitter: ``<think>…</think>`` inside ``content`` → parts.

Pure and incremental: ``feed(text)`` returns what can be decided now, ``close()`` releases what
was held back. Only a suffix that could still become a tag is held (at most one tag's length),
so text streams live and nothing is rescanned.

Whitespace follows llama.cpp's own reasoning parser (``common_chat_msg_parser``, which strips
the reasoning it reads from tags), so a model looks the same whether the server or the bridge
splits it: the whitespace at both edges of a reasoning section and right after a closing tag is
dropped. Whitespace at the end of the reasoning read so far is held back, like a possible tag
prefix, until the next text or the closing tag decides it, so that where the chunks were cut
never changes the result. (An older llama.cpp build, recorded in
``tests/fixtures/llamacpp/``, kept the newline before ``</think>`` in ``reasoning_content``.)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from bridge.core.markers import MarkerSet, marker_set
from bridge.core.parts import Reasoning, Text

TagPair = tuple[str, str]

#: The tag pairs we know models to use, by name (``--reasoning-tags think,seed:think``).
KNOWN_REASONING_TAGS: dict[str, TagPair] = {
    "think": ("<think>", "</think>"),
    "thinking": ("<thinking>", "</thinking>"),
    "reasoning": ("<reasoning>", "</reasoning>"),
    "thought": ("<thought>", "</thought>"),
    "THINK": ("[THINK]", "[/THINK]"),  # Mistral Magistral
    "seed:think": ("<seed:think>", "</seed:think>"),  # ByteDance Seed-OSS
}

DEFAULT_REASONING_TAGS: tuple[TagPair, ...] = (KNOWN_REASONING_TAGS["think"],)


def resolve_reasoning_tags(spec: Iterable[str | Sequence[str]]) -> tuple[TagPair, ...]:
    """Turn names from ``KNOWN_REASONING_TAGS`` and/or explicit ``(open, close)`` pairs into pairs.

    A string that is not a known name may be given as ``"OPEN...CLOSE"`` (e.g. ``"<r>...</r>"``).
    """
    pairs: list[TagPair] = []
    for item in spec:
        if isinstance(item, str):
            if item in KNOWN_REASONING_TAGS:
                pairs.append(KNOWN_REASONING_TAGS[item])
                continue
            open_tag, sep, close_tag = item.partition("...")
            if not sep:
                known = ", ".join(KNOWN_REASONING_TAGS)
                raise ValueError(
                    f"unknown reasoning tag {item!r}: use one of {known}, or 'OPEN...CLOSE'"
                )
            pair = (open_tag, close_tag)
        else:
            if len(item) != 2:
                raise ValueError(
                    f"a reasoning tag pair needs an open and a close tag, got {item!r}"
                )
            pair = (str(item[0]), str(item[1]))
        if not pair[0] or not pair[1] or pair[0] == pair[1]:
            raise ValueError(f"a reasoning tag pair needs two different, non-empty tags: {pair!r}")
        pairs.append(pair)
    if not pairs:
        raise ValueError("at least one reasoning tag pair is needed")
    # A marker inside another would make the split depend on where the chunks are cut: a
    # complete short tag at a chunk's end might still have grown into the long one.
    markers = {tag for pair in pairs for tag in pair}
    for short in markers:
        for long in markers:
            if short != long and short in long:
                raise ValueError(f"reasoning tag {long!r} contains the tag {short!r}")
    return tuple(dict.fromkeys(pairs))


@functools.lru_cache(maxsize=64)  # the configured pairs: one or a few sets a process
def _tags_of(
    pairs: tuple[TagPair, ...],
) -> tuple[Mapping[str, str], MarkerSet, MarkerSet, Mapping[str, MarkerSet]]:
    """What a filter looks for, shared by every stream's filter of the same tags (none of it
    changes): each opening tag's closing tag, the closing tags, the markers in answer text,
    and each closing tag's own marker."""
    close_of = MappingProxyType(dict(pairs))
    closes = marker_set(close for _, close in pairs)
    text_markers = marker_set([*close_of, *closes.markers])
    own = MappingProxyType({close: marker_set([close]) for close in closes.markers})
    return close_of, closes, text_markers, own


class ReasoningTagFilter:
    """Splits a stream of content text into ``Text`` and ``Reasoning`` parts at reasoning tags.

    With ``starts_in_reasoning`` the text before the first closing tag is reasoning: for chat
    templates that put the opening tag into the prompt (DeepSeek-R1 distills, Qwen3 2507
    thinking), so that only ``</think>`` ever arrives. If the closing tag never comes (the answer
    was cut by ``max_tokens``), everything stays reasoning.

    A closing tag met outside reasoning (the template opened the tag but ``starts_in_reasoning``
    was not set) is a marker, not text: it is dropped rather than shown.
    """

    def __init__(
        self,
        pairs: Sequence[TagPair] = DEFAULT_REASONING_TAGS,
        *,
        starts_in_reasoning: bool = False,
    ) -> None:
        if not pairs:
            raise ValueError("at least one reasoning tag pair is needed")
        self._close_of, self._closes, self._text_markers, self._close_markers = _tags_of(
            tuple((opening, close) for opening, close in pairs)
        )
        # In reasoning: the closing tags that end it (all of them when the template opened it).
        self._reasoning_markers: MarkerSet | None = self._closes if starts_in_reasoning else None
        self._strip_whitespace = starts_in_reasoning
        self._held = ""
        self._started = False

    @property
    def in_reasoning(self) -> bool:
        """True while inside a reasoning section (an opening tag without its closing tag yet)."""
        return self._reasoning_markers is not None

    def plain_text_stops(self) -> frozenset[str] | None:
        """While the filter is in answer text with nothing held: the characters a tag begins
        with. ``feed`` gives text without any of them back as one ``Text``, its state as it
        was. ``None`` otherwise."""
        if self._reasoning_markers is not None or self._held or not self._started:
            return None
        if self._strip_whitespace:
            return None
        return self._text_markers.first_chars

    def leave_implicit_reasoning(self) -> None:
        """Undo ``starts_in_reasoning`` if no content was seen yet.

        Used when the server turns out to split reasoning into a field itself: then the content
        holds only the answer, and treating it as reasoning would hide the answer.
        """
        if not self._started and self._reasoning_markers is not None:
            self._reasoning_markers = None
            self._strip_whitespace = False

    def feed(self, text: str) -> list[Reasoning | Text]:
        if not text:
            return []
        self._started = True
        if self._held:
            text = self._held + text
            self._held = ""
        out: list[Reasoning | Text] = []
        while text:
            if self._strip_whitespace:
                stripped = text.lstrip()
                if not stripped:
                    return out
                text = stripped
                self._strip_whitespace = False
            markers = (
                self._text_markers if self._reasoning_markers is None else self._reasoning_markers
            )
            position, marker = markers.find(text)
            if not marker:
                keep = markers.partial_length(text)
                if self._reasoning_markers is not None:
                    # Whitespace that a closing tag may follow is the tag's to decide.
                    keep = len(text) - len(text[: len(text) - keep].rstrip())
                if keep:
                    self._held = text[-keep:]
                    text = text[:-keep]
                if text:
                    out.append(self._part(text))
                return out
            before = text[:position]
            if self._reasoning_markers is not None:
                before = before.rstrip()  # the reasoning ends here: its edge is not reasoning
            if before:
                out.append(self._part(before))
            self._switch(marker)
            text = text[position + len(marker) :]
        return out

    def close(self) -> list[Reasoning | Text]:
        """Release a held partial tag: it never completed, so it is content after all."""
        held, self._held = self._held, ""
        return [self._part(held)] if held else []

    def _part(self, text: str) -> Reasoning | Text:
        return Text(text) if self._reasoning_markers is None else Reasoning(text)

    def _switch(self, marker: str) -> None:
        if self._reasoning_markers is None and marker in self._close_of:
            self._reasoning_markers = self._close_markers[self._close_of[marker]]
        else:
            # A closing tag: leaves reasoning, or is an orphan marker in text (dropped).
            self._reasoning_markers = None
        self._strip_whitespace = True
