"""A thread as the store keeps it, and as a hydrate sends it back.

The document (``VERSION`` 2) is a line of JSON, its head (the thread's state, the interrupts it
waits on, the run going on in it, and the count and SHA-256 of its messages), then the thread's
AG-UI messages as the client holds them (camelCase), one JSON object a line. The frames a
hydrate sends are made from it directly (``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT``): the
messages were checked when they came in, and a thread of megabytes is neither parsed nor
validated again on the way out to a 1.0 client; the digest tells a damaged document, read as
no thread. A document of ``VERSION`` 1 (the thread's JSON whole, before 0.x) is read as well.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from ag_ui.core import Message

#: The form of the documents written (1: the thread's JSON whole, read still); a document of
#: another is read as no thread.
VERSION = 2


@dataclass(slots=True)
class Thread:
    """A thread's messages (AG-UI, camelCase dicts), state, the interrupts it waits on
    (``RUN_FINISHED`` outcome's, camelCase) and the run going on in it."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    running: str | None = None
    #: Read from a document this process saved, redacted with its secrets (``ThreadKeeper``):
    #: its snapshot needs no scan for them again.
    clean: bool = False
    #: The messages as a document holds them, unread (one JSON object a line, no newline
    #: else: JSON escapes it): ``messages`` is empty then.
    lines: bytes | None = None

    def document(self, redact: Callable[[bytes], bytes] = bytes) -> bytes:
        """The thread's document, its JSON passed through ``redact`` (the messages' digest is
        of what is kept, after it). Bytes all the way: a thread of megabytes is copied as few
        times as it can be (a save's copies are what a burst of big runs holds at once)."""
        lines = redact(b"\n".join([orjson.dumps(m) for m in self.messages]))
        head = {
            "v": VERSION,
            "state": self.state,
            "interrupts": self.interrupts,
            "running": self.running,
            "messages": len(self.messages),
            "sha256": hashlib.sha256(lines).hexdigest(),
        }
        return b"".join([redact(orjson.dumps(head)), b"\n", lines])


class Digests:
    """A bounded set of digests (the most recent kept), for worker threads at once."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._kept: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, digest: bytes) -> None:
        with self._lock:
            self._kept[digest] = None
            self._kept.move_to_end(digest)
            while len(self._kept) > self._most:
                self._kept.popitem(last=False)

    def __contains__(self, digest: object) -> bool:
        with self._lock:
            return digest in self._kept


def dumped(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A run's input messages as the client holds them (camelCase JSON dicts)."""
    return [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in messages]


def read_document(document: bytes, *, intact: bool = False) -> Thread | None:
    """The thread a document holds; ``None`` for one this bridge cannot read (another
    version's, damaged): as if it were not there. Its messages are left unread (``lines``);
    ``intact``: the document is known whole (its digest is one this process saved), and the
    messages' is not checked again."""
    end = document.find(b"\n")
    if end < 0:  # VERSION 1: the thread's JSON whole
        data = _object(document)
        messages = data.get("messages") if data is not None and data.get("v") == 1 else None
        if data is None or not isinstance(messages, list):
            return None
        return _thread(data, [m for m in messages if isinstance(m, dict)], None)
    head = _object(document[:end])
    if head is None or head.get("v") != VERSION:
        return None
    lines = document[end + 1 :]
    if not intact and hashlib.sha256(lines).hexdigest() != head.get("sha256"):
        return None
    if lines.count(b"\n") + bool(lines) != head.get("messages"):
        return None
    return _thread(head, [], lines)


def _object(text: bytes) -> dict[str, Any] | None:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _thread(
    data: dict[str, Any], messages: list[dict[str, Any]], lines: bytes | None
) -> Thread | None:
    interrupts, running = data.get("interrupts"), data.get("running")
    if not isinstance(interrupts, list):
        return None
    return Thread(
        messages=messages,
        state=data.get("state"),
        interrupts=[i for i in interrupts if isinstance(i, dict)],
        running=running if isinstance(running, str) else None,
        lines=lines,
    )


#: What a tool message's line holds (``orjson`` writes no space): only such lines are read for
#: a 0.0.x client.
_TOOL_ROLE = b'"role":"tool"'


def snapshot_frames(thread: Thread, *, tool_text: bool = False) -> list[bytes]:
    """``MESSAGES_SNAPSHOT`` of the thread's messages, then ``STATE_SNAPSHOT`` when it has a
    state, as SSE frames. ``tool_text``: a tool's result as text, not content parts (a 0.0.x
    client's schema takes a string only; a 1.0 client may have made the thread), the text of
    its text parts, as the model read it on Chat Completions.

    A document's lines go out as they are kept (a thread of megabytes is not parsed: one
    ``orjson.loads`` of 15 MB holds the GIL, and the event loop, for 30 ms or more); for a
    0.0.x client only its tool messages are read. Else a message at a time: in a worker
    thread, the event loop gets the GIL between messages."""
    if thread.lines is not None and not tool_text:
        listed = thread.lines.replace(b"\n", b",")
    elif thread.lines is not None:
        listed = b",".join([_line_as_text(line) for line in thread.lines.split(b"\n") if line])
    else:
        messages = [_tool_as_text(m) for m in thread.messages] if tool_text else thread.messages
        listed = b",".join([orjson.dumps(message) for message in messages])
    frames = [b"".join([b'data: {"type":"MESSAGES_SNAPSHOT","messages":[', listed, b"]}\n\n"])]
    if thread.state is not None:
        frames.append(_frame({"type": "STATE_SNAPSHOT", "snapshot": thread.state}))
    return frames


def _line_as_text(line: bytes) -> bytes:
    if _TOOL_ROLE not in line:
        return line
    message = _object(line)
    return line if message is None else orjson.dumps(_tool_as_text(message))


def _tool_as_text(message: Any) -> Any:
    content = message.get("content") if isinstance(message, dict) else None
    if message.get("role") != "tool" or not isinstance(content, list):
        return message
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return {**message, "content": "\n".join(t for t in texts if isinstance(t, str))}


def _frame(event: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(event) + b"\n\n"
