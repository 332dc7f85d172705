"""Parts → AG-UI events: the only place that knows AG-UI event order and ids.

Rules held here (``@ag-ui/client`` 1.0 and 0.0.x verifiers and reducers):
- one assistant message id per stretch of the turn between reasoning blocks: the text and every
  tool call's ``parentMessageId`` use it, so the client builds one assistant message holding the
  text and the calls. When reasoning resumes after the assistant message showed something, what
  follows goes into a fresh assistant message: the client keeps messages in the order they were
  opened, so text appended to the earlier message would show above reasoning the model produced
  before it (the history builder joins such messages back into one for the upstream);
- each reasoning block is its own span and message (a new one when reasoning resumes);
- a reasoning block is closed before text or tool calls that follow it; text is closed before
  reasoning; tool calls may stay open across text and each other (the client allows it), and
  are ended together when the turn ends, so no ARGS can come after its END;
- whitespace-only text outside a text message opens nothing until real text follows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ag_ui.core import (
    BaseEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from bridge.core.errors import UpstreamProtocolError
from bridge.core.parts import BrokenToolCall, ToolCallDelta

IdFactory = Callable[[str], str]
"""Makes a fresh id from a prefix (``msg``, ``rsn``, ``call``)."""

_Delta = TypeVar("_Delta", bound=BaseEvent)


def _delta_event(kind: type[_Delta], id_field: str) -> Callable[[str, str], _Delta]:
    """How a delta event of ``kind`` is made from its id and text without pydantic validating
    them: the model's every token makes one, and under load pydantic's validator cost several
    microseconds a token (``benchmarks/README.md``, issue 34). The fields are what validation
    gives (an event made by ``kind(**fields)`` once, its defaults copied), the two strings
    ours; ``tests/test_encode.py`` holds the events equal to validated ones in every respect
    pydantic keeps."""
    defaults = dict(kind.model_validate({id_field: "id", "delta": "text"}).__dict__)
    new, assign = kind.__new__, object.__setattr__

    def make(ident: str, delta: str) -> _Delta:
        if type(ident) is not str or type(delta) is not str:
            raise TypeError(f"{kind.__name__}: the id and the delta are strings")
        event = new(kind)
        values: dict[str, Any] = defaults.copy()
        values[id_field] = ident
        values["delta"] = delta
        assign(event, "__dict__", values)
        assign(event, "__pydantic_fields_set__", {id_field, "delta"})
        assign(event, "__pydantic_extra__", {})
        assign(event, "__pydantic_private__", None)
        return event

    return make


#: The three delta events, made without validation (``_delta_event``).
text_content = _delta_event(TextMessageContentEvent, "message_id")
reasoning_content = _delta_event(ReasoningMessageContentEvent, "message_id")
tool_call_args = _delta_event(ToolCallArgsEvent, "tool_call_id")


def random_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


#: The most characters of a provider's own fields on one tool call (Gemini's thought signature
#: is some kilobytes): an upstream that sends more is broken or hostile, not a model.
MAX_CALL_FIELDS_CHARS = 1024 * 1024


@dataclass(slots=True)
class _ToolCall:
    index: int
    upstream_id: str | None = None
    name: str = ""
    pending: list[str] = field(default_factory=list)
    id: str = ""  # set when started
    #: The provider's own fields on the call (``ToolCallDelta.fields``), the last of each key.
    fields: dict[str, str] | None = None

    @property
    def started(self) -> bool:
        return bool(self.id)


class EventEmitter:
    """Turns the parts of one assistant turn into AG-UI events (appended to ``out``)."""

    def __init__(self, *, new_id: IdFactory = random_id) -> None:
        self._new_id = new_id
        self._assistant_id: str | None = None
        self._assistant_shown = False  # the assistant message holds text or calls already
        self._text_open = False
        self._pending_whitespace = ""
        self._reasoning_id: str | None = None
        self._last_reasoning_id: str | None = None
        self._reasoning_ids: dict[str, str] = {}  # the upstream's reasoning ids → ours
        self._calls: dict[int, _ToolCall] = {}
        self._open_calls: list[_ToolCall] = []
        self.tool_call_ids: list[str] = []
        #: Every call id this turn gave out (a broken call's too), and for an upstream id that
        #: came again, the suffix to try next (``_unused``).
        self._given_ids: set[str] | None = None  # made at the first call (most turns have none)
        self._next_suffix: dict[str, int] = {}
        #: The name of each call in ``tool_call_ids``, by its id.
        self.tool_call_names: dict[str, str] = {}
        self.usage: TokenUsage | None = None

    @property
    def assistant_id(self) -> str:
        if self._assistant_id is None:
            self._assistant_id = self._new_id("msg")
        return self._assistant_id

    @property
    def open_text_id(self) -> str | None:
        """The message id of the text open now: ``text`` appends one content event with it."""
        return self._assistant_id if self._text_open else None

    @property
    def open_reasoning_id(self) -> str | None:
        """The message id of the reasoning open now: ``reasoning`` without an upstream id
        appends one content event with it."""
        return self._reasoning_id

    # -- text ---------------------------------------------------------------------------
    def text(self, text: str, out: list[BaseEvent]) -> None:
        if not self._text_open:
            if not text or text.isspace():
                self._pending_whitespace += text
                return
            self._end_reasoning(out)
            out.append(TextMessageStartEvent(message_id=self.assistant_id, role="assistant"))
            self._text_open = self._assistant_shown = True
            text, self._pending_whitespace = self._pending_whitespace + text, ""
        out.append(text_content(self.assistant_id, text))

    def _end_text(self, out: list[BaseEvent]) -> None:
        self._pending_whitespace = ""
        if self._text_open:
            out.append(TextMessageEndEvent(message_id=self.assistant_id))
            self._text_open = False

    # -- reasoning ----------------------------------------------------------------------
    def reasoning(self, text: str, out: list[BaseEvent], message_id: str | None = None) -> None:
        """Reasoning text; ``message_id`` (the upstream's id for it) starts a new reasoning
        message when it changes."""
        if not text:
            return
        if message_id is not None and (
            message_id not in self._reasoning_ids
            or self._reasoning_ids[message_id] != self._reasoning_id
        ):
            self._start_reasoning(out, message_id)
        elif self._reasoning_id is None:
            self._start_reasoning(out)
        assert self._reasoning_id is not None
        out.append(reasoning_content(self._reasoning_id, text))

    def encrypted_reasoning(
        self, value: str, out: list[BaseEvent], message_id: str | None = None
    ) -> None:
        """Attach an opaque reasoning artefact to the reasoning message ``message_id`` names,
        else to the current (or last) one; one is started when there is none."""
        target = self._reasoning_ids.get(message_id) if message_id else None
        if target is None and message_id is None:
            target = self._reasoning_id or self._last_reasoning_id
        if target is None:
            target = self._start_reasoning(out, message_id)
        out.append(
            ReasoningEncryptedValueEvent(subtype="message", entity_id=target, encrypted_value=value)
        )

    def _start_reasoning(self, out: list[BaseEvent], upstream_id: str | None = None) -> str:
        self._end_text(out)
        self._end_reasoning(out)
        if self._assistant_shown:  # what follows this reasoning goes into a new message
            self._assistant_id, self._assistant_shown = None, False
        reasoning_id = self._new_id("rsn")
        if upstream_id is not None:
            # The upstream's id, so that it can go back with the reasoning (Responses API).
            taken = upstream_id in self._reasoning_ids.values()
            reasoning_id = reasoning_id if taken else upstream_id
            self._reasoning_ids[upstream_id] = reasoning_id
        out.append(ReasoningStartEvent(message_id=reasoning_id))
        out.append(ReasoningMessageStartEvent(message_id=reasoning_id, role="reasoning"))
        self._reasoning_id = self._last_reasoning_id = reasoning_id
        return reasoning_id

    def _end_reasoning(self, out: list[BaseEvent]) -> None:
        if self._reasoning_id is not None:
            out.append(ReasoningMessageEndEvent(message_id=self._reasoning_id))
            out.append(ReasoningEndEvent(message_id=self._reasoning_id))
            self._reasoning_id = None

    # -- tool calls ---------------------------------------------------------------------
    def tool_call(self, delta: ToolCallDelta, out: list[BaseEvent]) -> None:
        call = self._calls.get(delta.index)
        if call is None or self._is_new_call(call, delta):
            if call is not None and not call.started:
                if not call.name and call.pending:
                    raise UpstreamProtocolError(
                        f"the upstream sent arguments for tool call #{call.index} but no name"
                    )
                if call.name:
                    self._start_call(call, out)
            call = self._calls[delta.index] = _ToolCall(delta.index)
        if delta.id and call.upstream_id is None and not call.started:
            call.upstream_id = delta.id
        if delta.name and not call.name:
            call.name = delta.name
        if delta.fields:
            call.fields = _merged(call, delta.fields)
        if delta.arguments:
            if call.started:
                out.append(tool_call_args(call.id, delta.arguments))
            else:
                call.pending.append(delta.arguments)
        # START as soon as name and id are known; when arguments come and still no id, the
        # upstream is not going to send one: make one.
        if not call.started and call.name and (call.upstream_id or call.pending):
            self._start_call(call, out)

    @staticmethod
    def _is_new_call(call: _ToolCall, delta: ToolCallDelta) -> bool:
        # Ollama puts every parallel call at index 0, each with its own id and name.
        if delta.id and call.upstream_id and delta.id != call.upstream_id:
            return True
        return bool(delta.name and call.name and delta.name != call.name)

    def _start_call(self, call: _ToolCall, out: list[BaseEvent]) -> None:
        call_id = call.upstream_id or self._new_id("call")
        given = self._given_ids
        if given is None:
            given = self._given_ids = set()
        if call_id in given:  # some servers reuse ids across parallel calls
            call_id = self._unused(call_id, given)
        given.add(call_id)
        self._end_reasoning(out)
        self._pending_whitespace = ""
        self._assistant_shown = True
        call.id = call_id
        self.tool_call_ids.append(call_id)
        self.tool_call_names[call_id] = call.name
        self._open_calls.append(call)
        out.append(
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=call.name, parent_message_id=self.assistant_id
            )
        )
        if call.pending:
            out.append(tool_call_args(call_id, "".join(call.pending)))
            call.pending.clear()

    def _unused(self, call_id: str, given: set[str]) -> str:
        """A new id for a call whose upstream id an earlier call of the turn has: one no call
        of the turn has (the upstream's own ids may look like ours: ``a``, ``a_2``, ``a``), so
        that no call, one under approval say, is taken for another."""
        suffix = self._next_suffix.get(call_id, len(self.tool_call_ids))
        while f"{call_id}_{suffix}" in given:  # resumed where the last search ended
            suffix += 1
        self._next_suffix[call_id] = suffix + 1
        return f"{call_id}_{suffix}"

    def broken_call(self, broken: BrokenToolCall, out: list[BaseEvent]) -> bool:
        """End a call that turned out unreadable and answer it with an error result, so that
        the frontend does not run it and the model sees what went wrong next turn. ``False``
        when it had not started (nothing was shown: the caller shows its text instead)."""
        call = self._calls.pop(broken.index, None)
        if call is None or not call.started:
            return False
        self._open_calls.remove(call)
        self.tool_call_ids.remove(call.id)
        del self.tool_call_names[call.id]
        out.append(ToolCallEndEvent(tool_call_id=call.id))
        out.append(
            ToolCallResultEvent(
                message_id=self._new_id("msg"),
                tool_call_id=call.id,
                role="tool",
                content=f"The model's tool call could not be read ({broken.reason}): {broken.text}",
            )
        )
        return True

    def end_tool_call(self, index: int, out: list[BaseEvent]) -> None:
        """The upstream says call ``index`` is complete (Responses API): end it now."""
        call = self._calls.pop(index, None)
        if call is None:
            return
        if not call.started:
            if not call.name:
                raise UpstreamProtocolError(f"the upstream completed tool call #{index} unnamed")
            self._start_call(call, out)
        self._open_calls.remove(call)
        _end(call, out)

    # -- end of turn --------------------------------------------------------------------
    def close(self, out: list[BaseEvent]) -> None:
        """End everything still open. Safe to call more than once."""
        self._end_reasoning(out)
        self._end_text(out)
        nameless = [call for call in self._calls.values() if not call.started and not call.name]
        for call in self._calls.values():
            if not call.started and call.name:
                self._start_call(call, out)
        self._calls.clear()
        for call in self._open_calls:
            _end(call, out)
        self._open_calls.clear()
        if any(call.pending for call in nameless):
            raise UpstreamProtocolError(
                f"the upstream sent arguments for tool call #{nameless[0].index} but no name"
            )


def _merged(call: _ToolCall, fields: dict[str, str]) -> dict[str, str]:
    merged = {**(call.fields or {}), **fields}
    if sum(len(key) + len(value) for key, value in merged.items()) > MAX_CALL_FIELDS_CHARS:
        raise UpstreamProtocolError(
            f"the upstream put more than {MAX_CALL_FIELDS_CHARS} characters of its own fields "
            f"on tool call #{call.index}"
        )
    return merged


def _end(call: _ToolCall, out: list[BaseEvent]) -> None:
    """END of a call, then what the provider put on it, as the call's encrypted value (AG-UI
    1.0: subtype ``tool-call``; every client line keeps it on the call and sends it back)."""
    out.append(ToolCallEndEvent(tool_call_id=call.id))
    if call.fields:
        value = fields_value(call.fields)
        out.append(
            ReasoningEncryptedValueEvent(
                subtype="tool-call", entity_id=call.id, encrypted_value=value
            )
        )


def fields_value(fields: dict[str, str]) -> str:
    """A call's provider fields (``ToolCallDelta.fields``: key → JSON text) as its encrypted
    value: one JSON object, each value as it came."""
    return "{" + ",".join(f"{json.dumps(key)}:{text}" for key, text in fields.items()) + "}"
