"""``serve --tools package.module``: the Python functions a module names in ``__all__``, served
as ``create_app(tools=[…])`` serves them (``@requires_approval`` kept, the usual timeouts)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from bridge.core.oneline import one_line


def imported_tools(modules: Sequence[str]) -> list[Callable[..., Any]]:
    """The functions each module's ``__all__`` names, in order. The current directory is
    searched first, as ``uvicorn`` searches it for an app (``--app-dir .``). ``ValueError``
    says in one line which module cannot be imported and why, or has no ``__all__``, or names
    something that is not a function."""
    if modules and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    tools: list[Callable[..., Any]] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        # Whatever the module raises as it is imported (a missing package, a syntax error,
        # its own code failing) stops the start, said in one line, not a traceback.
        except Exception as exc:
            raise ValueError(
                f"--tools {name}: cannot import it: {type(exc).__name__}: {one_line(str(exc))}"
            ) from exc
        names = getattr(module, "__all__", None)
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"--tools {name}: the module has no __all__ (a list of the names of the "
                "functions it serves as tools)"
            )
        for attribute in names:
            function = getattr(module, attribute, None)
            if not callable(function):
                raise ValueError(f"--tools {name}: {attribute!r} in __all__ is not a function")
            tools.append(function)
    return tools
