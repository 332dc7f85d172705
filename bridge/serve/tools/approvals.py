"""A person approves server tools before they run: AG-UI interrupts, signed, stateless. Pure.

A call to a tool under ``--approve`` ends the run with ``RUN_FINISHED.outcome = {"type":
"interrupt", "interrupts": [...]}`` (``question.interrupt_for``), one interrupt per waiting
call; the next run answers in ``RunAgentInput.resume`` (``read_resume``). Nothing is stored
between the two: the interrupt's id is a token (``sign_interrupt``) whose HMAC-SHA256, under
the bridge's secret, binds the thread, the call's id, the tool's name, a digest of the
arguments and the expiry. The resumed run finds the call in the history the client sends
back, and the token holds only if that call is the one that was signed, byte for byte.

Token: ``int1.<payload>.<mac>``, both parts base64url without padding. The payload is the JSON
``{"c": <tool call id>, "e": <expiry, Unix seconds>, "n": <nonce>}`` (read before the check,
to find the call a resume entry answers); the MAC covers the payload exactly as written and the
fields from the history. A token for a typical call id is about 150 characters: it fits in a
URL. Tokens of before, without the nonce, still hold.

The arguments are hashed as the model sent them (their UTF-8 bytes), not as canonical JSON:
the clients send back the string they joined from TOOL_CALL_ARGS deltas, unchanged
(``@ag-ui/client`` 0.0.x and 1.0 both append each delta to ``function.arguments``), and a
canonical form would let two different strings pass as one: duplicate keys, number spellings
and escapes that JSON parsers read differently (the MCP server or the tool that runs the call
is not the parser that checked it). The raw string also signs arguments that are not JSON at
all. The price: a client that re-serialises the arguments gets ``interrupt_invalid``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Literal

from ag_ui.core import ResumeEntry, ToolCall

from bridge.core.errors import BridgeError

#: The token's version; a new format gets a new prefix, and the old one is refused.
TOKEN_PREFIX = "int1."
#: Domain separation: this key signs nothing else with the same layout.
_MAC_LABEL = "agui-bridge/interrupt/1"
#: Longer ids are not ours (a call id would have to be over a kilobyte long).
MAX_TOKEN_CHARS = 2048
#: The last second a datetime can hold (9999-12-31T23:59:59Z): no payload's expiry is later.
_LAST_SECOND = 253402300799
#: The shortest secret accepted: 128 bits.
MIN_SECRET_BYTES = 16

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


class InterruptError(BridgeError):
    """A resume the bridge cannot act on; the run ends with RUN_ERROR and nothing is run."""

    code = "interrupt_error"


class InterruptInvalidError(InterruptError):
    """The id is not a token of ours, or it does not match the call in the history (another
    thread, call, tool or arguments), or it answers a call that is not waiting."""

    code = "interrupt_invalid"


class InterruptExpiredError(InterruptError):
    """An approval that came after the interrupt's ``expiresAt``."""

    code = "interrupt_expired"


class InterruptUnresolvedError(InterruptError):
    """Calls wait for a person and the input does not answer them."""

    code = "interrupt_unresolved"


def new_secret() -> bytes:
    """A random secret for a bridge started without one: interrupts then hold only in this
    process, and not across a restart."""
    return secrets.token_bytes(32)


def needs_approval(name: str, patterns: Iterable[str]) -> bool:
    """Whether a server tool, by the name it is offered under, waits for a person:
    shell-style patterns (``files__write_*``, ``mail__*``, ``*``), case-sensitive."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def iso_utc(moment: datetime) -> str:
    """``expiresAt`` as the token holds it: UTC, whole seconds (``2026-04-20T17:00:00Z``)."""
    return datetime.fromtimestamp(_seconds(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sign_interrupt(
    secret: bytes,
    *,
    thread_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: str,
    expires_at: datetime,
) -> str:
    """The interrupt id for this call: a token only this secret makes, for this call only.
    ``arguments`` as the client will send them back (after any redaction of the stream)."""
    # A nonce: two interrupts for the same call in the same second (a model or a script that
    # repeats its call ids) are two tokens, so that using one does not use the other up.
    fields = {"c": tool_call_id, "e": _seconds(expires_at), "n": secrets.token_urlsafe(6)}
    payload = _b64encode(json.dumps(fields, separators=(",", ":")).encode())
    mac = _mac(secret, payload, thread_id, tool_call_id, tool_name, arguments)
    return f"{TOKEN_PREFIX}{payload}.{_b64encode(mac)}"


@dataclass(frozen=True)
class SignedInterrupt:
    """What a verified token says beyond the call it was checked against."""

    tool_call_id: str
    expires_at: datetime


def verify_interrupt(
    secret: bytes,
    token: str,
    *,
    thread_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: str,
    now: datetime,
) -> SignedInterrupt:
    """Check a token against the call as the history holds it. Raises
    ``InterruptInvalidError`` (not ours, altered, or made for another thread, call, tool or
    arguments) or ``InterruptExpiredError`` (valid, and ``now`` is at or past its expiry)."""
    signed = _open(secret, _parts(token), thread_id, tool_call_id, tool_name, arguments)
    _check_expiry(signed, now)
    return signed


@dataclass(frozen=True)
class Decision:
    """What a person decided about one waiting call.

    ``approved``: run it, with ``arguments`` (the original string, or ``edited_args`` written
    as JSON: a full replacement, to be checked against the tool's schema by the caller, which
    answers an invalid edit with a tool error instead of running the tool). ``declined``
    (``approved: false``, with an optional ``reason``) and ``cancelled`` (the person left
    without deciding): not run; ``refusal`` is what the model reads as the call's result.
    An answer off the schema is declined, with ``unreadable`` saying what was wrong with it.
    """

    call: ToolCall
    verdict: Literal["approved", "declined", "cancelled", "answered"]
    edited_args: dict[str, Any] | None = None
    reason: str | None = None
    unreadable: str | None = None
    #: The interrupt answered (its token) and its expiry: what an approval claims before its
    #: call runs (``bridge.serve.tools.claims``).
    interrupt_id: str = ""
    expires_at: datetime | None = None
    #: ``answered``: a question's answer (``tools.asking``), as the resume's payload held it.
    answer: Any = None
    #: The call asked a question (``tools.asking``) rather than for an approval.
    question: bool = False

    @property
    def arguments(self) -> str:
        if self.edited_args is None:
            return self.call.function.arguments
        return json.dumps(self.edited_args, ensure_ascii=False, separators=(",", ":"))

    @property
    def refusal(self) -> str | None:
        if self.unreadable:
            return f"Not run: the user's answer was not an approval ({self.unreadable})."
        if self.verdict == "declined":
            return f"The user declined: {self.reason}" if self.reason else "The user declined."
        if self.verdict == "cancelled" and self.question:
            return "The user dismissed the question without answering it."
        if self.verdict == "cancelled":
            return "The user cancelled this call without deciding; it was not run."
        return None


def read_resume(
    secret: bytes,
    resume: Sequence[ResumeEntry] | None,
    waiting: Sequence[ToolCall],
    *,
    thread_id: str,
    now: datetime,
    asks: Callable[[str], bool] = lambda name: False,
) -> list[Decision]:
    """One decision per waiting call, in their order, from the input's ``resume``.

    ``waiting``: the calls the history holds that wait for a person: calls of tools under
    approval in the conversation's last assistant turn, with no result yet (a tool message
    holding only the approval, as CopilotKit adds one, is no result). Every entry must answer
    one of them with a valid token, once (``interrupt_invalid``), and every one must be
    answered (``interrupt_unresolved``). A ``resolved`` answer after the expiry is
    ``interrupt_expired``; a ``cancelled`` one is accepted (nothing runs, and a 1.0 client
    can leave a thread with an expired interrupt no other way). A call of a tool that
    ``asks`` a question is ``answered``, its answer the payload as it came (``tools.asking``
    holds it to the question's schema).
    """
    by_id = {call.id: call for call in waiting}
    answers: dict[str, Decision] = {}
    for entry in resume or ():
        parts = _parts(entry.interrupt_id)
        call = by_id.get(parts.call_id) if parts is not None else None
        if call is None:
            raise InterruptInvalidError(
                "the resume answers an interrupt that no waiting tool call of this thread has"
            )
        if call.id in answers:
            raise InterruptInvalidError(f"the resume answers the tool call {call.id} twice")
        signed = _open(
            secret, parts, thread_id, call.id, call.function.name, call.function.arguments
        )
        asked = asks(call.function.name)
        if entry.status == "cancelled":
            answers[call.id] = Decision(call, "cancelled", question=asked)
            continue
        _check_expiry(signed, now)
        decided = (
            Decision(call, "answered", answer=entry.payload, question=True)
            if asked
            else decision_from(call, entry.payload)
        )
        answers[call.id] = replace(
            decided,
            interrupt_id=entry.interrupt_id,
            expires_at=signed.expires_at,
        )
    unanswered = [call.id for call in waiting if call.id not in answers]
    if unanswered:
        raise InterruptUnresolvedError(
            "tool calls wait for approval and the input does not answer them in 'resume': "
            + ", ".join(unanswered)
        )
    return [answers[call.id] for call in waiting]


def token_call_id(token: str) -> str | None:
    """The call id a token names, unchecked (``None``: no token of ours): where a resume entry
    points, before its MAC is checked against that call."""
    parts = _parts(token)
    return parts.call_id if parts is not None else None


def decision_from(call: ToolCall, payload: Any) -> Decision:
    """A ``resolved`` answer, held to the schema the interrupt announced (``question``'s
    ``RESPONSE_SCHEMA``), and declined when it is off it: ``{"approved": "yes"}`` or an
    approval whose ``editedArgs`` is not an object runs nothing (as pydantic-ai reads it).
    Declined rather than refused with RUN_ERROR: @ag-ui/client keeps its pending interrupts
    after a RUN_ERROR, and CopilotKit drops its approval card when the resumed run starts,
    which would leave the thread with an interrupt nobody can answer any more."""
    if not isinstance(payload, dict) or type(payload.get("approved")) is not bool:
        return Decision(call, "declined", unreadable="no 'approved': true or false")
    edited, reason = payload.get("editedArgs"), payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        return Decision(call, "declined", unreadable="'reason' is not a string")
    if not payload["approved"]:
        return Decision(call, "declined", reason=reason or None)
    if edited is not None and not isinstance(edited, dict):
        return Decision(call, "declined", unreadable="'editedArgs' is not an object")
    return Decision(call, "approved", edited_args=edited, reason=reason or None)


@dataclass(frozen=True)
class _TokenParts:
    """A well-formed token, its MAC not yet checked."""

    payload_text: str  # as written: the MAC covers these characters
    mac: bytes
    call_id: str
    expiry: int


def _open(
    secret: bytes,
    parts: _TokenParts | None,
    thread_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: str,
) -> SignedInterrupt:
    """The token's contents if its MAC holds for these fields; ``InterruptInvalidError``
    if not, the same for every way it can fail (it tells a forger nothing)."""
    if parts is not None:
        expected = _mac(secret, parts.payload_text, thread_id, tool_call_id, tool_name, arguments)
        if hmac.compare_digest(parts.mac, expected) and parts.call_id == tool_call_id:
            return SignedInterrupt(parts.call_id, datetime.fromtimestamp(parts.expiry, UTC))
    raise InterruptInvalidError(
        f"the interrupt for the tool call {tool_call_id} is not one this bridge made for it "
        "(altered, from another thread, or the call was changed)"
    )


def _check_expiry(signed: SignedInterrupt, now: datetime) -> None:
    # At the instant itself it has expired, as @ag-ui/client's isInterruptExpired counts.
    if _seconds(now) >= int(signed.expires_at.timestamp()):
        raise InterruptExpiredError(
            f"the answer to the interrupt of the tool call {signed.tool_call_id} came after it "
            f"expired ({iso_utc(signed.expires_at)})"
        )


def _parts(token: str) -> _TokenParts | None:
    """A token's pieces; ``None`` for anything that is not a well-formed token."""
    if len(token) > MAX_TOKEN_CHARS or not token.startswith(TOKEN_PREFIX):
        return None
    pieces = token[len(TOKEN_PREFIX) :].split(".")
    if len(pieces) != 2:
        return None
    payload_text, mac_text = pieces
    payload, mac = _b64decode(payload_text), _b64decode(mac_text)
    if payload is None or mac is None or len(mac) != hashlib.sha256().digest_size:
        return None
    try:
        fields = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(fields, dict) or fields.keys() - {"n"} != {"c", "e"}:
        return None
    if not isinstance(fields.get("n", ""), str):
        return None
    call_id, expiry = fields["c"], fields["e"]
    if not isinstance(call_id, str) or type(expiry) is not int or not 0 <= expiry <= _LAST_SECOND:
        return None
    return _TokenParts(payload_text, mac, call_id, expiry)


def _mac(
    secret: bytes,
    payload_text: str,
    thread_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: str,
) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"the interrupt secret must be at least {MIN_SECRET_BYTES} bytes")
    digest = hashlib.sha256(arguments.encode("utf-8", "surrogatepass")).hexdigest()
    # A JSON array of strings: one unambiguous encoding of the fields, whatever they hold.
    message = json.dumps(
        [_MAC_LABEL, payload_text, thread_id, tool_call_id, tool_name, digest],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    return hmac.new(secret, message.encode("ascii"), hashlib.sha256).digest()


def _seconds(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("interrupt times must be timezone-aware (UTC)")
    return int(moment.timestamp() // 1)


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes | None:
    """Strict base64url: only its alphabet, no padding, and only the one spelling of the
    bytes (the last character's unused bits zero), so no two tokens decode alike."""
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        return None  # (a length of 4n+1 is the one the decoder would refuse)
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return data if _b64encode(data) == text else None
