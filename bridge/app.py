"""The ASGI app's public face: ``create_app`` and ``mount`` (the code is in
``bridge.serve.http.app``), and ``from_env``, the app built from the environment for other
servers' workers.

Kept as a module of its own, without a deprecation, because the README and many apps import
``from bridge.app import create_app, mount``; ``from bridge import create_app, mount`` works too.
"""

from __future__ import annotations

import os

from starlette.applications import Starlette

from bridge.core.oneline import say_refused
from bridge.serve.http.app import create_app, mount
from bridge.serve.http.bridge import Bridge

__all__ = ["Bridge", "create_app", "from_env", "mount"]

#: The exit status of a worker that cannot start: uvicorn's supervisor and gunicorn's arbiter
#: then stop, instead of starting it again and again (any other status is a crash to them).
STARTUP_FAILURE = 3


def from_env() -> Starlette:
    """The bridge's app, configured as ``agui-bridge serve`` would be by the flags the
    environment sets (``--flag-name`` is ``AGUI_BRIDGE_FLAG_NAME``; ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY`` as for ``serve``): for ``uvicorn bridge.app:from_env --factory
    --workers N``, gunicorn with uvicorn's worker, granian (README "Deploy"). The agent is at
    ``POST /``; the run lines go to stderr unless the host configured the ``agui_bridge``
    logger. A variable that is missing or wrong is one line on stderr, naming it, and the
    process exits with ``STARTUP_FAILURE`` (no traceback: the server's own would bury it)."""
    from bridge.cli.serving import log_to_stderr
    from bridge.cli.settings import served_from_env

    try:
        config, tools = served_from_env(os.environ)
        log_to_stderr(config.log_format)
        return create_app(config, tools=tools)  # which checks the OTEL_* variables, with tracing on
    except ValueError as exc:
        say_refused(exc)
        raise SystemExit(STARTUP_FAILURE) from None
