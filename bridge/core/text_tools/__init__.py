"""Tool calls a model wrote as text in ``content``, one module per family of formats.

``filter`` finds the formats' markers in the streamed text and hands each call to its reader in
``formats``; ``call`` holds what every format shares, ``json_call`` reads JSON arguments live;
``xml_tags`` (Qwen3-Coder, GLM, Llama's ``<function=…>``), ``pythonic``, ``sections`` (Kimi K2,
DeepSeek V3) and ``harmony`` (gpt-oss) are the other readers.
"""

from bridge.core.text_tools.filter import FORMAT_ALIASES, TEXT_TOOL_FORMATS, TextToolCalls

__all__ = ["FORMAT_ALIASES", "TEXT_TOOL_FORMATS", "TextToolCalls"]
