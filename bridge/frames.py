"""Where events become frames for one client: the one boundary every event leaves through.

The model's own words (the three delta events, most of every stream) go out as encoded; every
other event is built from the bridge's or the upstream's words (an error message, a result) and
is redacted of the configured secrets on its way out.
"""

from __future__ import annotations

from collections.abc import Iterable

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
)

from bridge.encode import encode_event
from bridge.redact import Redactor

_MODEL_WORDS = (TextMessageContentEvent, ReasoningMessageContentEvent, ToolCallArgsEvent)


class FrameWriter:
    """Encodes the events of one run as SSE frames for its client."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def frames(self, events: Iterable[BaseEvent]) -> str:
        return "".join(self.frame(event) for event in events)

    def frame(self, event: BaseEvent) -> str:
        text = encode_event(event)
        if self._redactor and type(event) not in _MODEL_WORDS:
            text = self._redactor.redact(text)
        return text
