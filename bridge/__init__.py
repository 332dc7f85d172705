"""agui-bridge: OpenAI-compatible model servers → AG-UI events, live and lossless.

Code map (the layers, each using only those below it; an import-linter contract holds them):

============================  ======================================================================
``bridge/core/``              the pure pipeline, no I/O: decode → parts → filters → emitter → events
``bridge/config.py``          ``BridgeConfig``, shared by the layers above
``bridge/serve/``             HTTP in and out, in rooms, each on those below it:
``bridge/serve/http/``        the HTTP face: the app, a module per request kind, frames, SSE
``bridge/serve/threads/``     threads kept (--threads): runs kept as they go, the fold, stores
``bridge/serve/run/``         one run: the loop, its requests' bodies, transcript, approvals
``bridge/serve/tools/``       server tools: Python, MCP, MCP Apps, approvals, results
``bridge/serve/upstream/``    the model server: client, failures, transport, SSE, recording
``bridge/serve/observe/``     watching: a run's observation, metrics, traces, the log line
``bridge/serve/redact.py``    secrets out of everything that leaves
``bridge/cli/``               the command: ``agui-bridge``, the demo's upstream, doctor, replay
============================  ======================================================================

The library face: ``translate_chat_stream`` and friends (the core, importable without the
serving stack), and ``create_app``, ``mount``, ``BridgeConfig`` (loaded on first use).
"""

from typing import TYPE_CHECKING, Any

#: The release, read by the build (pyproject's dynamic version), ``--version`` and recordings.
__version__ = "0.1.0"

from bridge.core.errors import (
    BridgeError,
    UpstreamConnectionError,
    UpstreamHTTPError,
    UpstreamProtocolError,
    UpstreamStreamError,
    UpstreamTimeoutError,
    UpstreamTruncatedError,
)
from bridge.core.reasoning_tags import KNOWN_REASONING_TAGS, ReasoningTagFilter
from bridge.core.streams import atranslate_chat_stream, translate_chat_stream
from bridge.core.translate import DONE, ChatStreamTranslator, TranslateOptions, TurnOutcome

if TYPE_CHECKING:
    from bridge.config import BridgeConfig
    from bridge.serve.http.app import create_app, mount
    from bridge.serve.tools.python_tools import asks_user, requires_approval

#: Names of the serving layer, imported when first asked for: the core alone needs no Starlette.
_LAZY = {
    "BridgeConfig": "bridge.config",
    "create_app": "bridge.serve.http.app",
    "mount": "bridge.serve.http.app",
    "requires_approval": "bridge.serve.tools.python_tools",
    "asks_user": "bridge.serve.tools.python_tools",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bridge' has no attribute {name!r}")


__all__ = [
    "DONE",
    "KNOWN_REASONING_TAGS",
    "BridgeConfig",
    "BridgeError",
    "ChatStreamTranslator",
    "ReasoningTagFilter",
    "TranslateOptions",
    "TurnOutcome",
    "UpstreamConnectionError",
    "UpstreamHTTPError",
    "UpstreamProtocolError",
    "UpstreamStreamError",
    "UpstreamTimeoutError",
    "UpstreamTruncatedError",
    "__version__",
    "asks_user",
    "atranslate_chat_stream",
    "create_app",
    "mount",
    "requires_approval",
    "translate_chat_stream",
]
