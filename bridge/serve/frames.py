"""Where events become frames for one client: the one boundary every event leaves through.

Two things happen here and nowhere else:

- **The client's protocol.** AG-UI clients validate events with strict schemas, and the lines
  in use disagree: a field 1.0 added is an error for a 0.0.x client. The 1.0 client says so in
  its ``RunAgentInput`` (``protocolVersion: "1.0"``); the 0.0.x clients (CopilotKit 1.74 and
  runtime 1.75 pin ``@ag-ui/client`` 0.0.59) send none. Each run's events are shaped for the
  line its client speaks, by the table ``PRE_1_0`` below.
- **Secrets.** The model's own words (the three delta events, most of every stream) go out as
  encoded; every other event is built from the bridge's or the upstream's words (an error
  message, a result) and is redacted of the configured secrets on its way out.

What differs between the lines, for every event the bridge emits (README "Client protocols"):

============================  ===========  ===========================  =============  ==========
event.field                   1.0          0.0.59                       0.0.52         0.0 gets
============================  ===========  ===========================  =============  ==========
RUN_STARTED.protocolVersion   known        unknown, passed through      unknown        omitted
RUN_FINISHED.outcome          known        strict: pendingToolCallIds   unknown        omitted
                                           is a ZodError
RUN_FINISHED.usage            known        known                        unknown        kept
RUN_FINISHED.result           known        known                        known          kept
RUN_ERROR.code                known        known                        known          kept
REASONING_* (5 events)        known        known                        known          kept
REASONING_ENCRYPTED_VALUE     known        known                        known          kept
TEXT_MESSAGE_*, TOOL_CALL_*   known        known                        known          kept
TOOL_CALL_RESULT              known        known                        known          kept
============================  ===========  ===========================  =============  ==========

"unknown" fields pass a 0.0.x schema (its base event is ``passthrough``) but mean nothing to it;
the two the 0.0 dialect omits are the ones that say something only a 1.0 client can use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
)

from bridge.config import AguiProtocolSetting
from bridge.core.encode import encode_event
from bridge.serve.redact import Redactor

ClientProtocol = Literal["1.0", "0.0"]
"""The AG-UI line a client validates with: ``1.0`` (``@ag-ui/client`` 1.x) or ``0.0`` (0.0.x)."""

#: The lines this bridge can speak, newest first (``/capabilities`` lists them).
CLIENT_PROTOCOLS: tuple[ClientProtocol, ...] = ("1.0", "0.0")

Shape = Callable[[BaseEvent], BaseEvent]


def _without_protocol_version(event: BaseEvent) -> BaseEvent:
    return event.model_copy(update={"protocol_version": None})


def _without_outcome(event: BaseEvent) -> BaseEvent:
    # 0.0.59's outcome is `{type: "success"}` exactly (zod .strict()): pendingToolCallIds, the
    # 1.0 field that lists the frontend's calls, fails the whole run. The 0.0.x clients find
    # their pending calls in the messages, as they always did.
    return event.model_copy(update={"outcome": None})


#: How an event changes for a pre-1.0 client; events not named go out as they are.
PRE_1_0: Mapping[type[BaseEvent], Shape] = {
    RunStartedEvent: _without_protocol_version,
    RunFinishedEvent: _without_outcome,
}

_SHAPES: Mapping[ClientProtocol, Mapping[type[BaseEvent], Shape]] = {"1.0": {}, "0.0": PRE_1_0}


def client_protocol(requested: str | None, pinned: AguiProtocolSetting = "auto") -> ClientProtocol:
    """The line to speak: ``pinned`` unless ``auto``; else 1.0 for a client that announces a
    ``protocolVersion`` of 1 or above, 0.0 for one that announces none (or an older one)."""
    if pinned != "auto":
        return pinned
    major = (requested or "").split(".", 1)[0]
    return "1.0" if major.isdigit() and int(major) >= 1 else "0.0"


_MODEL_WORDS = frozenset((TextMessageContentEvent, ReasoningMessageContentEvent, ToolCallArgsEvent))


class FrameWriter:
    """Encodes the events of one run as SSE frames for its client."""

    def __init__(self, redactor: Redactor, protocol: ClientProtocol = "1.0") -> None:
        self.protocol = protocol
        # Decided once per run, not per event: most events are model words, and most bridges
        # have a secret or none for the whole process.
        self._redact = redactor.redact if redactor else None
        self._shapes = _SHAPES[protocol]

    def frames(self, events: Iterable[BaseEvent]) -> str:
        return "".join([self.frame(event) for event in events])

    def frame(self, event: BaseEvent) -> str:
        kind = type(event)
        if kind in _MODEL_WORDS:
            return encode_event(event)
        shape = self._shapes.get(kind)
        text = encode_event(event if shape is None else shape(event))
        return text if self._redact is None else self._redact(text)
