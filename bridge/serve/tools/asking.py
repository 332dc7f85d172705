"""Questions to the person (README "Asking the user"): a server tool whose call waits for an
answer, not an approval.

The built-in ``ask_user`` tool (``--ask-user``, ``tools.ask_user``) takes a ``question`` and,
optionally, a JSON Schema for the answer; a Python tool asks with ``@asks_user(question,
schema)`` (``python_tools``) and gets the answer as its ``answer`` argument. Either way the run
ends as an approval's does, with a signed interrupt (``approvals``), here ``reason:
"input_required"`` with the question as its ``message`` and the schema as its
``responseSchema``. The token binds
the call's arguments, so the question and the schema are read again, on the resume, from the
call the history holds: nothing is stored between the two runs.

The resume's payload is the answer. It is held to the schema (``jsonschema``, formats
checked) in a worker thread, after its size is checked against ``MAX_ANSWER_BYTES``; an answer
off the schema ends the run with RUN_ERROR ``answer_invalid`` naming what is wrong, and its
interrupt is not used up (the client keeps it, and answers again). A fitting answer is claimed
in the approvals' store first (``claims``: answered once, across replicas too; a replay gets
RUN_ERROR ``interrupt_answered``), then becomes the call's result, and the model goes on.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import orjson
from ag_ui.core import Interrupt, ToolCall

from bridge.serve.tools.approvals import InterruptError, iso_utc
from bridge.serve.tools.claims import ClaimStore, claim_key

if TYPE_CHECKING:
    from bridge.serve.tools.approvals import Decision

#: The interrupt's ``reason`` for a question (AG-UI 1.0's value for input a run needs).
INPUT_REQUIRED = "input_required"
#: The answer's schema when the model gives none: a line of text.
TEXT_ANSWER: dict[str, Any] = {"type": "string"}
#: The longest ``ask_user`` arguments (question and schema, as the model wrote them) put to a
#: person: checked before they are parsed. A question with a form is a few hundred bytes.
MAX_QUESTION_CHARS = 16 * 1024
#: The largest answer, as compact JSON, held to a schema: checked before the validation.
MAX_ANSWER_BYTES = 64 * 1024
#: How many of an answer's problems the refusal names.
_SHOWN_PROBLEMS = 5


class AnswerInvalidError(InterruptError):
    """The answer does not fit the question's schema (or is too big): nothing was used up,
    the same interrupt can be answered again."""

    code = "answer_invalid"


class InterruptAnsweredError(InterruptError):
    """The question was answered already, by this request's twin or an earlier one."""

    code = "interrupt_answered"


class QuestionError(Exception):
    """Arguments that make no question a person can be asked: the model reads why."""


@dataclass(frozen=True)
class Question:
    """What a person is asked, and the JSON Schema the answer must fit."""

    message: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Asking:
    """What makes a server tool ask: the question its call's arguments make (``QuestionError``
    when they make none), and how the call runs once answered (with the answer as it came)."""

    question: Callable[[str], Question]
    answered: Callable[[str, Any], Awaitable[str]]


def checked_schema(schema: Any) -> dict[str, Any]:
    """A schema an answer can be held to; ``QuestionError`` for one that is not (not an
    object, or not valid JSON Schema 2020-12)."""
    if not isinstance(schema, dict):
        raise QuestionError("the schema must be a JSON object (a JSON Schema)")
    import jsonschema  # loaded when the server tools were (``ServerTools.add``)

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise QuestionError(f"the schema is not valid JSON Schema: {exc.message[:200]}") from exc
    return schema


def ask_user_question(arguments: str) -> Question:
    """The question an ``ask_user`` call makes: its ``question`` and its ``schema`` (a line
    of text when none). Bounded before it is parsed."""
    if len(arguments) > MAX_QUESTION_CHARS:
        raise QuestionError(
            f"the question and its schema are over {MAX_QUESTION_CHARS} characters; ask a "
            "shorter one"
        )
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError) as exc:
        raise QuestionError("the arguments are not valid JSON") from exc
    if not isinstance(value, dict) or not isinstance(value.get("question"), str):
        raise QuestionError("'question' must be a string")
    question = value["question"].strip()
    if not question:
        raise QuestionError("'question' is empty")
    schema = value.get("schema")
    return Question(question, TEXT_ANSWER if schema is None else checked_schema(schema))


def question_interrupt(
    call: ToolCall, question: Question, token: str, expires_at: datetime
) -> Interrupt:
    """The interrupt that asks: ``input_required``, the question as the ``message``, the
    answer's schema, the call it answers and when it expires."""
    return Interrupt(
        id=token,
        reason=INPUT_REQUIRED,
        message=question.message,
        tool_call_id=call.id,
        response_schema=copy.deepcopy(question.schema),  # one each: a caller may edit its own
        expires_at=iso_utc(expires_at),
    )


def answer_problem(schema: dict[str, Any], answer: Any) -> str | None:
    """What is wrong with an answer to a question with this schema, or ``None``. Its size is
    checked before it is held to the schema; run in a worker thread (both are linear in the
    answer, and a schema's patterns may take longer)."""
    size = len(orjson.dumps(answer))
    if size > MAX_ANSWER_BYTES:
        return f"the answer is {size} bytes of JSON, over the limit of {MAX_ANSWER_BYTES}"
    import jsonschema  # loaded when the server tools were (``ServerTools.add``)

    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = list(itertools.islice(validator.iter_errors(answer), _SHOWN_PROBLEMS))
    if not errors:
        return None
    return "; ".join(
        f"{'.'.join(map(str, error.absolute_path)) or 'answer'}: {error.message[:200]}"
        for error in errors
    )


async def take_answers(
    decisions: Sequence[Decision], question_of: Callable[[ToolCall], Question], claims: ClaimStore
) -> None:
    """Check the answers to questions before anything runs: each held to its question's
    schema (``AnswerInvalidError``, nothing used up), then each claimed once
    (``InterruptAnsweredError`` for one claimed before; ``ApprovalStoreError`` when the store
    does not answer)."""
    answered = [decision for decision in decisions if decision.verdict == "answered"]
    for decision in answered:
        call = decision.call
        try:
            question = question_of(call)
        except QuestionError as exc:  # it made one when it was asked: the tool changed since
            raise AnswerInvalidError(f"the question of the tool call {call.id}: {exc}") from exc
        problem = await anyio.to_thread.run_sync(answer_problem, question.schema, decision.answer)
        if problem is not None:
            raise AnswerInvalidError(
                f"the answer to the question of the tool call {call.id} does not fit its "
                f"schema: {problem}"
            )
    for decision in answered:
        assert decision.expires_at is not None  # a resolved answer's token was checked
        if not await claims.claim(claim_key(decision.interrupt_id), decision.expires_at):
            raise InterruptAnsweredError(
                f"the question of the tool call {decision.call.id} was answered already"
            )
