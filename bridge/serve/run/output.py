"""Where a run's events go: the one interface between a run and whatever serves it.

A run writes each batch of events as it makes it (``write``: at once, no wait) and lets what it
wrote go (``flush``: waits while the client's socket is full, so the upstream is read no faster
than the client reads). The upstream read flushes before each wait on the network, so the
frames of one network read leave in one send; a batch made outside a read (``RUN_STARTED``, a
tool's result, the run's end) is flushed at once, so no event waits behind the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ag_ui.core import BaseEvent, RunErrorEvent, RunFinishedEvent

from bridge.core.errors import BridgeError

#: The events that end a run: exactly one of them is its last.
RUN_ENDS = (RunFinishedEvent, RunErrorEvent)


class UnencodableEventError(BridgeError):
    """A batch the output could not encode (a value JSON or UTF-8 cannot hold, one nested past
    the encoder's depth: whatever failed). None of it was written, nothing but the run's end
    will be, and the run ends with this as its ``RUN_ERROR`` (``bridge.serve.run.loop``)."""

    code = "unencodable_event"


class RunOutput(Protocol):
    """A run's events, written as they are made and sent when flushed."""

    def write(self, batch: Sequence[BaseEvent]) -> None:
        """Take a batch of events (held until the next ``flush``); ``UnencodableEventError``
        when it cannot be encoded."""

    async def flush(self) -> None:
        """Send what was written since the last flush."""
