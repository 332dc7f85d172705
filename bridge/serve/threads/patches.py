"""The JSON Patches a thread's fold applies (``STATE_DELTA`` to the state, ``ACTIVITY_DELTA`` to
an activity's content) as ``@ag-ui/client`` applies them (``fast-json-patch``'s ``applyPatch``:
all of the patch or nothing; a pointer into ``__proto__`` refused), within the shared state's
bounds (``bridge.serve.tools.patch``: its depth, its text, each copy measured before it is made).

One bound more, for input no one checked: a patch's ``copy`` operations may bring in no more
bytes than the input brought before them (the run's initial state, its snapshots, its patches),
less what copies brought already. Eighteen copies that each double the state would otherwise make
it 2^18 times what it was; bounded so, the documents a fold holds stay within twice its input.
"""

from __future__ import annotations

from typing import Any

import orjson

from bridge.serve.tools.patch import PatchRefused, apply_patch, check_patch

#: The deepest document a patch may make: the deepest JSON the bridge reads from a client
#: (``bridge.serve.http.run_input.MAX_DEPTH``), so a state kept can always be sent back.
MAX_DEPTH = 64


def json_size(value: Any) -> int:
    """The bytes of ``value``'s JSON; 0 for what orjson cannot write (nested past its limit)."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return 0


class Patches:
    """Applies patches within what the input has brought so far (``brought``)."""

    def __init__(self) -> None:
        #: The bytes copies may still bring in.
        self._credit = 0

    def brought(self, value: Any) -> None:
        """A document came with the input (a state, a snapshot, an activity's content)."""
        self._credit += json_size(value)

    def patched(self, document: Any, patch: Any) -> Any:
        """``document`` after ``patch`` (``document`` is left as it is); ``PatchRefused`` when
        the patch is no list of operations, the document no object, or the patch does not
        apply within the bounds."""
        if not isinstance(document, dict) or not isinstance(patch, list):
            raise PatchRefused("invalid", "a patch is a list of operations on a JSON object")
        size = check_patch(patch, max_depth=MAX_DEPTH)
        new = apply_patch(document, patch, size, max_bytes=size + self._credit, max_depth=MAX_DEPTH)
        copied = max(0, json_size(new) - json_size(document) - size)
        self._credit = max(0, self._credit + size - copied)
        return new
