"""A run's progress as AG-UI steps, and what it spent: ``RunProgress``.

A run shows what it is doing as steps a person can read (frontends show them as progress):
``model`` around each model turn, ``tools: get_weather, search`` around each round of server
tools (the tools it runs, each named once). Steps follow one another, never nest: at most one
is open. Every AG-UI client line in use has them (``STEP_STARTED``/``STEP_FINISHED`` are in
the 0.0.52, 0.0.59 and 1.0 schemas) and every line's verifier refuses a ``RUN_FINISHED`` while
a step is open; ``RUN_ERROR`` it takes at any point, but a run ends its step first all the same,
as it ends its open texts: the step is over, and a client's progress display should say so.

The usage of every model turn is kept here too, so that the run's end reports it whichever way
the run ends: ``RUN_FINISHED.usage``, or ``RUN_ERROR.usage`` for a run that spent tokens and
then failed (AG-UI 1.0 and ``@ag-ui/client`` 0.0.59 define it; older lines pass it through).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TokenUsage,
)

from bridge.core.errors import BridgeError
from bridge.serve.run.output import RunOutput

logger = logging.getLogger("agui_bridge")

#: The step around one model turn.
MODEL_STEP = "model"


def tools_step(names: Iterable[str]) -> str:
    """The step around a round of server tools: ``tools:`` and the tools' names, each once, in
    the order the model called them."""
    return "tools: " + ", ".join(dict.fromkeys(names))


class RunProgress:
    """One run's open step and the usage of its model turns."""

    __slots__ = ("_run_id", "_step", "usage")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self._step: str | None = None
        #: One entry per model turn that reported its usage.
        self.usage: list[TokenUsage] = []

    def start(self, name: str) -> StepStartedEvent:
        """The event that starts step ``name``; the step before it is closed first
        (``close``): steps never nest."""
        assert self._step is None, f"step {self._step!r} is still open"
        self._step = name
        return StepStartedEvent(step_name=name)

    def close(self, out: RunOutput) -> None:
        """Write the open step's end, if one is open."""
        if self._step is not None:
            out.write([StepFinishedEvent(step_name=self._step)])
            self._step = None

    def error(self, error: BridgeError) -> RunErrorEvent:
        """``RUN_ERROR`` for ``error``, with the usage spent so far (logged)."""
        logger.warning("run %s ended with %s: %s", self._run_id, error.code, error.message)
        return RunErrorEvent(message=error.message, code=error.code, usage=self.usage or None)

    async def end(self, out: RunOutput, end: BaseEvent) -> None:
        """The run's end: its open step finished, then ``end``, and sent. Written apart, so
        that an end the output cannot encode (the state's snapshot goes in its batch) leaves
        the step's end written, and the run's safety net writes another end after it."""
        self.close(out)
        out.write([end])
        await out.flush()

    async def fail(self, out: RunOutput, error: BridgeError) -> None:
        """The run's end on ``error`` (``end`` with its ``RUN_ERROR``)."""
        await self.end(out, self.error(error))
