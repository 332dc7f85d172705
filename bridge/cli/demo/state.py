"""What the scripted model does with a shared state (``serve --shared-state``): it edits the state
with ``update_state`` (README "Shared state").

- **A plan** ("make a plan to …", "plan …"): it writes ``/steps`` (three steps, ``pending``), then
  ticks them off one ``update_state`` a turn (``/steps/N/status`` → ``completed``), then says
  it is done: the agentic generative UI the demo page shows as a steps card.
- **To-dos** ("add a to-do: buy milk", "mark buy milk done", "remove buy milk"): it adds to,
  ticks or removes from ``/todos`` (``{"text", "done"}`` items), reading the list from the
  state it was shown.
- **A patch of the user's own** ("… patch: [ … ]"): that JSON Patch, as written (for tests and
  for seeing what an invalid one does).

Pure and deterministic, as the rest of the script.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

UPDATE_STATE = "update_state"
#: The system message the bridge shows the state in (``bridge.serve.tools.state.state_prompt``).
_STATE_INTRO = "Shared state (JSON)"

_PLAN = re.compile(r"\bplan\b(?:\s+(?:to|for)\b)?\s*(.*)", re.IGNORECASE | re.DOTALL)
_ADD_TODO = re.compile(r"\badd (?:a )?to-?dos?\b[:\s]*(.+)", re.IGNORECASE | re.DOTALL)
_DONE_TODO = re.compile(r"\b(?:mark|tick)\s+(.+?)\s+(?:as\s+)?done\b", re.IGNORECASE)
_REMOVE_TODO = re.compile(r"\bremove\s+(?:the\s+to-?do\s+)?(.+)", re.IGNORECASE | re.DOTALL)
_OWN_PATCH = re.compile(r"\bpatch:\s*(\[.*\])", re.IGNORECASE | re.DOTALL)

#: A scripted turn: its reasoning, its answer, and at most one update_state patch.
Turn = tuple[str, str, list[dict[str, Any]] | None]


def state_turn(
    user_text: str,
    messages: Sequence[Mapping[str, Any]],
    since_user: Sequence[Mapping[str, Any]],
    text_of: Callable[[Mapping[str, Any]], str],
) -> Turn | None:
    """The turn when ``update_state`` is offered and the user asks for a state edit, or ``None``
    (the usual script goes on)."""
    results = [text_of(m) for m in since_user if m.get("role") == "tool"]
    own = _OWN_PATCH.search(user_text)
    if own:
        if results:
            return ("The update is done.", f"The state update said: {results[-1]}", None)
        try:
            patch = json.loads(own.group(1))
        except ValueError:
            patch = own.group(1)
        return ("The user gave the patch; I apply it.", "", patch)
    plan = _PLAN.search(user_text)
    if plan:
        return _plan_turn(plan.group(1).strip(" .?!") or "the task", results)
    return _todo_turn(user_text, _state(messages), results)


def _plan_turn(goal: str, results: Sequence[str]) -> Turn:
    steps = [f"Get ready to {goal}", goal[:1].upper() + goal[1:], "Check the result"]
    if not results:
        value = [{"description": step, "status": "pending"} for step in steps]
        patch = [{"op": "add", "path": "/steps", "value": value}]
        return (f"I will write a plan of {len(steps)} steps for {goal}.", "", patch)
    if any(not result.startswith("State updated") for result in results):
        return ("An update failed.", f"I could not update the plan: {results[-1]}", None)
    done = len(results) - 1  # the first result is the plan itself
    if done < len(steps):
        patch = [{"op": "replace", "path": f"/steps/{done}/status", "value": "completed"}]
        return (f"Step {done + 1} is done: {steps[done]}.", "", patch)
    return ("Every step is done.", f"Done: the {len(steps)} steps of the plan are complete.", None)


def _todo_turn(user_text: str, state: Any, results: Sequence[str]) -> Turn | None:
    patch = _todo_patch(user_text, state)
    if patch is None:
        return None
    if results:
        return ("The list is updated.", f"The to-do list is updated: {results[-1]}", None)
    return ("I edit the to-do list as asked.", "", patch)


def _todo_patch(user_text: str, state: Any) -> list[dict[str, Any]] | None:
    todos = state.get("todos") if isinstance(state, dict) else None
    todos = todos if isinstance(todos, list) else None
    if (found := _ADD_TODO.search(user_text)) is not None:
        item = {"text": found.group(1).strip(" .!"), "done": False}
        if todos is None:
            return [{"op": "add", "path": "/todos", "value": [item]}]
        return [{"op": "add", "path": "/todos/-", "value": item}]
    for pattern, edit in ((_DONE_TODO, "done"), (_REMOVE_TODO, "remove")):
        found = pattern.search(user_text)
        if found is None or todos is None:
            continue
        index = _index_of(todos, found.group(1).strip(" .!"))
        if index is None:
            continue
        if edit == "done":
            return [{"op": "replace", "path": f"/todos/{index}/done", "value": True}]
        return [{"op": "remove", "path": f"/todos/{index}"}]
    return None


def _index_of(todos: list[Any], text: str) -> int | None:
    wanted = text.lower()
    for index, item in enumerate(todos):
        if isinstance(item, dict) and str(item.get("text", "")).lower() == wanted:
            return index
    return None


def _state(messages: Sequence[Mapping[str, Any]]) -> Any:
    """The state the bridge showed (its system message), or ``None``."""
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str) or message.get("role") != "system":
            continue
        if content.startswith(_STATE_INTRO):
            try:
                return json.loads(content.split("\n")[1])
            except (IndexError, ValueError):
                return None
    return None
