"""One run: RUN_STARTED at once, the translated upstream stream, then exactly one
RUN_FINISHED (usage, pending frontend tool calls) or RUN_ERROR (readable message, stable code)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
)

from bridge.config import UpstreamApi
from bridge.core.decode import decode_chat_chunk
from bridge.core.decode_responses import ResponsesDecoder
from bridge.core.errors import BridgeError, InternalError, UpstreamTruncatedError
from bridge.core.parts import Part
from bridge.core.translate import DONE, ChatStreamTranslator, TranslateOptions, TurnOutcome
from bridge.serve.upstream import UpstreamClient

logger = logging.getLogger("agui_bridge")

#: What RUN_FINISHED.result says when the upstream stopped for a reason other than completion.
CUT_MESSAGES = {
    "length": "The answer was cut: the model reached its token limit.",
    "content_filter": "The answer was stopped by the model server's content filter.",
}


async def run_agent(
    run_input: RunAgentInput,
    body: dict[str, Any],
    upstream: UpstreamClient,
    options: TranslateOptions,
    *,
    api: UpstreamApi = "chat",
) -> AsyncGenerator[Sequence[BaseEvent], None]:
    """Yield the run's events, batched per upstream chunk (one SSE write each). ``api``: the
    upstream's API (``body`` was built for it)."""
    yield [
        RunStartedEvent(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            protocol_version=PROTOCOL_VERSION,
        )
    ]
    functions = [tool.get("function", tool) for tool in body.get("tools", ())]
    tools = {function["name"]: function.get("parameters") or {} for function in functions}
    decode: Callable[[dict[str, Any]], list[Part]] = decode_chat_chunk
    path = "/chat/completions"
    if api == "responses":
        decode, path = ResponsesDecoder().decode, "/responses"
    translator = ChatStreamTranslator(options, tool_names=tools, decode=decode)
    error: BridgeError | None = None
    try:
        # aclosing: a client that goes away cancels us here, and the upstream request is closed
        # at once instead of whenever the generator is collected.
        async with aclosing(upstream.stream(body, path)) as chunks:
            async for chunk in chunks:
                events = translator.feed(chunk)
                if events:
                    yield events
                if chunk == DONE:
                    break  # the answer is complete; whatever a server sends after it is not ours
    except BridgeError as exc:
        error = exc
    except Exception:  # a bug of ours: the client gets a clean RUN_ERROR, the log the traceback
        logger.exception("run %s failed", run_input.run_id)
        error = InternalError("the bridge failed while handling this run; see its log")
    tail = translator.close()
    outcome = translator.outcome
    if isinstance(error, UpstreamTruncatedError) and outcome.finish_reason is not None:
        error = None  # cut after the answer was complete: only the usage chunk can be missing
    error = error or outcome.error
    if error is not None:
        logger.warning("run %s ended with %s: %s", run_input.run_id, error.code, error.message)
        tail.append(RunErrorEvent(message=error.message, code=error.code))
    else:
        tail.append(_finished(run_input, outcome))
    yield tail


def _finished(run_input: RunAgentInput, outcome: TurnOutcome) -> RunFinishedEvent:
    result: dict[str, Any] | None = None
    if outcome.finish_reason:
        result = {"finishReason": outcome.finish_reason}
        if outcome.finish_reason in CUT_MESSAGES:
            result["truncated"] = True
            result["message"] = CUT_MESSAGES[outcome.finish_reason]
    return RunFinishedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        result=result,
        usage=[outcome.usage] if outcome.usage is not None else None,
        # Every tool the bridge hands the model is the frontend's: all calls are left to it.
        outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=list(outcome.tool_call_ids))
        if outcome.tool_call_ids
        else None,
    )
