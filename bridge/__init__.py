"""agui-bridge: OpenAI-compatible model servers → AG-UI events, live and lossless."""

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
from bridge.core.translate import (
    DONE,
    ChatStreamTranslator,
    TranslateOptions,
    TurnOutcome,
    atranslate_chat_stream,
    translate_chat_stream,
)

__all__ = [
    "DONE",
    "KNOWN_REASONING_TAGS",
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
    "atranslate_chat_stream",
    "translate_chat_stream",
]
