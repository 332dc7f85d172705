"""Approvals inside runs (README "Approving tools"): the interrupt that ends a run whose model
called a server tool under approval, the next run's ``resume`` that answers it, and the
history as it goes upstream afterwards. The tokens and their checks are ``tools/approvals.py``'s.

A resumed run finds the waiting calls in the history the client sends back: the calls of tools
under approval in the conversation's last assistant message with no result yet. CopilotKit's
``useInterrupt`` (1.74) first appends a tool message per call holding the person's answer
(``JSON.stringify(payload ?? {status: "resolved"})``, or ``{"status": "cancelled"}``): that
message is the approval, never the tool's result, and never goes upstream as one. When the run
finishes, CopilotKit keeps only the first tool message per call (``reconcilePendingResults``),
that approval, and drops the bridge's real result: on later turns such a call still goes
upstream with a result, a short statement of what happened.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import anyio.to_thread
from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    RunAgentInput,
    RunFinishedInterruptOutcome,
    ToolCall,
    ToolCallResultEvent,
    ToolMessage,
    UserMessage,
)

from bridge.serve.observe.observation import RunObservation
from bridge.serve.tools.approvals import (
    Decision,
    InterruptInvalidError,
    decision_from,
    read_resume,
    sign_interrupt,
    token_call_id,
)
from bridge.serve.tools.asking import QuestionError, question_interrupt
from bridge.serve.tools.claims import (
    ApprovalStoreError,
    ClaimStore,
    MemoryClaims,
    claim_key,
)
from bridge.serve.tools.question import interrupt_for, repeated_key
from bridge.serve.tools.results import BIG_RESULT
from bridge.serve.tools.server_tools import ServerTools

#: An answer longer than this is no approval payload (those are a few dozen bytes, or an edit).
_MAX_APPROVAL_CHARS = 64 * 1024
_APPROVAL_KEYS = frozenset({"approved", "editedArgs", "reason"})
_STATUS_ONLY = ({"status": "resolved"}, {"status": "cancelled"})

#: What the model reads, on later turns, for a call a person approved (its real result is lost
#: with CopilotKit, which keeps the approval message instead).
APPROVED_STATEMENT = (
    "The user approved this call; its result was given in this conversation's next turn."
)
UNANSWERED_STATEMENT = "Not run: this call waited for the user's approval and got no answer."
#: The same for a call that asked the user a question (``tools.asking``).
UNASKED_STATEMENT = "Not answered: this call asked the user a question and got no answer."
#: The result of an approved call whose approval was used already (a repeated or concurrent
#: resume: a double click, a retried request, the same request at another replica). "May":
#: a claim is taken before its call runs, and the request that took it may have been cut
#: short, or have lost the store's answer, before the call ran.
ALREADY_RUN_STATEMENT = (
    "Not run again: this approval was already used by another request, where the call may "
    "have run (an approved call runs at most once)."
)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Approvals:
    """How an app signs and checks its interrupts: its secret, how long an answer may take,
    the redaction the client's copy of the arguments went through, and the clock."""

    secret: bytes = field(repr=False)
    timeout: float = 900.0
    redact: Callable[[str], str] = str
    clock: Callable[[], datetime] = _now
    #: The interrupts already used: an approval runs its call once (``tools.claims``).
    claims: ClaimStore = field(default_factory=MemoryClaims)

    def outcome(
        self, thread_id: str, calls: Sequence[ToolCall], tools: ServerTools | None = None
    ) -> RunFinishedInterruptOutcome:
        """The interrupt outcome for calls that wait: one signed interrupt each, an approval's
        or a question's (``tools.asking``; ``unaskable`` let through only calls that make
        one). Signed over the arguments as the client will hold them: the frames redact them
        on the way out."""
        expires_at = self.clock() + timedelta(seconds=self.timeout)
        interrupts = []
        for call in calls:
            held = call.model_copy(
                update={
                    "function": call.function.model_copy(
                        update={"arguments": self.redact(call.function.arguments)}
                    )
                }
            )
            token = sign_interrupt(
                self.secret,
                thread_id=thread_id,
                tool_call_id=held.id,
                tool_name=held.function.name,
                arguments=held.function.arguments,
                expires_at=expires_at,
            )
            if tools is not None and tools.asks(held.function.name):
                question = tools.question(held)
                interrupts.append(question_interrupt(held, question, token, expires_at))
            else:
                interrupts.append(interrupt_for(held, token, expires_at))
        return RunFinishedInterruptOutcome(interrupts=interrupts)

    async def unaskable(
        self, calls: Sequence[ToolCall], tools: ServerTools | None = None
    ) -> dict[str, str]:
        """The waiting calls no person can be asked about, by id, with what the model reads
        instead: a question's arguments that make none (``tools.asking``); arguments whose
        JSON gives a key twice (the question would show one value, the tool get the other:
        ``tools.question``). Checked on the arguments as the client will hold them, which are
        the ones that run; off the event loop when they are big."""
        refused: dict[str, str] = {}
        for call in calls:
            if tools is not None and tools.asks(call.function.name):
                held = call.function.model_copy(
                    update={"arguments": self.redact(call.function.arguments)}
                )
                try:
                    tools.question(call.model_copy(update={"function": held}))
                except QuestionError as exc:
                    refused[call.id] = f"Not asked: {exc}."
                    continue
            check = partial(self._repeated_key, call.function.arguments)
            big = len(call.function.arguments) >= BIG_RESULT
            key = await anyio.to_thread.run_sync(check) if big else check()
            if key is not None:
                refused[call.id] = (
                    f"Not run: the arguments give the key {json.dumps(key)} more than once, and a "
                    "person cannot be asked to approve a call that says two things. Call it "
                    "again with each key once."
                )
        return refused

    def _repeated_key(self, arguments: str) -> str | None:
        return repeated_key(self.redact(arguments))

    def decisions(
        self,
        run_input: RunAgentInput,
        waits: Callable[[str], bool],
        asks: Callable[[str], bool] = lambda name: False,
    ) -> list[Decision]:
        """The person's answers to the calls that wait in this history (none: ``[]``); raises
        ``InterruptError`` for a resume that cannot be acted on (``read_resume``)."""
        # A question's call the resume answers waits whatever tool message follows it:
        # CopilotKit's useInterrupt adds one holding the answer before it resumes.
        resumed = {token_call_id(entry.interrupt_id) for entry in run_input.resume or ()}
        return read_resume(
            self.secret,
            run_input.resume,
            waiting_calls(
                run_input.messages, waits, lambda c: asks(c.function.name) and c.id in resumed
            ),
            thread_id=run_input.thread_id,
            now=self.clock(),
            asks=asks,
        )


def approval_payload(message: ToolMessage) -> dict[str, Any] | None:
    """The person's answer, when this tool message holds only that (as CopilotKit adds it),
    else ``None``: ``{"approved": …, "editedArgs"?, "reason"?}`` or ``{"status": "resolved" |
    "cancelled"}``."""
    content = message.content
    if not isinstance(content, str) or len(content) > _MAX_APPROVAL_CHARS:
        return None
    if not content.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    if "approved" in value and value.keys() <= _APPROVAL_KEYS:
        return value
    return value if value in _STATUS_ONLY else None


def waiting_calls(
    messages: Sequence[Message],
    waits: Callable[[str], bool],
    answering: Callable[[ToolCall], bool] = lambda call: False,
) -> list[ToolCall]:
    """The calls that wait for a person: calls of tools under approval in the last assistant
    message since the last user message, with no result (an approval payload is none; a tool
    message after a call this run is ``answering``, a question's, is the answer, no result).

    ``InterruptInvalidError`` when that message holds a call under approval twice, under one
    id: one id is one decision and one run (the bridge never gives two calls of a turn one
    id; a history that does was written to run a call once per copy, or to put another call
    in the place of the one a person was asked about)."""
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            start = index + 1
            break
    last = None
    for index in range(len(messages) - 1, start - 1, -1):
        if isinstance(messages[index], AssistantMessage):
            last = index
            break
    if last is None:
        return []
    assistant = messages[last]
    assert isinstance(assistant, AssistantMessage)
    calls = assistant.tool_calls or ()
    ids = Counter(call.id for call in calls)
    repeated = next((c.id for c in calls if ids[c.id] > 1 and waits(c.function.name)), None)
    if repeated is not None:
        raise InterruptInvalidError(
            f"the history holds the tool call {repeated} more than once in one assistant "
            "message: a call under approval has one id of its own"
        )
    answered = {
        message.tool_call_id
        for message in messages[last + 1 :]
        if isinstance(message, ToolMessage) and approval_payload(message) is None
    }
    return [
        call
        for call in calls
        if waits(call.function.name) and (call.id not in answered or answering(call))
    ]


def settle_approvals(
    messages: Sequence[Message],
    waits: Callable[[str], bool],
    asks: Callable[[str], bool] = lambda name: False,
) -> Sequence[Message]:
    """The history as it goes upstream: approval payloads of calls under approval are not
    sent as their results; a call with no real result gets a statement of what happened
    (approved, declined with the reason, cancelled, unanswered), placed after its turn's
    other results. A call that ``asks`` a question has its answer as its result (CopilotKit's
    copy of it too); only ``{"status": …}`` is no answer. ``messages`` itself when there is
    nothing to change."""
    gated = {
        call.id: call
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls or ()
        if waits(call.function.name)
    }
    if not gated:
        return messages
    real: set[str] = set()
    answers: dict[str, dict[str, Any]] = {}
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id in gated:
            payload = _payload(message, asks(gated[message.tool_call_id].function.name))
            if payload is None:
                real.add(message.tool_call_id)
            else:
                answers.setdefault(message.tool_call_id, payload)
    if not answers and real.issuperset(gated):
        return messages
    out: list[Message] = []
    owed: list[ToolCall] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            held = gated.get(message.tool_call_id)
            asked = held is not None and asks(held.function.name)
            if message.tool_call_id in answers and _payload(message, asked) is not None:
                continue  # the approval, not the result
            out.append(message)
            continue
        out += [_statement(call, answers.get(call.id), asks) for call in owed]
        owed = []
        out.append(message)
        if isinstance(message, AssistantMessage):
            owed = [c for c in message.tool_calls or () if c.id in gated and c.id not in real]
    out += [_statement(call, answers.get(call.id), asks) for call in owed]
    return out


def _payload(message: ToolMessage, asked: bool) -> dict[str, Any] | None:
    """``approval_payload``; for a question's call, only a status is no answer."""
    payload = approval_payload(message)
    return payload if payload is None or not asked or payload in _STATUS_ONLY else None


def _statement(
    call: ToolCall, payload: dict[str, Any] | None, asks: Callable[[str], bool]
) -> ToolMessage:
    asked = asks(call.function.name)
    if payload is None:
        text = UNASKED_STATEMENT if asked else UNANSWERED_STATEMENT
    elif payload == {"status": "cancelled"}:
        text = Decision(call, "cancelled", question=asked).refusal or ""
    else:
        decision = decision_from(call, payload)
        text = decision.refusal or APPROVED_STATEMENT
    return ToolMessage(id=f"{call.id}-approval", tool_call_id=call.id, content=text)


async def resumed_results(
    decisions: Sequence[Decision],
    tools: ServerTools,
    observe: RunObservation | None = None,
    claims: ClaimStore | None = None,
    *,
    parts: bool = True,
) -> AsyncGenerator[ToolCallResultEvent, None]:
    """The results of the answered calls, against their own ids: a refusal for each call a
    person declined or cancelled, a readable error for an invalid edit (the tool not run),
    and the approved ones run, as a turn's calls are, with the signed (or edited) arguments
    (their results as content parts where they have more than text, and ``parts`` allows).

    An approved call runs once: its interrupt is claimed in ``claims`` first, and a call whose
    claim is taken already is answered with ``ALREADY_RUN_STATEMENT``. ``ApprovalStoreError``
    when the store cannot say: nothing approved runs. A question's call runs with its answer
    (``tools.asking.take_answers`` checked and claimed it before)."""
    approved: list[ToolCall] = []
    answers = {d.call.id: d.answer for d in decisions if d.verdict == "answered"}
    wanted: dict[str, tuple[str, datetime]] = {}  # call id → the claim: its key, until when
    for decision in decisions:
        call = decision.call
        name = call.function.name
        refusal = decision.refusal
        if refusal is not None:
            if observe is not None:
                observe.tool_calls_left([name], "rejected")
            yield await tools.answer(call.id, refusal)
            continue
        if call.id in answers:
            continue
        arguments = decision.arguments
        if decision.edited_args is not None:
            problem = tools.invalid_arguments(name, arguments)
            if problem is not None:
                text = f"Error: {name}: the user's edited arguments are invalid: {problem}"
                if observe is not None:
                    observe.tool_calls_left([name], "error")
                yield await tools.answer(call.id, text)
                continue
        function = FunctionCall(name=name, arguments=arguments)
        approved.append(call.model_copy(update={"function": function}))
        # Claimed by its signed token (made by the bridge, binding the thread and the call),
        # never by the client's call id alone: every approved decision came with one.
        assert decision.interrupt_id, "an approved call without its signed interrupt"
        wanted[call.id] = (claim_key(decision.interrupt_id), decision.expires_at or _now())
    if claims is not None and approved:
        fresh = await _claimed(wanted, claims)
        for call in approved:
            if call.id not in fresh:
                if observe is not None:
                    observe.tool_calls_left([call.function.name], "already_run")
                yield await tools.answer(call.id, ALREADY_RUN_STATEMENT)
        approved = [call for call in approved if call.id in fresh]
    asked = [decision.call for decision in decisions if decision.call.id in answers]
    running = tools.run([*asked, *approved], observe, parts=parts, answers=answers)
    async with aclosing(running) as results:
        async for result in results:
            yield result


async def _claimed(wanted: dict[str, tuple[str, datetime]], claims: ClaimStore) -> set[str]:
    """The ids of the approved calls whose interrupts this run claimed first. All are claimed
    before any runs: when the store fails midway, the claims made are given back (as far as
    the store still answers) and nothing runs."""
    fresh: list[str] = []
    try:
        for call_id, (key, expires_at) in wanted.items():
            if await claims.claim(key, expires_at):
                fresh.append(call_id)
    except ApprovalStoreError:
        for call_id in fresh:
            with suppress(ApprovalStoreError):
                await claims.release(wanted[call_id][0])
        raise
    return set(fresh)
