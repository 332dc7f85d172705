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
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    Message,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TokenUsage,
    ToolMessage,
)

from bridge.config import UpstreamApi
from bridge.core.errors import BridgeError, InternalError
from bridge.core.translate import TranslateOptions, TurnOutcome
from bridge.serve.observe.observation import RunObservation, Telemetry
from bridge.serve.run.output import RUN_ENDS, RunOutput, UnencodableEventError
from bridge.serve.run.resume import Approvals, resumed_results
from bridge.serve.run.steps import MODEL_STEP, RunProgress, tools_step
from bridge.serve.run.transcript import KeptOutput, Transcript
from bridge.serve.run.turn import Turn
from bridge.serve.tools.approvals import InterruptError, InterruptInvalidError, new_secret
from bridge.serve.tools.asking import take_answers
from bridge.serve.tools.claims import ApprovalStoreError
from bridge.serve.tools.results import with_after
from bridge.serve.tools.server_tools import ServerTools
from bridge.serve.tools.state import RUN_STATE, RunState
from bridge.serve.upstream.client import UpstreamClient

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
"""Takes the run's first request body once the run has begun; gives the one to send, or
raises ``BridgeError`` (the run's error) when the input cannot go as the upstream said."""


@dataclass(frozen=True, slots=True)
class RunIds:
    """What a run reads of its input outside its tool loop: its ids and what it resumes. A run
    with no server tools is given this, not its ``RunAgentInput``, whose validated
    conversation an open stream would hold for its life (``benchmarks/README.md``, issue 44)."""

    thread_id: str
    run_id: str
    parent_run_id: str | None
    resume: list[ResumeEntry] | None

    @classmethod
    def of(cls, run_input: RunAgentInput) -> RunIds:
        return cls(run_input.thread_id, run_input.run_id, run_input.parent_run_id, run_input.resume)


#: A run's input as the run reads it: whole, or its ids (``RunIds``).
RunHead = RunAgentInput | RunIds


@dataclass(frozen=True)
class ToolLoop:
    """What a run needs to run server tools and go on: the tools, how to build the next
    request from the whole conversation, the run's whole input (its messages and the answers
    it resumes with), the most rounds of server calls in one run, how calls that wait for a
    person are signed and checked (``None``: a secret of the loop's own, so that no call under
    approval ever runs unapproved), and whether the client takes a result as content parts
    (AG-UI 1.0; a 0.0.x client takes text only, and the next request must hold what the
    client will send back). One per run."""

    tools: ServerTools
    build: Callable[[Sequence[Message]], dict[str, Any]]
    run_input: RunAgentInput
    max_rounds: int = 16
    approvals: Approvals | None = None
    parts: bool = True
    #: What the run added to the conversation (each batch its turns and tools wrote): the next
    #: request is built from the input's messages and these. The loop's, made with it: a run
    #: with no loop makes none.
    transcript: Transcript = field(default_factory=Transcript)


def run_agent(
    run_input: RunHead,
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
    ``(state_key, tool, tool_argument)`` announced by a ``CUSTOM`` ``PredictState`` at the
    start of each model step."""
    if observe is None:
        observe = Telemetry().run(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            model=str(body.get("model", "")),
            protocol="",
            received=time.perf_counter(),
        )
    progress = RunProgress(run_input.run_id)
    args = (run_input, body, upstream, options, api, loop, observe, prepare, predict_state)
    if state is None:  # a run without a state to edit pays nothing for it per chunk
        return _run(out, out, None, progress, *args)
    return _run(_WithState(out, state), out, state, progress, *args)


def run_started(run_input: RunHead) -> RunStartedEvent:
    """The event every run begins with: its thread and id, the parent run it says it follows
    (``parentRunId``, echoed: the client links the runs by it), and the protocol spoken."""
    return RunStartedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        parent_run_id=run_input.parent_run_id,
        protocol_version=PROTOCOL_VERSION,  # as every run's (the 0.0 lines get it left out)
    )


class _WithState:
    """A run's output that writes the state's snapshot before the terminal event when the
    run changed it."""

    def __init__(self, out: RunOutput, state: RunState) -> None:
        self._out, self._state = out, state
        self.flush = out.flush

    def write(self, batch: Sequence[BaseEvent]) -> None:
        if self._state.changed and batch and isinstance(batch[-1], RUN_ENDS):
            batch = [*batch[:-1], self._state.snapshot(), batch[-1]]
        self._out.write(batch)


async def _run(
    out: RunOutput,
    bare: RunOutput,
    state: RunState | None,
    progress: RunProgress,
    run_input: RunHead,
    body: dict[str, Any],
    upstream: UpstreamClient,
    options: TranslateOptions,
    api: UpstreamApi,
    loop: ToolLoop | None,
    observe: RunObservation,
    prepare: Prepare | None,
    predict_state: Sequence[tuple[str, str, str]],
) -> None:
    """The run, ended with RUN_ERROR whatever fails before its end went out: a batch ``out``
    could not encode (``unencodable_event``), a bug of ours outside a model turn, which ends
    its own (``internal_error``, the traceback in the log); its open step finished first
    (``progress``). After the state's snapshot when the run changed it, else (the snapshot is
    what failed) alone, by ``bare``, the output under the snapshot's. ``state``: where its
    update_state calls find it. One coroutine: each more is one more frame to resume a token."""
    token = RUN_STATE.set(state) if state is not None else None
    try:
        await _send(out, [run_started(run_input)])
        # In each model step, before the model's words: CopilotKit's runtime reads it to stream
        # the arguments, and forgets it at every step's start and end (@ag-ui/client's
        # convertToLegacyEvents: a LangGraph node announces it in each step).
        predicted: list[BaseEvent] = []
        if predict_state:
            value = [{"state_key": k, "tool": t, "tool_argument": a} for k, t, a in predict_state]
            predicted.append(CustomEvent(name="PredictState", value=value))
        if prepare is not None:
            try:
                body = await prepare(body)
            except BridgeError as exc:  # what the server said refuses the input (an attachment)
                await progress.fail(out, exc)
                return
            prepare = None  # called once: not held for the rest of the run
        rounds = 0
        approvals = None
        if loop is not None:
            approvals = loop.approvals or Approvals(secret=new_secret())
            try:
                decisions = approvals.decisions(loop.run_input, loop.tools.waits, loop.tools.asks)
                await take_answers(decisions, loop.tools.question, approvals.claims)
            except (InterruptError, ApprovalStoreError) as exc:  # nothing is run
                await progress.fail(out, exc)
                return
            if decisions:  # the answers to the last run's interrupts: their calls' results first
                resumed = resumed_results(
                    decisions, loop.tools, observe, approvals.claims, parts=loop.parts
                )
                out.write([progress.start(tools_step(d.call.function.name for d in decisions))])
                try:
                    async with aclosing(resumed) as results:
                        async for result in results:
                            loop.transcript.add([result])
                            await _send(out, with_after(result))
                except ApprovalStoreError as exc:  # no approved call ran
                    await progress.fail(out, exc)
                    return
                progress.close(out)
                next_body = _next_body(loop)
                if isinstance(next_body, BridgeError):
                    await progress.fail(out, next_body)
                    return
                body = next_body
        elif run_input.resume:
            no_interrupt = InterruptInvalidError(
                "this bridge has no tool calls waiting for approval"
            )
            await progress.fail(out, no_interrupt)
            return
        while True:
            turn = Turn(body, upstream, options, api, run_input.run_id, observe)
            # At once: the wait for the model shows.
            await _send(out, [progress.start(MODEL_STEP), *predicted])
            await turn.run(out if loop is None else KeptOutput(out, loop.transcript))
            outcome = turn.outcome
            if outcome.usage is not None:  # a turn that failed may have reported it before
                progress.usage.append(outcome.usage)
            if turn.error is not None:
                await progress.fail(out, turn.error)
                return
            ids = outcome.tool_call_ids
            calls = loop.transcript.calls(ids) if loop is not None else []
            served = [call for call in calls if call.function.name in loop.tools] if loop else []
            if not served:
                observe.tool_calls_left(outcome.tool_call_names, "handed_off")
                await progress.end(out, _finished(run_input, outcome, progress.usage, ids))
                return
            assert loop is not None
            if rounds == loop.max_rounds:
                message = f"the model kept calling server tools: stopped after {rounds} rounds"
                await progress.fail(out, ToolRoundsExceededError(message))
                return
            rounds += 1
            assert approvals is not None
            waiting = [call for call in served if loop.tools.waits(call.function.name)]
            held = {call.id for call in waiting}
            runnable = [call for call in served if call.id not in held]
            progress.close(out)
            if runnable:
                out.write([progress.start(tools_step(call.function.name for call in runnable))])
            await out.flush()  # the turn's last read made the calls' ends: they go first
            async with aclosing(loop.tools.run(runnable, observe, parts=loop.parts)) as results:
                async for result in results:
                    loop.transcript.add([result])
                    await _send(out, with_after(result))
            unaskable = await approvals.unaskable(waiting, loop.tools)  # the model reads why
            refused_calls = [call for call in waiting if call.id in unaskable]
            if refused_calls and not runnable:  # their answers are the round's
                out.write(
                    [progress.start(tools_step(call.function.name for call in refused_calls))]
                )
            for call in refused_calls:
                observe.tool_calls_left([call.function.name], "error")
                refused = await loop.tools.answer(call.id, unaskable[call.id])
                loop.transcript.add([refused])
                await _send(out, [refused])
            progress.close(out)
            waiting = [call for call in waiting if call.id not in unaskable]
            frontend = [call for call in calls if call.function.name not in loop.tools]
            observe.tool_calls_left([call.function.name for call in frontend], "handed_off")
            if waiting:  # a person decides; the frontend's calls, if any, are its to run meanwhile
                observe.tool_calls_left(
                    [call.function.name for call in waiting], "awaiting_approval"
                )
                interrupt = approvals.outcome(run_input.thread_id, waiting, loop.tools)
                await progress.end(
                    out, _finished(run_input, outcome, progress.usage, (), interrupt)
                )
                return
            if frontend:  # the frontend runs its calls and comes back with a run of its own
                pending = [call.id for call in frontend]
                await progress.end(out, _finished(run_input, outcome, progress.usage, pending))
                return
            next_body = _next_body(loop)
            if isinstance(next_body, BridgeError):
                await progress.fail(out, next_body)
                return
            body = next_body
    except Exception as exc:
        if observe.outcome != "cancelled":  # its end went out: nothing may follow it
            raise
        if isinstance(exc, UnencodableEventError):
            error: BridgeError = exc
        else:
            logger.exception("run %s failed", run_input.run_id)
            error = _failed()
        end = progress.error(error)
        try:
            await progress.end(out, end)
        except UnencodableEventError:
            await _send(bare, [end])
    finally:
        if token is not None:
            with suppress(ValueError):  # ended in another context: the variable goes with it
                RUN_STATE.reset(token)


def _next_body(loop: ToolLoop) -> dict[str, Any] | BridgeError:
    """The next request: the client's messages and the run's since; else the error that ends
    the run: the builder's own (a tool's result holds what the upstream's API cannot carry),
    or ``internal_error`` (a bug of ours, logged)."""
    # A call this run answered has its result here: a tool message the client holds for it (a
    # question's answer, as CopilotKit adds it) does not go up beside it.
    added = loop.transcript.messages
    fresh = {m.tool_call_id for m in added if isinstance(m, ToolMessage)}
    earlier = [
        m
        for m in loop.run_input.messages
        if not (isinstance(m, ToolMessage) and m.tool_call_id in fresh)
    ]
    try:
        return loop.build([*earlier, *added])
    except BridgeError as exc:
        return exc
    except Exception:
        logger.exception("run %s: the next request could not be built", loop.run_input.run_id)
        return _failed()


async def _send(out: RunOutput, batch: Sequence[BaseEvent]) -> None:
    """A batch made outside an upstream read: written and sent at once."""
    out.write(batch)
    await out.flush()


def _failed() -> InternalError:
    return InternalError("the bridge failed while handling this run; see its log")


def _finished(
    run_input: RunHead,
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
            if outcome.finish_detail:  # which categories stopped it (Azure's filter)
                result["message"] = f"{result['message'][:-1]}: {outcome.finish_detail}."
                result["filtered"] = outcome.finish_detail
    return RunFinishedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        result=result,
        usage=usage or None,  # one entry per model turn of the run
        # Only the frontend's calls are left to it: the server's have their results already.
        outcome=interrupt
        or (RunFinishedSuccessOutcome(pending_tool_call_ids=list(pending)) if pending else None),
    )
