"""The messages of a thread as ``@ag-ui/client`` holds them, with the look-ups its reducer makes
(``defaultApplyEvents``): the first message of an id, the first message holding a tool call,
where a tool result goes, how a ``MESSAGES_SNAPSHOT`` merges. ``bridge.serve.threads.fold``
applies events with them.

The look-ups are indexes, kept as messages are appended and rebuilt (once, when next read) after
a change that could reorder them, so a run folds in time linear in its events; a text's deltas
are gathered and joined once, when the messages are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypeGuard

Message = dict[str, Any]
#: A thread's title: its first user words, at most this many characters.
TITLE_CHARS = 80
_WORDS = re.compile(r"\S+")
#: A tool call and the message holding it.
Held = tuple[Message, dict[str, Any]]


def message_id(message: Message) -> str:
    """The message's id; "" for one without a string id (no event can name it)."""
    found = message.get("id")
    return found if type(found) is str else ""


def are_messages(value: Any) -> TypeGuard[list[Message]]:
    """Whether ``value`` is a list of messages, each an object with a string id."""
    return isinstance(value, list) and all(
        isinstance(m, dict) and type(m.get("id")) is str for m in value
    )


def owned(message: Message) -> Message:
    """A copy of a message from outside that the fold may change (its text, its tool calls, its
    metadata) without changing the caller's; ``subagentRunId: null`` left out, as the client
    leaves it out of what it keeps."""
    copy = {k: v for k, v in message.items() if v is not None or k != "subagentRunId"}
    calls = copy.get("toolCalls")
    if isinstance(calls, list):
        copy["toolCalls"] = [
            {**call, "function": dict(call["function"])}
            if isinstance(call, dict) and isinstance(call.get("function"), dict)
            else call
            for call in calls
        ]
    return copy


def title(messages: Iterable[Message]) -> str:
    """The first user words, whitespace folded, at most ``TITLE_CHARS`` characters (a cut
    title ends with "…"); the text parts of a message's content count, attachments do not;
    "" when no user message holds a word."""
    for message in messages:
        content = message.get("content") if message.get("role") == "user" else None
        if isinstance(content, list):
            content = " ".join(p["text"] for p in content if _is_text(p))
        words: list[str] = []
        length = -1
        for word in _WORDS.finditer(content) if isinstance(content, str) else ():
            words.append(word.group())
            length += 1 + len(words[-1])
            if length > TITLE_CHARS:  # a long title is cut at a word's start, not read whole
                return " ".join(words)[: TITLE_CHARS - 1].rstrip() + "…"
        if words:
            return " ".join(words)
    return ""


def activity_types_owned(snapshot: dict[str, Any]) -> list[str] | bool | None:
    """The activity types a ``MESSAGES_SNAPSHOT`` owns, by the client's rule (its metadata's
    ``@ag-ui/client.authoritativeActivityTypes``): ``None`` all, a list those (an invalid one:
    none), ``False`` not declared."""
    metadata = snapshot.get("metadata")
    if not isinstance(metadata, dict) or "@ag-ui/client" not in metadata:
        return False
    value = metadata["@ag-ui/client"]
    if not value or not isinstance(value, dict):
        return []
    if "authoritativeActivityTypes" not in value:
        return False
    types = value["authoritativeActivityTypes"]
    if types is None:
        return None
    return types if isinstance(types, list) and all(isinstance(t, str) for t in types) else []


class HeldMessages:
    """A thread's messages, as a list the client's look-ups run on."""

    def __init__(self, messages: Iterable[Any]) -> None:
        self._list: list[Message] = [owned(m) for m in messages if isinstance(m, dict)]
        self._by_id: dict[str, Message] | None = None
        self._calls: dict[str, Held] | None = None
        #: Texts with deltas not joined yet, by the id() of the dict holding each.
        self._unjoined: dict[int, tuple[dict[str, Any], str, list[str]]] = {}

    def joined(self) -> list[Message]:
        """The messages, every text whole (the list itself: read it, do not change it)."""
        for holder, key, parts in self._unjoined.values():
            holder[key] = "".join(parts)
        self._unjoined.clear()
        return self._list

    def find(self, wanted: str) -> Message | None:
        """The first message with this id (the client's ``messages.find``)."""
        if self._by_id is None:
            self._by_id = {}
            for message in self._list:
                self._by_id.setdefault(message_id(message), message)
        return self._by_id.get(wanted)

    def at(self, index: int) -> Message:
        return self._list[index]

    def index_of(self, wanted: str) -> int | None:
        found = self.find(wanted)
        if found is None:
            return None
        return next((i for i, m in enumerate(self._list) if m is found), None)

    def call(self, call_id: str) -> Held | None:
        """The first message holding the tool call (of any role, as the client's ``find`` over
        ``toolCalls``), and the call."""
        if self._calls is None:
            self._calls = {}
            for message in self._list:
                _index_calls(message, self._calls)
        return self._calls.get(call_id)

    def assistant_call(self, call_id: str) -> Held | None:
        """The first assistant message holding the tool call, and the call."""
        held = self.call(call_id)
        if held is None or held[0].get("role") == "assistant":
            return held
        for message in self._list:  # the first holder is not an assistant: look further
            if message.get("role") == "assistant":
                found: dict[str, Held] = {}
                _index_calls(message, found)
                if call_id in found:
                    return found[call_id]
        return None

    def push(self, message: Message) -> None:
        self._list.append(message)
        if self._by_id is not None:
            self._by_id.setdefault(message_id(message), message)
        if self._calls is not None:
            _index_calls(message, self._calls)

    def add_call(self, holder: Message, call: dict[str, Any]) -> None:
        """``call`` was appended to ``holder``'s tool calls (no message held it before)."""
        if self._calls is not None:
            self._calls.setdefault(call["id"], (holder, call))

    def replace(self, at: int, message: Message) -> None:
        self._list[at] = message
        self._by_id = self._calls = None

    def add_result(self, result: Message, call_id: str) -> None:
        """A tool message, where the client puts it: after the first assistant message holding
        the call and the tool messages following it; at the end when none holds it."""
        holder = self.assistant_call(call_id)
        messages = self._list
        at = -1
        if holder is not None:
            at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i] is holder[0]), -2)
            at += 1
            while 0 < at < len(messages) and messages[at].get("role") == "tool":
                at += 1
        if at in (-1, len(messages)):
            self.push(result)
            return
        messages.insert(at, result)
        if self._by_id is not None and self._by_id.setdefault(result["id"], result) is not result:
            self._by_id = None  # the id was held further on: the first is this one now

    def append_text(self, holder: dict[str, Any], key: str, delta: str) -> None:
        """``holder[key] += delta``, the text joined when next read (``joined``); a value that
        is not a string starts from "" (the client's rule for a message's content)."""
        entry = self._unjoined.get(id(holder))
        if entry is None:
            text = holder.get(key)
            entry = self._unjoined[id(holder)] = (holder, key, [text if type(text) is str else ""])
        entry[2].append(delta)

    def merge_snapshot(self, new: list[Message], owns: list[str] | bool | None) -> None:
        """The client's ``MESSAGES_SNAPSHOT`` merge: the snapshot's messages replace those of
        their ids and come after them; a message it does not hold goes, unless it is one of the
        client's own the snapshot leaves alone (reasoning when it holds none; activities of a
        type it does not own, ``owns``: ``None`` all, a list those, ``False`` undeclared: all
        when it holds activities)."""
        by_id = {m["id"]: m for m in new}
        has_activity = any(m.get("role") == "activity" for m in new)
        has_reasoning = any(m.get("role") == "reasoning" for m in new)

        def kept(m: Message) -> bool:
            role = m.get("role")
            if role == "activity":
                if isinstance(owns, list):
                    return m.get("activityType") not in owns
                return owns is False and not has_activity
            return role == "reasoning" and not has_reasoning

        old = self.joined()
        merged = [by_id.get(message_id(m), m) for m in old if message_id(m) in by_id or kept(m)]
        held = {message_id(m) for m in merged}
        merged += [m for m in new if m["id"] not in held]
        self._list = merged
        self._by_id = self._calls = None


def _is_text(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def _index_calls(message: Message, index: dict[str, Held]) -> None:
    calls = message.get("toolCalls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict) and type(call.get("id")) is str:
            index.setdefault(call["id"], (message, call))


def merge_metadata(target: dict[str, Any], event: dict[str, Any]) -> None:
    """The event's metadata over the target's, key by key (the client's ``mergeMetadata``)."""
    metadata = event.get("metadata")
    if isinstance(metadata, dict):
        held = target.get("metadata")
        target["metadata"] = {**held, **metadata} if isinstance(held, dict) else dict(metadata)
