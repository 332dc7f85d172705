"""One model turn: one upstream request, its stream translated and written as it arrives.

The upstream read calls ``Turn._take`` with each chunk; the chunk's events are written to the
run's output at once (``bridge.serve.run.output``), so nothing stands between the network and
the client but the translation. A turn ends with ``outcome`` and ``error`` set: how the model
stopped, and what failed (a clean ``RUN_ERROR`` for the run to send).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ag_ui.core import BaseEvent

from bridge.config import UpstreamApi
from bridge.core.decode import decode_chat_chunk
from bridge.core.decode_responses import ResponsesDecoder
from bridge.core.errors import BridgeError, InternalError, UpstreamTruncatedError
from bridge.core.parts import Part
from bridge.core.translate import DONE, ChatStreamTranslator, TranslateOptions, TurnOutcome
from bridge.serve.observe.observation import RunObservation, TurnObservation
from bridge.serve.run.output import RunOutput
from bridge.serve.upstream.client import Chunk, UpstreamClient

logger = logging.getLogger("agui_bridge")


class Turn:
    """One upstream request and the model's turn it streams: ``run()`` writes its batches;
    afterwards ``outcome`` and ``error`` say how it ended.

    Each chunk is taken as it arrives (``_take``, what the upstream read calls): what it reads
    per token is this object's own slots, as few cache lines as it can be (under load each
    object a token touches costs more than the work done with it, ``benchmarks/README.md``)."""

    __slots__ = (
        "_body",
        "_chunks",
        "_content",
        "_feed",
        "_first",
        "_observe",
        "_path",
        "_run_id",
        "_translator",
        "_upstream",
        "_watch",
        "_write",
        "error",
    )
    _watch: TurnObservation  # set by run()
    _write: Callable[[Sequence[BaseEvent]], None]

    def __init__(
        self,
        body: dict[str, Any],
        upstream: UpstreamClient,
        options: TranslateOptions,
        api: UpstreamApi,
        run_id: str,
        observe: RunObservation,
    ) -> None:
        self._body = body
        self._upstream = upstream
        self._run_id = run_id
        self._observe = observe
        functions = [tool.get("function", tool) for tool in body.get("tools", ())]
        tools = {function["name"]: function.get("parameters") or {} for function in functions}
        decode: Callable[[dict[str, Any]], list[Part]] = decode_chat_chunk
        self._path = "/chat/completions"
        if api == "responses":
            decode, self._path = ResponsesDecoder().decode, "/responses"
        self._translator = ChatStreamTranslator(options, tool_names=tools, decode=decode)
        self._feed = self._translator.feed
        self._content = observe.capture_content
        self._chunks = 0  # the chunks read
        self._first = True  # the first output is still to be told
        self.error: BridgeError | None = None

    @property
    def outcome(self) -> TurnOutcome:
        return self._translator.outcome

    def _take(self, chunk: Chunk) -> bool:
        """One chunk, as it arrives: its events written at once; true once the answer is
        complete (whatever a server sends after is not ours)."""
        events = self._feed(chunk)
        if events:
            if self._first:
                self._first = False
                self._watch.output()
            if self._content:
                self._watch.content(events)
            self._write(events)
        if type(chunk) is str and chunk == DONE:
            return True
        self._chunks += 1
        return False

    async def run(self, out: RunOutput) -> None:
        """Stream the turn into ``out``."""
        translator = self._translator
        error: BridgeError | None = None
        watch = self._watch = self._observe.turn(self._body)
        self._write = out.write
        try:
            # A client that goes away cancels us here, and the upstream request is closed at once.
            await self._upstream.stream_into(
                self._body, self._take, path=self._path, observe=watch, flush=out.flush
            )
        except BridgeError as exc:
            error = exc
        except Exception:  # a bug of ours: the client gets a clean RUN_ERROR, the log the traceback
            logger.exception("run %s failed", self._run_id)
            error = InternalError("the bridge failed while handling this run; see its log")
        except BaseException:  # cancelled (the client went away): the turn's span ends too
            watch.chunks = self._chunks
            watch.end(translator.outcome, None, cancelled=True)
            raise
        watch.chunks = self._chunks
        tail = translator.close()
        outcome = translator.outcome
        if isinstance(error, UpstreamTruncatedError) and outcome.finish_reason is not None:
            error = None  # cut after the answer was complete: only the usage chunk can be missing
        self.error = error or outcome.error
        watch.end(outcome, self.error)
        if tail:
            self._write(tail)
