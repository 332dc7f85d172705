"""A model's JSON Patch on the shared state, applied within bounds (README "Shared state").

The model writes the patch, so nothing in it is trusted, and every bound holds before the work
it bounds (a copy that copies a subtree into itself doubles the state: 18 of them in one patch
made it 2^18 times bigger before a check made afterwards ran):

- **Read**: the arguments are JSON (``NaN`` and ``Infinity`` are not: the model would read them
  back as ``NaN``, no client as a number), a list of operations no deeper than a state may be
  (``max_depth`` and the two levels of the list and its operation), holding Unicode text only (a
  lone surrogate such as ``"\\ud800"`` cannot be written out), whose pointers do not go into
  ``__proto__`` or ``constructor/prototype`` (the AG-UI client refuses such a patch whole).
- **Applied** one operation at a time by ``jsonpatch``, on a copy (all of it or none). What the
  patch brings into the state (its own JSON, which holds every value it adds, and each subtree it
  copies, measured before the copy is made) may not pass ``max_bytes``.
- **Made**: a JSON object no deeper than ``max_depth``, the deepest state the bridge takes back
  from a client (a state it made and could not take back would lock the thread out).

``PatchRefused`` says why not, and how the refusal is counted (``outcome``).
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any, Literal, NoReturn

import jsonpatch
import jsonpointer

#: Why a patch was refused, as ``agui_bridge_state_updates_total`` counts it.
PatchOutcome = Literal["invalid", "schema", "too_large", "too_deep"]

#: The levels a patch has above the values it holds: its list, and each operation.
_ABOVE_VALUES = 2


class PatchRefused(Exception):
    """A patch that does not hold (``outcome`` says how); the message is for the model."""

    def __init__(self, outcome: PatchOutcome, why: str) -> None:
        super().__init__(why)
        self.outcome = outcome


def read_patch(arguments: str, *, max_depth: int) -> tuple[list[Any], int]:
    """The ``patch`` of an ``update_state`` call's arguments, checked as the module says, and
    the bytes of its JSON."""
    try:
        value = json.loads(arguments or "{}", parse_constant=_not_a_number)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:
        raise PatchRefused("invalid", f"the arguments are not valid JSON: {exc}") from exc
    patch = value.get("patch") if isinstance(value, dict) else None
    if not isinstance(patch, list):
        raise PatchRefused("invalid", "'patch' must be a list of JSON Patch operations")
    return patch, check_patch(patch, max_depth=max_depth)


def check_patch(patch: list[Any], *, max_depth: int) -> int:
    """The bytes of ``patch``'s JSON, once its depth, its text and its pointers are checked as
    the module says (for a patch read from elsewhere than a model's arguments: a ``STATE_DELTA``
    applied as the client applies it)."""
    if _depth_over(patch, max_depth + _ABOVE_VALUES):
        raise _too_deep(max_depth)
    try:
        size = _json_bytes(patch)
    except UnicodeEncodeError as exc:
        raise PatchRefused(
            "invalid",
            f"a lone surrogate ({exc.object[exc.start]!r}) is not Unicode text; write characters "
            "outside the BMP as a surrogate pair",
        ) from None
    for operation in patch:
        for member in ("path", "from"):
            pointer = operation.get(member) if isinstance(operation, dict) else None
            if isinstance(pointer, str) and _into_prototype(pointer):
                raise PatchRefused(
                    "invalid",
                    f"the pointer {pointer[:200]!r} goes into __proto__ or constructor/prototype, "
                    "which AG-UI clients refuse",
                )
    return size


def apply_patch(
    state: dict[str, Any], patch: list[Any], size: int, *, max_bytes: int, max_depth: int
) -> dict[str, Any]:
    """The state ``patch`` (of ``size`` bytes, as ``read_patch`` read it) makes of ``state``,
    which is left as it is."""
    try:
        jsonpatch.JsonPatch(patch)  # every operation well formed before any runs
        if _depth_over(state, max_depth):  # a state from elsewhere: copied below, recursively
            raise _too_deep(max_depth)
        if size > max_bytes:
            raise PatchRefused(
                "too_large", f"the new state would be over {max_bytes} bytes: the patch is {size}"
            )
        new: Any = copy.deepcopy(state)
        brought = size
        for index, operation in enumerate(patch):
            if operation["op"] == "copy":
                copied = _json_bytes(jsonpointer.resolve_pointer(new, operation["from"]))
                brought += copied
                if brought > max_bytes:
                    raise PatchRefused(
                        "too_large",
                        f"the new state would be over {max_bytes} bytes: operation {index} "
                        f"copies {copied} bytes, and the patch would add {brought} in all",
                    )
            new = jsonpatch.JsonPatch([operation]).apply(new, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise PatchRefused("invalid", f"the patch does not apply: {exc}") from exc
    except RecursionError:  # copies and moves nested it past what Python can walk
        raise _too_deep(max_depth) from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise PatchRefused("invalid", f"the patch is malformed: {exc!r}") from exc
    if not isinstance(new, dict):
        raise PatchRefused("invalid", "the state must stay a JSON object")
    if _depth_over(new, max_depth):
        raise _too_deep(max_depth)
    return new


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels deep (``{}`` is one
    level). An explicit stack: no recursion to exhaust, and it stops at the first level too
    deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            if level > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return False


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _into_prototype(pointer: str) -> bool:
    """The check ``fast-json-patch`` (under ``@ag-ui/client``) makes of each key it walks."""
    try:
        parts = jsonpointer.JsonPointer(pointer).parts
    except jsonpointer.JsonPointerException:
        return False  # not a pointer: jsonpatch says so
    return "__proto__" in parts or any(
        key == "prototype" and parent == "constructor" for parent, key in itertools.pairwise(parts)
    )


def _not_a_number(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number; write null, or a string")


def _too_deep(max_depth: int) -> PatchRefused:
    return PatchRefused(
        "too_deep",
        f"the new state would nest arrays and objects deeper than {max_depth} levels, the "
        "deepest state a client may send back",
    )
