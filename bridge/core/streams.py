"""A whole Chat Completions stream → AG-UI events: ``translate_chat_stream`` over an iterable of
chunks, ``atranslate_chat_stream`` over an async one, each driving one ``ChatStreamTranslator``.
No I/O."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

from ag_ui.core import BaseEvent

from bridge.core.emitter import IdFactory, random_id
from bridge.core.errors import BridgeError
from bridge.core.translate import ChatStreamTranslator, Chunk, ToolNames, TranslateOptions


def translate_chat_stream(
    chunks: Iterable[Chunk],
    options: TranslateOptions | None = None,
    *,
    new_id: IdFactory = random_id,
    tool_names: ToolNames = (),
) -> Iterator[BaseEvent]:
    """Translate a whole stream; a ``BridgeError`` is raised after the last event."""
    translator = ChatStreamTranslator(options, new_id=new_id, tool_names=tool_names)
    try:
        for chunk in chunks:
            yield from translator.feed(chunk)
    except BridgeError:
        yield from translator.close()
        raise
    yield from translator.close()
    if translator.outcome.error is not None:
        raise translator.outcome.error


async def atranslate_chat_stream(
    chunks: AsyncIterable[Chunk],
    options: TranslateOptions | None = None,
    *,
    new_id: IdFactory = random_id,
    tool_names: ToolNames = (),
) -> AsyncIterator[BaseEvent]:
    """The async form of ``translate_chat_stream``, driving the same ``ChatStreamTranslator``."""
    translator = ChatStreamTranslator(options, new_id=new_id, tool_names=tool_names)
    try:
        async for chunk in chunks:
            for event in translator.feed(chunk):
                yield event
    except BridgeError:
        for event in translator.close():
            yield event
        raise
    for event in translator.close():
        yield event
    if translator.outcome.error is not None:
        raise translator.outcome.error
