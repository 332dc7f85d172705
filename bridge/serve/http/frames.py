"""Where events become frames for one client: the one boundary every event leaves through.

Two things happen here and nowhere else:

- **The client's protocol.** AG-UI clients validate events with strict schemas, and the lines
  in use disagree: a field 1.0 added is an error for a 0.0.x client. The 1.0 client says so in
  its ``RunAgentInput`` (``protocolVersion: "1.0"``); the 0.0.x clients (CopilotKit 1.74 and
  runtime 1.75 pin ``@ag-ui/client`` 0.0.59) send none. Each run's events are shaped for the
  line its client speaks, by the table ``PRE_1_0`` below.
- **Secrets.** Every event is redacted of the configured secrets on its way out. The model's own
  words (the three delta events, most of every stream) are redacted per text across their
  deltas, so a secret split over two deltas is caught too: a delta's end that may begin a
  secret is held back until the next delta (or the event that ends the text) decides it.

What differs between the lines, for every event the bridge emits (README "Client protocols"):

============================  ===========  ===========================  =============  ==========
event.field                   1.0          0.0.59                       0.0.52         0.0 gets
============================  ===========  ===========================  =============  ==========
RUN_STARTED.protocolVersion   known        unknown, passed through      unknown        omitted
RUN_FINISHED.outcome          known        strict: pendingToolCallIds   unknown        interrupt
                                           is a ZodError; interrupt ok               only
RUN_FINISHED.usage            known        known                        unknown        kept
RUN_ERROR.usage               known        known                        unknown        kept
RUN_STARTED.parentRunId       known        known                        known          kept
STEP_STARTED, STEP_FINISHED   known        known                        known          kept
RUN_FINISHED.result           known        known                        known          kept
RUN_ERROR.code                known        known                        known          kept
REASONING_* (5 events)        known        known                        known          kept
REASONING_ENCRYPTED_VALUE     known        known                        known          kept
TEXT_MESSAGE_*, TOOL_CALL_*   known        known                        known          kept
TOOL_CALL_RESULT              known        known                        known          kept
TOOL_CALL_RESULT.content[]    known        a string only (ZodError)     a string only  text
============================  ===========  ===========================  =============  ==========

"unknown" fields pass a 0.0.x schema (its base event is ``passthrough``) but mean nothing to it;
the two the 0.0 dialect omits are the ones that say something only a 1.0 client can use. A
tool's result is the one thing shaped before this boundary: the run makes it text for a 0.0.x
client (``ToolLoop.parts``), since the run's next request must hold what the client holds, and
the client will send the text back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
)

from bridge.config import AguiProtocolSetting
from bridge.core.encode import encode_event
from bridge.serve.redact import Redactor, StreamRedactor
from bridge.serve.run.output import RUN_ENDS
from bridge.serve.tools.results import ServerToolResult

ClientProtocol = Literal["1.0", "0.0"]
"""The AG-UI line a client validates with: ``1.0`` (``@ag-ui/client`` 1.x) or ``0.0`` (0.0.x)."""

#: The lines this bridge can speak, newest first (``/capabilities`` lists them).
CLIENT_PROTOCOLS: tuple[ClientProtocol, ...] = ("1.0", "0.0")

Shape = Callable[[BaseEvent], BaseEvent]


def _without_protocol_version(event: BaseEvent) -> BaseEvent:
    return event.model_copy(update={"protocol_version": None})


def _without_outcome(event: BaseEvent) -> BaseEvent:
    # 0.0.59's success outcome is `{type: "success"}` exactly (zod .strict()):
    # pendingToolCallIds, the 1.0 field that lists the frontend's calls, fails the whole run.
    # The 0.0.x clients find their pending calls in the messages, as they always did. Its
    # interrupt outcome (`{type: "interrupt", interrupts}`) is 1.0's: it goes out as it is.
    outcome = getattr(event, "outcome", None)
    if getattr(outcome, "type", None) == "interrupt":
        return event
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
    return "1.0" if major.isascii() and major.isdigit() and int(major) >= 1 else "0.0"


#: The model's words: each event carries a piece of one text (a message's, a call's arguments),
#: named by the field that says which, and the event that ends that text.
_MODEL_WORDS: Mapping[type[BaseEvent], str] = {
    TextMessageContentEvent: "message_id",
    ReasoningMessageContentEvent: "message_id",
    ToolCallArgsEvent: "tool_call_id",
}
_TEXT_ENDS: Mapping[type[BaseEvent], type[BaseEvent]] = {
    TextMessageEndEvent: TextMessageContentEvent,
    ReasoningMessageEndEvent: ReasoningMessageContentEvent,
    ToolCallEndEvent: ToolCallArgsEvent,
}


class FrameWriter:
    """Encodes the events of one run as SSE frames for its client."""

    __slots__ = ("_redactor", "_shapes", "_texts", "protocol")

    def __init__(self, redactor: Redactor, protocol: ClientProtocol = "1.0") -> None:
        self.protocol = protocol
        # Decided once per run, not per event: most events are model words, and most bridges
        # have a secret or none for the whole process.
        self._redactor = redactor if redactor else None
        self._shapes = _SHAPES[protocol]
        #: The model's texts being written, each redacted across its deltas: (event type, id).
        self._texts: dict[tuple[type[BaseEvent], str], StreamRedactor[str]] = {}

    def frames(self, events: Sequence[BaseEvent]) -> str:
        if len(events) == 1:  # most batches: one token's event
            return self.frame(events[0])
        return "".join([self.frame(event) for event in events])

    def frame(self, event: BaseEvent) -> str:
        kind = type(event)
        if kind is ServerToolResult:
            # A server tool's result comes ready from bridge.serve.tools.server_tools: redacted
            # once there and, when big, encoded off the event loop (scanned and encoded again
            # here, a 10 MB result held every stream for ~100 ms), already in the form this
            # client's line takes (content parts for 1.0, text for 0.0: ToolLoop.parts).
            assert isinstance(event, ServerToolResult)
            return event.frame
        redactor = self._redactor
        if redactor is None:  # most runs: the event as the client's line wants it, in one step
            shape = self._shapes.get(kind)
            return encode_event(event if shape is None else shape(event))
        field = _MODEL_WORDS.get(kind)
        if field is not None:
            return self._model_words(event, field, redactor)
        released = ""
        if kind in _TEXT_ENDS:
            content = _TEXT_ENDS[kind]
            released = self._release(content, getattr(event, _MODEL_WORDS[content]))
        elif kind in RUN_ENDS and self._texts:  # an error may end a run with texts open
            released = "".join([self._release(*key) for key in list(self._texts)])
        return released + redactor.redact(self._shaped(event))

    def _shaped(self, event: BaseEvent) -> str:
        """The event encoded as this client's line wants it."""
        shape = self._shapes.get(type(event))
        return encode_event(event if shape is None else shape(event))

    def _model_words(self, event: BaseEvent, field: str, redactor: Redactor) -> str:
        key = (type(event), getattr(event, field))
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = redactor.stream()
        given: str = event.delta  # type: ignore[attr-defined]
        delta = text.feed(given)
        if delta == given:  # the common case: nothing held, nothing found
            return encode_event(event)
        if not delta:  # all of it held back for now: an empty delta is not a valid event
            return ""
        return encode_event(event.model_copy(update={"delta": delta}))

    def _release(self, kind: type[BaseEvent], ident: str) -> str:
        """What a text still holds, as one last delta event, before the event that ends it."""
        text = self._texts.pop((kind, ident), None)
        held = text.close() if text is not None else ""
        if not held:
            return ""
        return encode_event(kind.model_validate({_MODEL_WORDS[kind]: ident, "delta": held}))
