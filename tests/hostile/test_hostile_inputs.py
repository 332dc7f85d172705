"""Big and ill-typed inputs from a hostile client and a hostile MCP server (issue 40, findings 7
and 12), over real sockets.

Promises held: no input holds the event loop (a big body is parsed, checked and validated in a
worker thread, a slice at a time; a widget's big MCP result is framed there too); an id longer
than ``MAX_ID_CHARS`` is refused, naming it, before the body is validated; a ``forwardedProps``
value its parameter does not take is refused, naming it and what it takes, before anything goes
upstream. Order and structure are asserted, never time (``benchmarks/big_body_stall.py``
measures the stalls).
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunAgentInput
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from agui_rules import check_frames, parse_body
from bridge.serve.http import run_input as reading
from bridge.serve.http.run_input import MAX_ID_CHARS, OFF_LOOP_BYTES, validate_run_input
from bridge.serve.redact import Redactor
from peers_inputs import KEY, MARKER, Gate, on_event_loop, part_history, posted_while_gated
from servers import Stack, run_input, scripted_stack

PEER = Path(__file__).resolve().parent / "peers_inputs.py"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack(api_key=KEY) as running:
        yield running


def _spy_on_validation(monkeypatch: pytest.MonkeyPatch, also: Callable[[Any], None]) -> None:
    """``RunAgentInput.model_validate`` calls ``also(data)`` first: the validation of every
    body, on the old code as on the new."""
    validate = RunAgentInput.model_validate

    def spy(data: Any, *args: Any, **kwargs: Any) -> RunAgentInput:
        also(data)
        return validate(data, *args, **kwargs)

    monkeypatch.setattr(RunAgentInput, "model_validate", spy)


# -- Finding 7: big inputs off the event loop -----------------------------------------------------
def test_a_big_body_is_validated_in_a_worker_thread_while_health_answers(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 7: a 13.5 MB body held /health for seconds, validated on the event loop. Now a
    body over OFF_LOOP_BYTES is validated in a worker thread: the loop answers /health while
    the validation is under way."""
    gate = Gate()

    def hold(data: Any) -> None:
        if isinstance(data, dict) and data.get("threadId") == "big-body":
            gate.hold()

    _spy_on_validation(monkeypatch, hold)
    body = run_input(part_history(20_000), threadId="big-body")
    assert len(json.dumps(body)) > 10 * OFF_LOOP_BYTES
    response = posted_while_gated(stack.bridge_url, gate, body)
    assert gate.on_loop == [False]
    assert gate.order == ["work started", "health answered", "work went on"]
    assert response.status_code == 200
    assert check_frames(parse_body(response.text))[-1]["type"] == "RUN_FINISHED"


def test_a_big_body_is_validated_a_slice_at_a_time(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 7: one pydantic call holds the GIL, and with it the event loop, worker thread or
    not (13 MB of small content parts: one 2.7 s call). The validator is given at most about
    ``_SLICE`` objects a call: messages, a big message's parts, tool calls, context entries."""
    sizes: list[int] = []
    validate = TypeAdapter.validate_python

    def spy(self: TypeAdapter[Any], items: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(items, list):
            sizes.append(len(items) + sum(reading._inner_length(item) for item in items))
        return validate(self, items, *args, **kwargs)

    monkeypatch.setattr(TypeAdapter, "validate_python", spy)
    one_big = {"id": "big", "role": "user", "content": [{"type": "text", "text": "x"}] * 3000}
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    calls = [{"id": f"c{i}", **call} for i in range(2000)]
    many_calls = {"id": "a", "role": "assistant", "toolCalls": calls}
    answers = [{"id": "t", "role": "tool", "toolCallId": "c0", "content": "ok"}]
    messages = [*part_history(20_000), one_big, many_calls, *answers]
    context = [{"description": "a fact", "value": "v"}] * 5000
    response = httpx.post(
        f"{stack.bridge_url}/", json=run_input(messages, context=context), timeout=60
    )
    assert response.status_code == 200, response.text[:300]
    assert check_frames(parse_body(response.text))[-1]["type"] == "RUN_FINISHED"
    assert len(sizes) > 20 and max(sizes) <= reading._SLICE


ROLES = ["user", "assistant", "tool", "system", "developer", "reasoning", "activity", "wizard"]
PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "nope"]), "text": st.text(max_size=3)}
)
CALL = st.fixed_dictionaries(
    {"id": st.text(max_size=3), "type": st.just("function")},
    optional={"function": st.fixed_dictionaries({"name": st.just("f"), "arguments": st.just("")})},
)
MESSAGE = st.fixed_dictionaries(
    {"id": st.text(max_size=3), "role": st.sampled_from(ROLES)},
    optional={
        "content": st.text(max_size=3) | st.lists(PART, max_size=9) | st.none(),
        "toolCalls": st.lists(CALL, max_size=9),
        "tool_calls": st.lists(CALL, max_size=9),
        "toolCallId": st.text(max_size=3),
        "activityType": st.just("a"),
    },
)
BODY = st.fixed_dictionaries(
    {"threadId": st.just("t"), "runId": st.just("r"), "messages": st.lists(MESSAGE, max_size=9)},
    optional={
        "context": st.lists(
            st.fixed_dictionaries({"description": st.just("d"), "value": st.text(max_size=2)}),
            max_size=9,
        ),
        "tools": st.lists(st.fixed_dictionaries({"name": st.just("n")}), max_size=4),
        "forwarded_props": st.just({"a": 1}),
    },
)


@settings(max_examples=300, deadline=None)
@given(body=BODY)
def test_sliced_validation_is_the_whole_validation(body: dict[str, Any]) -> None:
    """Finding 7: validated a slice at a time (slices of 3 here, so every body is cut), a body
    makes the same RunAgentInput as validated whole, or is refused as it would be."""
    slice_of = reading._SLICE
    reading._SLICE = 3
    try:
        try:
            whole = RunAgentInput.model_validate(body)
        except ValueError:
            with pytest.raises(reading.InvalidRunInputError) as refused:
                validate_run_input(body)
            assert refused.value.status == 422
            return
        sliced = validate_run_input(body)
    finally:
        reading._SLICE = slice_of
    assert sliced == whole
    assert sliced.model_dump(by_alias=True, exclude_unset=True) == whole.model_dump(
        by_alias=True, exclude_unset=True
    )


def test_a_big_proxied_mcp_result_is_framed_off_the_loop_while_health_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 7: a widget's proxied request whose MCP result was 30 MB held the loop for
    0.9 s, its frame encoded and redacted there. Now it is framed in a worker thread, a slice
    at a time: the loop answers /health meanwhile, and the key in the text is still redacted
    wherever a slice's edge falls."""
    gate = Gate()
    scans: list[bool] = []
    redact, split_held = Redactor.redact, Redactor.split_held

    def watched(text: str) -> None:
        if MARKER in text:
            scans.append(on_event_loop())
            if '"RUN_FINISHED"' in text or len(scans) > 1:
                gate.hold()

    def spy_redact(self: Redactor, text: str) -> str:
        watched(text)
        return redact(self, text)

    def spy_split(self: Redactor, text: str) -> tuple[str, str]:
        watched(text)
        return split_held(self, text)

    monkeypatch.setattr(Redactor, "redact", spy_redact)
    monkeypatch.setattr(Redactor, "split_held", spy_split)
    size = 2_000_000
    server = f"{sys.executable} {PEER} --size {size}"
    with scripted_stack(api_key=KEY, mcp_servers={"big": server}) as made:
        call = {"serverId": "big", "method": "tools/call", "params": {"name": "big"}}
        body = run_input(forwardedProps={"__proxiedMCPRequest": call})
        response = posted_while_gated(made.bridge_url, gate, body)
    assert response.status_code == 200
    frames = check_frames(parse_body(response.text))
    assert [frame["type"] for frame in frames] == ["RUN_STARTED", "RUN_FINISHED"]
    text = frames[-1]["result"]["content"][0]["text"]
    assert MARKER in text and "[redacted]" in text
    assert KEY[:8] not in response.text
    assert scans and not any(scans)
    assert gate.order == ["work started", "health answered", "work went on"]


def test_a_body_over_the_limit_is_refused_before_it_is_all_read() -> None:
    """Finding 7: --max-body-bytes is checked as the body arrives: a chunked body (no length
    said) is refused with 413 once past the limit, while the client has not finished it."""
    with scripted_stack(max_body_bytes=100_000) as made:
        host, port = made.bridge_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(
                b"POST / HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            piece = b"x" * 50_000
            for _ in range(3):  # 150 kB, and the body never ends: no last chunk
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"body_too_large" in answer


# -- Finding 7: ids have a length limit -----------------------------------------------------------
def _ids_body(where: str, value: str) -> dict[str, Any]:
    call = {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"id": "u", "role": "user", "content": "Hi"},
        {"id": "a", "role": "assistant", "toolCalls": [call]},
        {"id": "t", "role": "tool", "toolCallId": "call-1", "content": "ok"},
        {"id": "u2", "role": "user", "content": "again"},
    ]
    body = run_input(messages)
    if where in ("threadId", "runId", "parentRunId", "thread_id"):
        body.pop("threadId" if where == "thread_id" else where, None)
        body[where] = value
    elif where == "messages.0.id":
        messages[0]["id"] = value
    elif where == "messages.1.toolCalls.0.id":
        call["id"] = value
    elif where == "messages.2.toolCallId":
        messages[2]["toolCallId"] = value
    elif where == "resume.0.interruptId":
        body["resume"] = [{"interruptId": value, "status": "cancelled"}]
    return body


ID_PLACES = [
    "threadId", "thread_id", "runId", "parentRunId", "messages.0.id",
    "messages.1.toolCalls.0.id", "messages.2.toolCallId", "resume.0.interruptId",
]  # fmt: skip


@pytest.mark.parametrize("where", ID_PLACES)
def test_a_10_mb_id_is_refused_before_validation_naming_it(
    stack: Stack, where: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 7: a 10 MB thread id grew the log and a span by 10 MB each. An id longer than
    MAX_ID_CHARS is a 400 ``id_too_long`` naming where it is, before the body is validated."""
    validated: list[Any] = []
    _spy_on_validation(monkeypatch, validated.append)
    seen = len(stack.upstream_requests)
    with caplog.at_level(logging.DEBUG):
        response = httpx.post(
            f"{stack.bridge_url}/", json=_ids_body(where, "i" * 10_000_000), timeout=60
        )
    assert response.status_code == 400, response.text[:200]
    error = response.json()["error"]
    assert error["code"] == "id_too_long"
    assert error["message"] == f"{where}: an id of 10000000 characters (at most {MAX_ID_CHARS})"
    assert validated == [] and len(stack.upstream_requests) == seen
    assert max((len(record.getMessage()) for record in caplog.records), default=0) < 2000


@pytest.mark.parametrize("where", ID_PLACES)
def test_an_id_of_the_limit_is_taken_and_one_more_is_refused(stack: Stack, where: str) -> None:
    """Finding 7: the limit is MAX_ID_CHARS characters, to the character."""
    taken = httpx.post(f"{stack.bridge_url}/", json=_ids_body(where, "i" * MAX_ID_CHARS))
    assert taken.status_code == 200
    assert check_frames(parse_body(taken.text))[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    refused = httpx.post(f"{stack.bridge_url}/", json=_ids_body(where, "i" * (MAX_ID_CHARS + 1)))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "id_too_long"


# -- Finding 12: forwardedProps values are what their parameters take -----------------------------
WRONG = [
    ("temperature", "hot", "a number, 0 or more"),
    ("temperature", True, "a number, 0 or more"),  # a bool is an int in Python: not here
    ("temperature", -0.5, "a number, 0 or more"),
    ("topP", 1.5, "a number from 0 to 1"),
    ("min_p", [0.1], "a number from 0 to 1"),
    ("topK", 2.5, "an integer, -1 or more"),
    ("maxTokens", "100", "an integer, 1 or more (or -1: no limit)"),
    ("max_tokens", 0, "an integer, 1 or more (or -1: no limit)"),
    ("max_completion_tokens", 10.0, "an integer, 1 or more (or -1: no limit)"),
    ("presencePenalty", 3, "a number from -2 to 2"),
    ("frequency_penalty", {"x": 1}, "a number from -2 to 2"),
    ("repetition_penalty", 0, "a number above 0"),
    ("reasoningEffort", 3, "a string such as low, medium or high"),
    ("seed", 1.5, "a 64-bit integer"),
    ("seed", False, "a 64-bit integer"),
    ("seed", 2**70, "a 64-bit integer"),
    ("stop", 5, "a string or a list of strings"),
    ("stopSequences", ["\n", 1], "a string or a list of strings"),
    ("n_predict", -3, "an integer, -2 or more"),
    ("parallelToolCalls", "yes", "true or false"),
    ("parallel_tool_calls", 1, "true or false"),
    ("toolChoice", "sometimes", '"none", "auto", "required" or'),
    ("tool_choice", {"type": "function"}, '"none", "auto", "required" or'),
]


@pytest.mark.parametrize(("key", "value", "takes"), WRONG)
def test_a_forwarded_value_its_parameter_does_not_take_is_refused_naming_it(
    stack: Stack, key: str, value: Any, takes: str
) -> None:
    """Finding 12: ``temperature: "hot"`` went upstream as it was (llama.cpp reads it as its
    default: a silent wrong answer). Each allowed value is checked against what its parameter
    takes; a wrong one is a 400 ``invalid_input`` naming the field as sent and what it takes,
    and nothing goes upstream."""
    seen = len(stack.upstream_requests)
    response = httpx.post(f"{stack.bridge_url}/", json=run_input(forwardedProps={key: value}))
    assert response.status_code == 400, response.text[:200]
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["message"].startswith(f"forwardedProps.{key}: ")
    assert takes in error["message"]
    assert len(stack.upstream_requests) == seen


def test_forwarded_values_their_parameters_take_go_upstream_and_null_leaves_one_unset(
    stack: Stack,
) -> None:
    """Finding 12: the edges of each range pass as they are; ``null`` leaves a parameter
    unset (it is not sent); a wrong value under a name that is not read is not checked."""
    props = {
        "temperature": 0, "topP": 1, "top_k": -1, "minP": 0.05, "maxTokens": -1,
        "presence_penalty": -2, "frequencyPenalty": 2.0, "repetitionPenalty": 1.1,
        "reasoning_effort": "low", "seed": 2**63, "stop": [], "nPredict": -2,
        "parallel_tool_calls": False, "toolChoice": {"type": "function", "function": {"name": "f"}},
        "max_completion_tokens": None, "stopSequences": "x", "maxTokensHint": "many",
    }  # fmt: skip
    seen = len(stack.upstream_requests)
    response = httpx.post(f"{stack.bridge_url}/", json=run_input(forwardedProps=props))
    assert response.status_code == 200, response.text[:200]
    sent = stack.upstream_requests[seen]
    assert {key: sent[key] for key in sent if key not in ("model", "messages", "stream")} == {
        "temperature": 0, "top_p": 1, "top_k": -1, "min_p": 0.05, "max_tokens": -1,
        "presence_penalty": -2, "frequency_penalty": 2.0, "repetition_penalty": 1.1,
        "reasoning_effort": "low", "seed": 2**63, "stop": [], "n_predict": -2,
        "parallel_tool_calls": False, "tool_choice": {"type": "function", "function": {"name": "f"}},
        "stream_options": {"include_usage": True},
    }  # fmt: skip
    assert type(sent["temperature"]) is int and type(sent["frequency_penalty"]) is float
