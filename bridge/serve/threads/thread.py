"""A thread as the store keeps it, and as a hydrate sends it back.

The document is the thread's JSON: its AG-UI messages as the client holds them (camelCase),
its state, the interrupts it waits on, and the run going on in it (``running``), if any. The
frames a hydrate sends are made from it directly (``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT``):
the messages were checked when they came in, and a thread of megabytes is not validated again
event by event on the way out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from ag_ui.core import Message

#: The document's form; a document of another is read as no thread.
VERSION = 1


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

    def document(self) -> bytes:
        return orjson.dumps(
            {
                "v": VERSION,
                "messages": self.messages,
                "state": self.state,
                "interrupts": self.interrupts,
                "running": self.running,
            }
        )


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


def read_document(document: bytes) -> Thread | None:
    """The thread a document holds; ``None`` for one this bridge cannot read (another
    version's, damaged): as if it were not there."""
    try:
        data = orjson.loads(document)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("v") != VERSION:
        return None
    messages, interrupts = data.get("messages"), data.get("interrupts")
    running = data.get("running")
    if not isinstance(messages, list) or not isinstance(interrupts, list):
        return None
    return Thread(
        messages=[m for m in messages if isinstance(m, dict)],
        state=data.get("state"),
        interrupts=[i for i in interrupts if isinstance(i, dict)],
        running=running if isinstance(running, str) else None,
    )


def snapshot_frames(thread: Thread, *, tool_text: bool = False) -> list[str]:
    """``MESSAGES_SNAPSHOT`` of the thread's messages, then ``STATE_SNAPSHOT`` when it has a
    state, as SSE frames. ``tool_text``: a tool's result as text, not content parts (a 0.0.x
    client's schema takes a string only; a 1.0 client may have made the thread), the text of
    its text parts, as the model read it on Chat Completions."""
    messages = [_tool_as_text(m) for m in thread.messages] if tool_text else thread.messages
    # A message at a time (the same bytes as the event encoded whole): in a worker thread, the
    # event loop gets the GIL between messages, not only after a thread of megabytes.
    listed = ",".join([orjson.dumps(message).decode() for message in messages])
    frames = [f'data: {{"type":"MESSAGES_SNAPSHOT","messages":[{listed}]}}\n\n']
    if thread.state is not None:
        frames.append(_frame({"type": "STATE_SNAPSHOT", "snapshot": thread.state}))
    return frames


def _tool_as_text(message: Any) -> Any:
    content = message.get("content") if isinstance(message, dict) else None
    if message.get("role") != "tool" or not isinstance(content, list):
        return message
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return {**message, "content": "\n".join(t for t in texts if isinstance(t, str))}


def _frame(event: dict[str, Any]) -> str:
    return f"data: {orjson.dumps(event).decode()}\n\n"
