"""A thread as its client holds it: ``ThreadFold`` applies a run's events to the messages and
the state the run began with, as ``@ag-ui/client`` 1.0.0 does (its ``verifyEvents``, then its
``defaultApplyEvents``), so that what the bridge keeps of a thread is what the client would hold
after the same events, and a hydrate gives the client back exactly that.

Every event comes from outside (the model wrote most of it), so none is trusted: one the client's
verifier would refuse (a text not open, a second start of an open one, anything after the run's
end but a new run) or whose fields have the wrong types is skipped, as the client leaves
unapplied the ones it warns about, and counted (``skipped``); nothing raises out of ``apply``.
Nothing recurses on the input: JSON is read by orjson (its depth limit), and a ``STATE_DELTA``'s
or ``ACTIVITY_DELTA``'s patch is read and applied within the shared state's bounds
(``bridge.serve.tools.patch``), its copies bringing in no more than the input brought before,
so the fold never holds more than twice what it was given. A run's texts arrive a delta at a
time: each is joined once, when the messages are read (``bridge.serve.threads.held``). Left
out, as the bridge sends none of them: ``*_CHUNK`` events (the client expands them first),
fields the client's schema does not know (it strips them), the 0.0.x ``THINKING_*`` events."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from ag_ui.core import BaseEvent

from bridge.serve.threads.fold_frames import apply_frames
from bridge.serve.threads.held import (
    HeldMessages,
    Message,
    activity_types_owned,
    are_messages,
    merge_metadata,
    owned,
    title,
)
from bridge.serve.threads.opened import CALL, REASONING, SPAN, STEP, TEXT, Opened
from bridge.serve.threads.patches import Patches
from bridge.serve.tools.patch import PatchRefused

_AFTER_THE_END = frozenset({"RUN_STARTED", "RUN_ERROR"})


class _Skip(Exception):
    """The event is one the client would refuse, or warn about and leave unapplied."""


class ThreadFold:
    """A thread's messages and state as a client holds them after applying a run's events."""

    def __init__(
        self,
        messages: list[dict[str, Any]],
        state: Any = None,
        *,
        interrupts: list[dict[str, Any]] | None = None,
    ) -> None:
        """``messages``: AG-UI messages as JSON (camelCase; the fold changes copies of them);
        ``state``: the run input's state; ``interrupts``: those the thread waited on before the
        run (the client keeps them until a run finishes)."""
        self._held = HeldMessages(messages)
        self._state = state
        self._interrupts = list(interrupts or [])
        self._opened = Opened()
        self._running = self._ended = False
        #: Events skipped: malformed, or refused by the client's verifier.
        self.skipped = 0
        self._patches = Patches()
        self._patches.brought(state)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The thread's messages (the fold's own list: read it, do not change it)."""
        return self._held.joined()

    @property
    def state(self) -> Any:
        return self._state

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """What the thread waits on: the interrupts of the last ``RUN_FINISHED`` whose outcome
        is ``interrupt``; a run that finishes otherwise clears them, a ``RUN_ERROR`` leaves them
        (as the client's ``pendingInterrupts``)."""
        return self._interrupts

    @property
    def ended(self) -> bool:
        """Whether the run ended (``RUN_FINISHED`` or ``RUN_ERROR``) and none began after."""
        return self._ended

    def open_ends(self) -> list[BaseEvent]:
        """The events that close what is open now, for a run cut short to end with its
        ``RUN_FINISHED`` (``bridge.serve.threads.opened``)."""
        return self._opened.closers()

    def title(self) -> str:
        """The thread's title (``bridge.serve.threads.held.title``)."""
        return title(self.messages)

    def apply_frame(self, frame: str) -> None:
        """Apply one SSE frame (``data: {json}``, maybe an ``id:`` line or comments too)."""
        apply_frames(self, (frame,))

    def apply_frames(self, frames: Iterable[str]) -> None:
        """Apply frames in order, as ``apply_frame`` each would; the deltas in a row for one
        message or call are applied as one (``bridge.serve.threads.fold_frames``)."""
        apply_frames(self, frames)

    def apply(self, event: dict[str, Any]) -> None:
        """Apply one event (its JSON, camelCase); the fold changes none of the event's own lists
        and objects, then or later."""
        kind = event.get("type") if isinstance(event, dict) else None
        if type(kind) is not str:
            self.skipped += 1  # not an event
            return
        handler = _HANDLERS.get(kind)
        if handler is None:
            return  # one the client applies nothing of (CUSTOM, RAW…)
        try:
            if self._ended and kind not in _AFTER_THE_END:
                raise _Skip  # the verifier: after the end, only a new run
            handler(self, event)
        except _Skip:
            self.skipped += 1

    # --- texts and reasoning ----------------------------------------------------------------

    def _text_start(self, e: dict[str, Any]) -> None:
        message_id, role, name = _text(e, "messageId"), _optional(e, "role"), _optional(e, "name")
        self._open(TEXT, message_id, e)
        target = self._held.find(message_id)
        if target is None:
            target = {"id": message_id, "role": "assistant" if role is None else role}
            target["content"] = ""
            if name is not None:
                target["name"] = name
            self._held.push(_tagged(target, e))
        elif target.get("role") == "activity":
            raise _Skip  # its content is no text to stream into
        merge_metadata(target, e)

    def _reasoning_start(self, e: dict[str, Any]) -> None:
        message_id = _text(e, "messageId")
        self._open(REASONING, message_id, e)
        target = self._held.find(message_id)
        if target is None:
            target = _tagged({"id": message_id, "role": "reasoning", "content": ""}, e)
            self._held.push(target)
        elif target.get("role") == "activity":
            raise _Skip
        merge_metadata(target, e)

    def _content(self, e: dict[str, Any], kind: str) -> None:
        message_id, delta = _text(e, "messageId"), _text(e, "delta")
        target = self._held.find(message_id) if self._opened.is_open(kind, message_id) else None
        if target is None or target.get("role") == "activity":
            raise _Skip
        self._held.append_text(target, "content", delta)
        merge_metadata(target, e)

    def _end(self, e: dict[str, Any], kind: str) -> None:
        message_id = _text(e, "messageId")
        self._close(kind, message_id)
        target = self._held.find(message_id)
        if target is not None and target.get("role") != "activity":
            merge_metadata(target, e)

    def _encrypted(self, e: dict[str, Any]) -> None:
        entity, value = _text(e, "entityId"), _text(e, "encryptedValue")
        if e.get("subtype") == "tool-call":
            held = self._held.assistant_call(entity)
            target = held[1] if held is not None else None
        else:
            target = self._held.find(entity)
        if target is None or target.get("role") == "activity":
            raise _Skip
        target["encryptedValue"] = value

    # --- tool calls ---------------------------------------------------------------------------

    def _call_start(self, e: dict[str, Any]) -> None:
        call_id, name = _text(e, "toolCallId"), _text(e, "toolCallName")
        parent_id = _optional(e, "parentMessageId")
        self._open(CALL, call_id, e)
        held = self._held.call(call_id)
        if held is not None:  # a call the thread holds already: this start renames it
            function = held[1].get("function")
            if isinstance(function, dict):
                function["name"] = name
            merge_metadata(held[1], e)
            return
        parent = self._held.find(parent_id) if parent_id else None
        if parent is None or parent.get("role") != "assistant":
            # A new assistant message: the parent's id, unless a message of another role has it.
            new_id = parent_id if parent is None and parent_id else call_id
            parent = {"id": new_id, "role": "assistant", "toolCalls": []}
            self._held.push(_tagged(parent, e))
        calls = parent.get("toolCalls")
        if calls is None:
            calls = parent["toolCalls"] = []
        elif not isinstance(calls, list):
            raise _Skip
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        calls.append(call)
        self._held.add_call(parent, call)
        merge_metadata(call, e)

    def _call_args(self, e: dict[str, Any]) -> None:
        call_id, delta = _text(e, "toolCallId"), _text(e, "delta")
        held = self._held.call(call_id) if self._opened.is_open(CALL, call_id) else None
        function = held[1].get("function") if held is not None else None
        if held is None or not isinstance(function, dict):
            raise _Skip
        self._held.append_text(function, "arguments", delta)
        merge_metadata(held[1], e)

    def _call_end(self, e: dict[str, Any]) -> None:
        call_id = _text(e, "toolCallId")
        self._close(CALL, call_id)
        held = self._held.call(call_id)
        if held is not None:
            merge_metadata(held[1], e)

    def _call_result(self, e: dict[str, Any]) -> None:
        call_id, content = _text(e, "toolCallId"), e.get("content")
        if not isinstance(content, str | list):
            raise _Skip
        result: Message = {"id": _text(e, "messageId"), "toolCallId": call_id}
        result |= {"role": _optional(e, "role") or "tool", "content": content}
        merge_metadata(_tagged(result, e), e)
        self._held.add_result(result, call_id)

    # --- state, snapshots, activities ---------------------------------------------------------

    def _state_snapshot(self, e: dict[str, Any]) -> None:
        if "snapshot" not in e:
            raise _Skip
        self._state = e["snapshot"]  # held as it is: patches change copies
        self._patches.brought(self._state)

    def _state_delta(self, e: dict[str, Any]) -> None:
        self._state = self._patched(self._state, e.get("delta"))

    def _messages_snapshot(self, e: dict[str, Any]) -> None:
        given = e.get("messages")
        if not are_messages(given):
            raise _Skip
        self._held.merge_snapshot([owned(m) for m in given], activity_types_owned(e))

    def _activity_snapshot(self, e: dict[str, Any]) -> None:
        message_id, content = _text(e, "messageId"), e.get("content")
        if not isinstance(content, dict):
            raise _Skip
        self._patches.brought(content)
        made: Message = {"id": message_id, "role": "activity"}
        made["activityType"] = _text(e, "activityType")
        made = _tagged(made | {"content": content}, e)
        at, replace = self._held.index_of(message_id), e.get("replace") is not False
        existing = self._held.at(at) if at is not None else None
        if at is None or existing is None:
            self._held.push(made)
        elif existing.get("role") == "activity" and replace:
            made = {**{k: v for k, v in existing.items() if k != "subagentRunId"}, **made}
            self._held.replace(at, made)
        elif existing.get("role") == "activity":
            made = existing
        elif replace:
            self._held.replace(at, made)
        else:
            return
        merge_metadata(made, e)

    def _activity_delta(self, e: dict[str, Any]) -> None:
        message_id, kind = _text(e, "messageId"), _text(e, "activityType")
        at = self._held.index_of(message_id)
        existing = self._held.at(at) if at is not None else None
        if at is None or existing is None or existing.get("role") != "activity":
            raise _Skip
        merge_metadata(existing, e)  # the client merges it before the patch, which may fail
        base, patch = existing.get("content"), e.get("patch")
        content = self._patched({} if base is None else base, [] if patch is None else patch)
        self._held.replace(at, {**existing, "content": content, "activityType": kind})

    def _patched(self, document: Any, patch: Any) -> Any:
        try:
            return self._patches.patched(document, patch)
        except PatchRefused:
            raise _Skip from None

    # --- the run ------------------------------------------------------------------------------

    def _run_started(self, e: dict[str, Any]) -> None:
        given = e.get("input")
        given = given.get("messages") if isinstance(given, dict) else None
        if self._running or (given is not None and not are_messages(given)):
            raise _Skip  # the verifier: a run is going still
        self._running, self._ended = True, False
        self._opened.clear()
        for message in given or ():
            if self._held.find(message["id"]) is None:
                self._held.push(owned(message))

    def _run_finished(self, e: dict[str, Any]) -> None:
        if self._opened:
            raise _Skip  # the verifier: something is open still (``open_ends`` closes it)
        outcome = e.get("outcome")
        interrupts: list[dict[str, Any]] = []
        if isinstance(outcome, dict) and outcome.get("type") == "interrupt":
            given = outcome.get("interrupts")
            if not isinstance(given, list) or not all(isinstance(i, dict) for i in given):
                raise _Skip
            interrupts = [owned(interrupt) for interrupt in given]
        self._interrupts = interrupts
        self._running, self._ended = False, True

    def _run_error(self, _: dict[str, Any]) -> None:
        self._running, self._ended = False, True

    # --- shared by the handlers ---------------------------------------------------------------

    def _open(self, kind: str, key: str, e: dict[str, Any]) -> None:
        if not self._opened.open(kind, key, _optional(e, "subagentRunId")):
            raise _Skip  # the verifier: open already

    def _close(self, kind: str, key: str) -> None:
        if not self._opened.close(kind, key):
            raise _Skip  # the verifier: not open


#: What each event does (the class's table: a fold's own bound methods would make a cycle).
_HANDLERS: dict[str, Callable[[ThreadFold, dict[str, Any]], None]] = {
    "TEXT_MESSAGE_START": ThreadFold._text_start,
    "TEXT_MESSAGE_CONTENT": partial(ThreadFold._content, kind=TEXT),
    "TEXT_MESSAGE_END": partial(ThreadFold._end, kind=TEXT),
    "REASONING_MESSAGE_START": ThreadFold._reasoning_start,
    "REASONING_MESSAGE_CONTENT": partial(ThreadFold._content, kind=REASONING),
    "REASONING_MESSAGE_END": partial(ThreadFold._end, kind=REASONING),
    "REASONING_START": lambda fold, e: fold._open(SPAN, _text(e, "messageId"), e),
    "REASONING_END": lambda fold, e: fold._close(SPAN, _text(e, "messageId")),
    "REASONING_ENCRYPTED_VALUE": ThreadFold._encrypted,
    "TOOL_CALL_START": ThreadFold._call_start,
    "TOOL_CALL_ARGS": ThreadFold._call_args,
    "TOOL_CALL_END": ThreadFold._call_end,
    "TOOL_CALL_RESULT": ThreadFold._call_result,
    "STATE_SNAPSHOT": ThreadFold._state_snapshot,
    "STATE_DELTA": ThreadFold._state_delta,
    "MESSAGES_SNAPSHOT": ThreadFold._messages_snapshot,
    "ACTIVITY_SNAPSHOT": ThreadFold._activity_snapshot,
    "ACTIVITY_DELTA": ThreadFold._activity_delta,
    "STEP_STARTED": lambda fold, e: fold._open(STEP, _text(e, "stepName"), e),
    "STEP_FINISHED": lambda fold, e: fold._close(STEP, _text(e, "stepName")),
    "RUN_STARTED": ThreadFold._run_started,
    "RUN_FINISHED": ThreadFold._run_finished,
    "RUN_ERROR": ThreadFold._run_error,
}


def _text(event: dict[str, Any], key: str) -> str:
    value = event.get(key)
    if type(value) is not str:
        raise _Skip
    return value


def _optional(event: dict[str, Any], key: str) -> str | None:
    value = event.get(key)
    if value is not None and type(value) is not str:
        raise _Skip
    return value


def _tagged(made: Message, event: dict[str, Any]) -> Message:
    """What the event makes, with the event's subagent."""
    subagent = _optional(event, "subagentRunId")
    if subagent is not None:
        made["subagentRunId"] = subagent
    return made
