"""One upstream network read, one send to the client: what the upstream reader tells the
response being written (``bridge.serve.http.stream`` writes the frames).

The reader marks a read as begun (``reading = True``) when its bytes arrive and calls ``end()``
before it waits for the next: the frames that read produced go out in one send. Frames made
outside a read (``RUN_STARTED`` before the upstream answers, the run's end) are written at once,
so batching never delays an event behind the network."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class ReadBurst(Protocol):
    """The frames made from one upstream network read, written to the client in one send."""

    reading: bool

    async def end(self) -> None:
        """The read is over: write what it produced."""


#: The burst of the response being written, for the upstream reader of the same task.
READ_BURST: ContextVar[ReadBurst | None] = ContextVar("read_burst", default=None)
