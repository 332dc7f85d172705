"""Shared state (README "Shared state"): the model edits the run's ``state`` with a server tool.

With ``--shared-state``, a run whose ``RunAgentInput.state`` is a JSON object shows the model that
state (``state_prompt``) and offers it ``update_state``, whose one argument ``patch`` is a list of
RFC 6902 operations. The bridge runs the call itself: a patch that applies within its bounds
(``bridge.serve.tools.patch``: the size ``--max-state-bytes``, checked before each copy as well
as after; the depth the bridge takes back from a client) and keeps the schema (``--state-schema``,
by ``jsonschema``, formats included) becomes the run's state, and its operations go to the
client as ``STATE_DELTA``, right after the call's ``TOOL_CALL_RESULT``; one that does not
changes nothing, and the model reads why. A run that changed its state ends with a
``STATE_SNAPSHOT`` of the whole before its terminal event (``bridge.serve.run.loop``).

The run's state is found through ``RUN_STATE``, set by the run before its tools run (the tool's
calls are tasks made in the run's context). Calls apply in the order they were made: each takes
a lock (which asyncio hands out first come, first served) before it awaits anything, and its
task ends in the same step as its patch is applied, so the calls' tasks end in that order too
(``ServerTools.run`` sends results that end together in the calls' order). Every patch is read,
applied and checked in a worker thread: the model chooses its size, and a copy, a patch and a
check of a megabyte hold the event loop for tens of ms.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Literal, TypeGuard

import anyio.to_thread
from ag_ui.core import StateDeltaEvent, StateSnapshotEvent

from bridge.config import BridgeConfig
from bridge.serve.tools.patch import PatchOutcome, PatchRefused, apply_patch, read_patch
from bridge.serve.tools.server_tools import ServerTool, ToolError, ToolOutput

#: The tool's name: a frontend tool of that name is refused while shared state is on.
UPDATE_STATE = "update_state"
#: A new state this small is shown to the model in the call's result.
_SHOWN_STATE = 4 * 1024

StateOutcome = Literal["applied", PatchOutcome]

PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "patch": {
            "type": "array",
            "description": "RFC 6902 JSON Patch operations, applied in order, all or none",
            "items": {
                "type": "object",
                "properties": {
                    "op": {
                        "type": "string",
                        "enum": ["add", "remove", "replace", "move", "copy", "test"],
                    },
                    "path": {"type": "string", "description": "JSON Pointer, e.g. /todos/0/done"},
                    "from": {"type": "string"},
                    "value": {},
                },
                "required": ["op", "path"],
            },
        }
    },
    "required": ["patch"],
}


class RunState:
    """One run's shared state: what the client sent, as the model's patches change it."""

    def __init__(
        self,
        state: Mapping[str, Any],
        *,
        max_depth: int,
        schema: Mapping[str, Any] | None = None,
        max_bytes: int = 1_000_000,
        told: Callable[[StateOutcome], None] | None = None,
    ) -> None:
        """``max_depth``: the deepest state (``{}`` is one level) the bridge takes back from a
        client; a patch may not make a deeper one."""
        self.value: dict[str, Any] = dict(state)
        self.changed = False
        self._validator: Any = None
        if schema is not None:  # the state extra's jsonschema (BridgeConfig checked it is there)
            import jsonschema

            validator = jsonschema.Draft202012Validator
            # Formats too: JSON Schema makes them annotations unless a checker is given.
            self._validator = validator(schema, format_checker=validator.FORMAT_CHECKER)
        self._max_bytes = max_bytes
        self._max_depth = max_depth
        self._told = told
        self._lock = asyncio.Lock()

    async def update(self, arguments: str) -> ToolOutput:
        """Apply one ``update_state`` call's patch; ``ToolError`` (the model reads it) when it
        does not apply, breaks the schema, or would make the state too big or too deep."""
        # The lock before any await: the calls take it in the order they were made.
        async with self._lock:
            try:
                patch, new, text = await anyio.to_thread.run_sync(self._patched, arguments)
            except PatchRefused as exc:
                if self._told is not None:
                    self._told(exc.outcome)
                raise ToolError(f"{exc}. The state is unchanged.") from None
            self.value, self.changed = new, True
        # Nothing awaited since the patch applied: this call's task ends before the next
        # call's patch can apply (the module's docstring says why that matters).
        if self._told is not None:
            self._told("applied")
        shown = f" The state is now: {text}" if len(text) <= _SHOWN_STATE else ""
        return ToolOutput(f"State updated.{shown}", after=(StateDeltaEvent(delta=patch),))

    def _patched(self, arguments: str) -> tuple[list[Any], dict[str, Any], str]:
        """The call's patch, the state it makes (all of it or none: applied to a copy) and that
        state's JSON; ``PatchRefused`` when it does not hold."""
        patch, size = read_patch(arguments, max_depth=self._max_depth)
        new = apply_patch(
            self.value, patch, size, max_bytes=self._max_bytes, max_depth=self._max_depth
        )
        if self._validator is not None:
            errors = list(itertools.islice(self._validator.iter_errors(new), 3))
            if errors:
                where = "; ".join(
                    f"{'/'.join(map(str, error.absolute_path)) or 'the state'}: "
                    f"{error.message[:200]}"
                    for error in errors
                )
                raise PatchRefused("schema", f"the new state breaks the schema: {where}")
        text = _dumped(new)
        size = len(text.encode())
        if size > self._max_bytes:
            raise PatchRefused(
                "too_large", f"the new state would be {size} bytes, over {self._max_bytes}"
            )
        return patch, new, text

    def snapshot(self) -> StateSnapshotEvent:
        return StateSnapshotEvent(snapshot=self.value)


#: The state of the run in progress (``None``: the run has none to edit).
RUN_STATE: ContextVar[RunState | None] = ContextVar("agui_bridge_run_state", default=None)


def shares_state(state: Any, config: BridgeConfig) -> TypeGuard[dict[str, Any]]:
    """Whether a run edits its state: shared state is on and the run's state is a JSON object
    (what is shown to the model, offered ``update_state`` and sent ``STATE_*`` events)."""
    return config.shared_state and isinstance(state, dict)


def update_state_tool() -> ServerTool:
    """The server tool the model edits the state with."""

    async def invoke(arguments: str) -> ToolOutput:
        state = RUN_STATE.get()
        if state is None:
            raise ToolError("this conversation has no shared state to update")
        return await state.update(arguments)

    return ServerTool(
        UPDATE_STATE,
        "Change the shared state the user's app shows, with RFC 6902 JSON Patch operations "
        '(e.g. {"patch": [{"op": "replace", "path": "/todos/0/done", "value": true}]}).',
        PATCH_SCHEMA,
        invoke,
    )


def state_prompt(state: Any, schema: Mapping[str, Any] | None) -> str:
    """The system message that shows the model the state it may edit."""
    text = (
        "Shared state (JSON), which the user's app shows. Change it only with the update_state "
        f"tool (RFC 6902 JSON Patch operations):\n{_dumped(state)}"
    )
    if schema is not None:
        text += f"\nThe state must keep to this JSON Schema:\n{_dumped(schema)}"
    return text


def _dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
