"""The pure pipeline for Chat Completions: chunk → decode → reasoning-tag filter → emitter.

``ChatStreamTranslator`` holds one turn's state (``feed(chunk)`` / ``close()``);
``bridge.core.streams`` drives it over a whole stream. No I/O.
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from ag_ui.core import BaseEvent, TokenUsage

from bridge.core.decode import decode_chat_chunk, one_text_field
from bridge.core.emitter import EventEmitter, IdFactory, random_id, reasoning_content, text_content
from bridge.core.errors import (
    BridgeError,
    UpstreamProtocolError,
    UpstreamStreamError,
    UpstreamTruncatedError,
)
from bridge.core.parts import (
    BrokenToolCall,
    EncryptedReasoning,
    Failed,
    Finish,
    Part,
    Reasoning,
    Text,
    ToolCallDelta,
    ToolCallDone,
    Usage,
)
from bridge.core.reasoning_tags import (
    DEFAULT_REASONING_TAGS,
    ReasoningTagFilter,
    TagPair,
    resolve_reasoning_tags,
)
from bridge.core.text_tools.filter import FORMAT_ALIASES, TEXT_TOOL_FORMATS, TextToolCalls

DONE = "[DONE]"
"""The SSE data line that ends an OpenAI-compatible stream; ``feed(DONE)`` records it."""

# How much tag-wrapped reasoning to remember in case a field repeats it (llama.cpp
# deepseek-legacy); an echo, if it comes, starts at once.
_ECHO_LIMIT = 4096


@lru_cache(maxsize=64)
def _either(stops: frozenset[str], more: frozenset[str]) -> frozenset[str]:
    """The characters either filter stops at, made once per pair of marker sets (each stream's
    filters share them): not a set of its own each time a stream's lanes are set."""
    return stops | more


@runtime_checkable
class SupportsModelDump(Protocol):
    """A pydantic model, such as the ``openai`` SDK's ``ChatCompletionChunk``."""

    def model_dump(self) -> dict[str, Any]: ...


Chunk = Mapping[str, Any] | SupportsModelDump | str
ToolNames = Collection[str] | Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, kw_only=True)
class TranslateOptions:
    """How to read model output that the server left unparsed."""

    reasoning_tags: Sequence[TagPair | str] = DEFAULT_REASONING_TAGS
    """Reasoning tag pairs looked for in ``content``: names from ``KNOWN_REASONING_TAGS``
    (``think``, ``thinking``, ``reasoning``, ``thought``, ``THINK``, ``seed:think``) or
    ``(open, close)`` pairs. Default: ``<think>…</think>``."""

    text_tool_format: str = "auto"
    """Tool calls the model writes as text in ``content`` (no server-side tool parser): one
    format of ``TEXT_TOOL_FORMATS`` (``hermes``, ``mistral``, ``llama``, ``pythonic``,
    ``qwen3_coder``, ``glm45``, ``kimi_k2``, ``deepseek_v3``, ``harmony``; vLLM's parser names
    such as ``llama3_json`` or ``openai`` are accepted too), or ``auto``: every format, only when
    the request offered tools and only at a format's opening marker (harmony's channels, which
    also carry reasoning, are read even without tools); ``none``: never."""

    starts_in_reasoning: bool = False
    """The chat template opens the reasoning tag in the prompt, so the content starts inside
    reasoning and only the closing tag arrives (DeepSeek-R1 distills, Qwen3 2507 thinking).
    Ignored once the server itself delivers reasoning in a field."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reasoning_tags", resolve_reasoning_tags(self.reasoning_tags))
        fmt = FORMAT_ALIASES.get(self.text_tool_format, self.text_tool_format)
        if fmt not in ("auto", "none", *TEXT_TOOL_FORMATS):
            raise ValueError(
                f"text_tool_format must be auto, none or one of {TEXT_TOOL_FORMATS}, "
                f"not {self.text_tool_format!r}"
            )
        object.__setattr__(self, "text_tool_format", fmt)


@dataclass(frozen=True)
class TurnOutcome:
    """What the run needs to end: the finish reason, usage, the calls left, or the error."""

    finish_reason: str | None
    usage: TokenUsage | None
    tool_call_ids: tuple[str, ...] = field(default=())
    tool_call_names: tuple[str, ...] = field(default=())
    """The name of each call of ``tool_call_ids``, in the same order."""
    error: BridgeError | None = None
    #: What the upstream said of why it finished (``Finish.detail``).
    finish_detail: str | None = None


class ChatStreamTranslator:
    """One assistant turn of a Chat Completions stream → AG-UI events.

    Call ``feed`` for each chunk (a parsed SSE JSON object, an object with ``model_dump()``,
    or ``DONE``), then ``close()`` always. ``feed`` raises ``BridgeError`` for an upstream error
    chunk or a malformed chunk; ``close()`` never raises: it ends whatever is open and records a
    truncated stream in ``outcome.error``.
    """

    __slots__ = (
        "_carried",
        "_closed",
        "_decode",
        "_done",
        "_echo",
        "_emitter",
        "_error",
        "_field_reasoning",
        "_finish_detail",
        "_finish_reason",
        "_lanes",
        "_reasoning_lane",
        "_tag_reasoning",
        "_tag_reasoning_size",
        "_tags",
        "_text_lane",
        "_text_tools",
    )

    def __init__(
        self,
        options: TranslateOptions | None = None,
        *,
        new_id: IdFactory = random_id,
        tool_names: ToolNames = (),
        decode: Callable[[dict[str, Any]], list[Part]] = decode_chat_chunk,
    ):
        """``decode``: reads one upstream object into parts (Chat Completions chunks by
        default; ``ResponsesDecoder().decode`` for the Responses API). ``tool_names``: the
        tools the request gave the model, or a mapping of their names to their parameters'
        JSON schema (with ``text_tool_format="auto"``, calls written as text
        are looked for only then; a call without a marker of its own, such as a bare JSON
        object, must name one of them; Qwen3-Coder's and GLM's values are typed by the schema)."""
        options = options or TranslateOptions()
        self._decode = decode
        fmt = options.text_tool_format
        self._text_tools: TextToolCalls | None = None
        if fmt in TEXT_TOOL_FORMATS:
            self._text_tools = TextToolCalls((fmt,), tool_names=tool_names)
        elif fmt == "auto" and tool_names:
            self._text_tools = TextToolCalls(tool_names=tool_names)
        elif fmt == "auto":
            self._text_tools = TextToolCalls(("harmony",), calls=False)
        self._tags = ReasoningTagFilter(
            options.reasoning_tags,  # type: ignore[arg-type]  # normalised in __post_init__
            starts_in_reasoning=options.starts_in_reasoning,
        )
        self._emitter = EventEmitter(new_id=new_id)
        self._field_reasoning = False
        self._tag_reasoning: list[str] = []
        self._tag_reasoning_size = 0
        self._echo = ""
        self._finish_reason: str | None = None
        self._finish_detail: str | None = None
        self._done = False
        self._closed = False
        self._error: BridgeError | None = None
        self._carried: list[BaseEvent] = []
        # The fast lanes (``_open_lanes``): a chunk of one text field that the whole pipeline
        # would turn into one content event, leaving every state as it was, is turned into it
        # here. Most chunks of a stream are such; under load each step of the pipeline cost
        # several times what it costs alone (benchmarks/README.md, issue 34).
        self._lanes = decode is decode_chat_chunk
        self._text_lane: tuple[str, frozenset[str]] | None = None  # message id, stop characters
        self._reasoning_lane: str | None = None  # message id

    @property
    def assistant_message_id(self) -> str:
        """The id of this turn's assistant message (text and tool calls' parent)."""
        return self._emitter.assistant_id

    @property
    def outcome(self) -> TurnOutcome:
        emitter = self._emitter
        return TurnOutcome(
            finish_reason=self._finish_reason,
            usage=emitter.usage,
            tool_call_ids=tuple(emitter.tool_call_ids),
            tool_call_names=tuple(emitter.tool_call_names[call] for call in emitter.tool_call_ids),
            error=self._error,
            finish_detail=self._finish_detail,
        )

    def feed(self, chunk: Chunk) -> list[BaseEvent]:
        if (self._text_lane or self._reasoning_lane) and type(chunk) is dict:
            field = one_text_field(chunk)
            if field is not None:
                key, text = field
                if not text:
                    return []
                if key == "content":
                    if self._text_lane is not None:
                        message_id, stops = self._text_lane
                        for char in stops:
                            if char in text:
                                break
                        else:
                            return [text_content(message_id, text)]
                elif self._reasoning_lane is not None:
                    reasoning_id = self._reasoning_lane
                    return [reasoning_content(reasoning_id, text)]
        try:
            return self._feed(chunk)
        finally:
            self._open_lanes()

    def _open_lanes(self) -> None:
        """Which chunks the next ``feed`` may take by a lane: answer text while a text message
        is open and neither the tag filter nor the text tool parser is inside anything, with
        none of the characters their markers begin with; field reasoning while a reasoning
        message is open and no echo of tagged reasoning is being matched."""
        self._text_lane = self._reasoning_lane = None
        if not self._lanes or self._error is not None or self._closed:
            return
        emitter = self._emitter
        text_id = emitter.open_text_id
        if text_id is not None:
            stops = self._tags.plain_text_stops()
            if stops is not None and self._text_tools is not None:
                more = self._text_tools.plain_text_stops()
                stops = None if more is None else _either(stops, more)
            if stops is not None:
                self._text_lane = (text_id, stops)
        if self._field_reasoning and not self._echo:
            self._reasoning_lane = emitter.open_reasoning_id

    def _feed(self, chunk: Chunk) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if isinstance(chunk, str):
            if chunk.strip() != DONE:
                self._fail(UpstreamProtocolError(f"unexpected upstream data line {chunk[:40]!r}"))
            self._done = True
            self._end_turn(out)
            return out
        if type(chunk) is not dict:
            if isinstance(chunk, Mapping):
                chunk = dict(chunk)
            elif isinstance(chunk, SupportsModelDump):
                chunk = chunk.model_dump()
            else:
                self._fail(UpstreamProtocolError("upstream chunk is not a JSON object"))
        try:
            for part in self._decode(chunk):
                self._route(part, out)
        except BridgeError as exc:
            self._carried = out  # what this chunk produced before the error: close() emits it
            self._fail(exc)
        return out

    def close(self) -> list[BaseEvent]:
        self._text_lane = self._reasoning_lane = None
        out, self._carried = self._carried, []
        if self._closed:
            return out
        self._closed = True
        try:
            self._end_turn(out)
        except BridgeError as exc:
            self._error = self._error or exc
        if self._error is None and self._finish_reason is None:
            # [DONE] alone does not say the answer is whole: llama-cpp-python's server ends a
            # stream it cut (for a second request) with [DONE] and no finish_reason.
            said = "[DONE] and no finish_reason" if self._done else "no finish_reason and no [DONE]"
            self._error = UpstreamTruncatedError(
                f"the upstream stream ended before the answer was complete ({said})"
            )
        return out

    def _fail(self, error: BridgeError) -> Any:
        self._error = self._error or error
        raise error

    def _route(self, part: Part, out: list[BaseEvent]) -> None:
        kind = type(part)
        if kind is Text:
            for piece in self._tags.feed(part.text):  # type: ignore[union-attr]
                if type(piece) is Text:
                    self._answer_text(piece.text, out)
                else:
                    self._reasoning_from_tags(piece.text, out)
        elif kind is Reasoning:
            self._reasoning_from_field(part.text, out, part.message_id)  # type: ignore[union-attr]
        elif kind is ToolCallDelta:
            if self._text_tools is not None:
                # The server parses tool calls itself: the text parsers stand down.
                self._route_text_tools(self._text_tools.close(), out)
                self._text_tools = None
            self._emitter.tool_call(part, out)  # type: ignore[arg-type]
        elif kind is Finish:
            self._finish_reason = part.reason  # type: ignore[union-attr]
            self._finish_detail = part.detail  # type: ignore[union-attr]
            self._end_turn(out)
        elif kind is EncryptedReasoning:
            self._emitter.encrypted_reasoning(part.value, out, part.message_id)  # type: ignore[union-attr]
        elif kind is ToolCallDone:
            self._emitter.end_tool_call(part.index, out)  # type: ignore[union-attr]
        elif kind is Usage:
            self._emitter.usage = part.usage  # type: ignore[union-attr]
        elif kind is Failed:
            self._fail(UpstreamStreamError(part.message))  # type: ignore[union-attr]

    def _reasoning_from_tags(self, text: str, out: list[BaseEvent]) -> None:
        if self._field_reasoning:
            return  # the server delivers reasoning in a field: tags only repeat it (sticky)
        if self._tag_reasoning_size < _ECHO_LIMIT:
            self._tag_reasoning.append(text)
            self._tag_reasoning_size += len(text)
        self._emitter.reasoning(text, out)

    def _reasoning_from_field(
        self, text: str, out: list[BaseEvent], message_id: str | None = None
    ) -> None:
        if not self._field_reasoning:
            self._field_reasoning = True
            self._tags.leave_implicit_reasoning()
            if self._tag_reasoning_size < _ECHO_LIMIT:
                self._echo = "".join(self._tag_reasoning)
            self._tag_reasoning.clear()
        if self._echo:
            # llama.cpp deepseek-legacy: the field repeats reasoning already shown from tags.
            size = min(len(self._echo), len(text))
            if self._echo[:size] == text[:size]:
                self._echo = self._echo[size:]
                text = text[size:]
            else:
                self._echo = ""
        self._emitter.reasoning(text, out, message_id)

    def _answer_text(self, text: str, out: list[BaseEvent]) -> None:
        if self._text_tools is None:
            self._emitter.text(text, out)
        else:
            self._route_text_tools(self._text_tools.feed(text), out)

    def _route_text_tools(self, parts: list[Part], out: list[BaseEvent]) -> None:
        for part in parts:
            kind = type(part)
            if kind is Text:
                self._emitter.text(part.text, out)  # type: ignore[union-attr]
            elif kind is Reasoning:  # harmony's analysis channel
                self._emitter.reasoning(part.text, out)  # type: ignore[union-attr]
            elif kind is ToolCallDelta:
                self._emitter.tool_call(part, out)  # type: ignore[arg-type]
            elif kind is BrokenToolCall and not self._emitter.broken_call(part, out):  # type: ignore[arg-type]
                self._emitter.text(part.text, out)  # type: ignore[union-attr]

    def _end_turn(self, out: list[BaseEvent]) -> None:
        for piece in self._tags.close():
            if type(piece) is Text:
                self._answer_text(piece.text, out)
            else:
                self._reasoning_from_tags(piece.text, out)
        if self._text_tools is not None:
            self._route_text_tools(self._text_tools.close(), out)
        self._emitter.close(out)
