"""The module paths of before the core/serve layout (issue 14), importable for one release.

Each old module (``bridge/decode.py``, …) is a two-line stub that calls ``alias``: importing it
warns and hands back the moved module itself, so every name (private ones too) and every
monkeypatch reaches the real thing.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new}: import it from there (the old path goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old] = importlib.import_module(new)
