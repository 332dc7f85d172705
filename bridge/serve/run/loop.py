"""One run: RUN_STARTED at once, the translated upstream stream, then exactly one
RUN_FINISHED (usage, pending frontend tool calls) or RUN_ERROR (readable message, stable code).

With server tools (``ToolLoop``) one run may hold several model turns: when the model calls
server tools, they run here, each answered with TOOL_CALL_RESULT, and the model's next turn
streams in the same run, until it answers, calls frontend tools (the run ends with them
pending, after the turn's server calls ran), or the rounds run out.

A call to a server tool under approval is not run: the turn's other server calls run, and the
run ends with RUN_FINISHED whose outcome is an interrupt per waiting call. The next run answers
them in ``resume``: the answered calls' results come first (the approved ones run), then the
model's turn goes on as in the loop (``bridge.serve.run.resume``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    Message,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TokenUsage,
)

from bridge.config import UpstreamApi
from bridge.core.decode import decode_chat_chunk
from bridge.core.decode_responses import ResponsesDecoder
from bridge.core.errors import BridgeError, InternalError, UpstreamTruncatedError
from bridge.core.parts import Part
from bridge.core.translate import DONE, ChatStreamTranslator, TranslateOptions, TurnOutcome
from bridge.serve.observe.observation import RunObservation, Telemetry, TurnObservation
from bridge.serve.run.output import RunOutput
from bridge.serve.run.resume import Approvals, resumed_results
from bridge.serve.run.transcript import Transcript
from bridge.serve.tools.approvals import InterruptError, InterruptInvalidError, new_secret
from bridge.serve.tools.claims import ApprovalStoreError
from bridge.serve.tools.results import with_after
from bridge.serve.tools.server_tools import ServerTools
from bridge.serve.tools.state import RUN_STATE, RunState
from bridge.serve.upstream.client import Chunk, UpstreamClient

logger = logging.getLogger("agui_bridge")

#: What RUN_FINISHED.result says when the upstream stopped for a reason other than completion.
CUT_MESSAGES = {
    "length": "The answer was cut: the model reached its token limit.",
    "content_filter": "The answer was stopped by the model server's content filter.",
}


class ToolRoundsExceededError(BridgeError):
    """The model kept calling server tools past ``ToolLoop.max_rounds`` in one run."""

    code = "tool_rounds_exceeded"


Prepare = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Takes the run's first request body once the run has begun; gives the one to send."""


@dataclass(frozen=True)
class ToolLoop:
    """What a run needs to run server tools and go on: the tools, how to build the next
    request from the whole conversation, the most rounds of server calls in one run, and how
    calls that wait for a person are signed and checked (``None``: a secret of the loop's own,
    so that no call under approval ever runs unapproved)."""

    tools: ServerTools
    build: Callable[[Sequence[Message]], dict[str, Any]]
    max_rounds: int = 16
    approvals: Approvals | None = None


def run_agent(
    run_input: RunAgentInput,
    body: dict[str, Any],
    upstream: UpstreamClient,
    options: TranslateOptions,
    out: RunOutput,
    *,
    api: UpstreamApi = "chat",
    loop: ToolLoop | None = None,
    observe: RunObservation | None = None,
    prepare: Prepare | None = None,
    state: RunState | None = None,
    predict_state: Sequence[tuple[str, str, str]] = (),
) -> Awaitable[None]:
    """The run, to await: its events written to ``out``, batched per upstream chunk (one SSE
    write per network read, ``bridge.serve.run.output``). ``api``: the upstream's API (``body``
    was built for it); ``loop``: the server tools, if any; ``observe``: the run's telemetry
    (``bridge.serve.observe``), told of its turns and tools; ``prepare``: what may build
    ``body`` again once RUN_STARTED is out (what reasoning goes back, read from the upstream);
    ``state``: the run's shared state, which ``update_state`` edits (a run that changed it
    ends with its ``STATE_SNAPSHOT`` before the terminal event); ``predict_state``:
    ``(state_key, tool, tool_argument)`` announced by a ``CUSTOM`` ``PredictState`` right
    after ``RUN_STARTED``."""
    args = (run_input, body, upstream, options, api, loop, observe, prepare, predict_state)
    if state is None:  # a run without a state to edit pays nothing for it per chunk
        return _run(out, *args)
    return _with_state(_run(_WithState(out, state), *args), state)


async def _with_state(run: Awaitable[None], state: RunState) -> None:
    token = RUN_STATE.set(state)  # where its update_state calls find it
    try:
        await run
    finally:
        with suppress(ValueError):  # ended in another context: the variable goes with it
            RUN_STATE.reset(token)


class _WithState:
    """A run's output that writes the state's snapshot before the terminal event when the
    run changed it."""

    def __init__(self, out: RunOutput, state: RunState) -> None:
        self._out, self._state = out, state
        self.flush = out.flush

    def write(self, batch: Sequence[BaseEvent]) -> None:
        if self._state.changed and batch and _terminal(batch[-1]):
            batch = [*batch[:-1], self._state.snapshot(), batch[-1]]
        self._out.write(batch)


def _terminal(event: BaseEvent) -> bool:
    return isinstance(event, RunFinishedEvent | RunErrorEvent)


async def _run(
    out: RunOutput,
    run_input: RunAgentInput,
    body: dict[str, Any],
    upstream: UpstreamClient,
    options: TranslateOptions,
    api: UpstreamApi,
    loop: ToolLoop | None,
    observe: RunObservation | None,
    prepare: Prepare | None,
    predict_state: Sequence[tuple[str, str, str]],
) -> None:
    if observe is None:
        observe = Telemetry().run(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            model=str(body.get("model", "")),
            protocol="",
            received=time.perf_counter(),
        )
    started = RunStartedEvent(
        thread_id=run_input.thread_id, run_id=run_input.run_id, protocol_version=PROTOCOL_VERSION
    )
    await _send(out, [started])
    if predict_state:  # before any other event: CopilotKit reads it to stream the arguments
        value = [{"state_key": k, "tool": t, "tool_argument": a} for k, t, a in predict_state]
        await _send(out, [CustomEvent(name="PredictState", value=value)])
    if prepare is not None:
        body = await prepare(body)
    transcript = Transcript()
    usage: list[TokenUsage] = []
    rounds = 0
    approvals = None
    if loop is not None:
        approvals = loop.approvals or Approvals(secret=new_secret())
        try:
            decisions = approvals.decisions(run_input, loop.tools.waits)
        except InterruptError as exc:  # nothing is run
            await _send(out, [_error(run_input, exc)])
            return
        if decisions:  # the answers to the last run's interrupts: their calls' results first
            resumed = resumed_results(decisions, loop.tools, observe, approvals.claims)
            try:
                async with aclosing(resumed) as results:
                    async for result in results:
                        transcript.add([result])
                        await _send(out, with_after(result))
            except ApprovalStoreError as exc:  # no approved call ran
                await _send(out, [_error(run_input, exc)])
                return
            next_body = _next_body(loop, run_input, transcript)
            if next_body is None:
                await _send(out, [_error(run_input, _failed())])
                return
            body = next_body
    elif run_input.resume:
        error = InterruptInvalidError("this bridge has no tool calls waiting for approval")
        await _send(out, [_error(run_input, error)])
        return
    while True:
        turn = _Turn(body, upstream, options, api, run_input.run_id, observe)
        await turn.run(out, transcript if loop is not None else None)
        if turn.error is not None:
            await _send(out, [_error(run_input, turn.error)])
            return
        outcome = turn.outcome
        if outcome.usage is not None:
            usage.append(outcome.usage)
        ids = outcome.tool_call_ids
        calls = transcript.calls(ids) if loop is not None else []
        served = [call for call in calls if call.function.name in loop.tools] if loop else []
        if not served:
            observe.tool_calls_left(outcome.tool_call_names, "handed_off")
            await _send(out, [_finished(run_input, outcome, usage, ids)])
            return
        assert loop is not None
        if rounds == loop.max_rounds:
            message = f"the model kept calling server tools: stopped after {rounds} rounds"
            await _send(out, [_error(run_input, ToolRoundsExceededError(message))])
            return
        rounds += 1
        assert approvals is not None
        waiting = [call for call in served if loop.tools.waits(call.function.name)]
        await out.flush()  # the turn's last read made the calls' ends: they go first
        held = {call.id for call in waiting}
        runnable = [call for call in served if call.id not in held]
        async with aclosing(loop.tools.run(runnable, observe)) as results:
            async for result in results:
                transcript.add([result])
                await _send(out, with_after(result))
        frontend = [call for call in calls if call.function.name not in loop.tools]
        observe.tool_calls_left([call.function.name for call in frontend], "handed_off")
        if waiting:  # a person decides; the frontend's calls, if any, are its to run meanwhile
            observe.tool_calls_left([call.function.name for call in waiting], "awaiting_approval")
            interrupt = approvals.outcome(run_input.thread_id, waiting)
            await _send(out, [_finished(run_input, outcome, usage, (), interrupt)])
            return
        if frontend:  # the frontend runs its calls and comes back with a run of its own
            pending = [call.id for call in frontend]
            await _send(out, [_finished(run_input, outcome, usage, pending)])
            return
        next_body = _next_body(loop, run_input, transcript)
        if next_body is None:
            await _send(out, [_error(run_input, _failed())])
            return
        body = next_body


def _next_body(
    loop: ToolLoop, run_input: RunAgentInput, transcript: Transcript
) -> dict[str, Any] | None:
    """The next request: the client's messages and the run's since; ``None`` (logged) when it
    cannot be built."""
    try:
        return loop.build([*run_input.messages, *transcript.messages])
    except Exception:
        logger.exception("run %s: the next request could not be built", run_input.run_id)
        return None


class _Turn:
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

    async def run(self, out: RunOutput, transcript: Transcript | None) -> None:
        """Stream the turn into ``out`` (and ``transcript``, when the run keeps one)."""
        translator = self._translator
        error: BridgeError | None = None
        watch = self._watch = self._observe.turn(self._body)
        self._write = out.write
        if transcript is not None:

            def write_kept(events: Sequence[BaseEvent]) -> None:
                transcript.add(events)
                out.write(events)

            self._write = write_kept
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


async def _send(out: RunOutput, batch: Sequence[BaseEvent]) -> None:
    """A batch made outside an upstream read: written and sent at once."""
    out.write(batch)
    await out.flush()


def _failed() -> InternalError:
    return InternalError("the bridge failed while handling this run")


def _error(run_input: RunAgentInput, error: BridgeError) -> RunErrorEvent:
    logger.warning("run %s ended with %s: %s", run_input.run_id, error.code, error.message)
    return RunErrorEvent(message=error.message, code=error.code)


def _finished(
    run_input: RunAgentInput,
    outcome: TurnOutcome,
    usage: list[TokenUsage],
    pending: Sequence[str],
    interrupt: RunFinishedInterruptOutcome | None = None,
) -> RunFinishedEvent:
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
        usage=usage or None,  # one entry per model turn of the run
        # Only the frontend's calls are left to it: the server's have their results already.
        outcome=interrupt
        or (RunFinishedSuccessOutcome(pending_tool_call_ids=list(pending)) if pending else None),
    )
