"""Bodies a hostile or broken client sends get a 4xx that names what is wrong, never a 5xx, and a
run that starts always ends with its terminal event."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_rules import check_frames, parse_body
from bridge.serve.http.run_input import MAX_DEPTH
from servers import Stack, run_input, scripted_stack


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with scripted_stack(include_state=True) as running:
        yield running


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def _post(stack: Stack, raw: str | bytes) -> httpx.Response:
    return httpx.post(
        f"{stack.bridge_url}/",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=30,
    )


def _body(**fields: Any) -> dict[str, Any]:
    return run_input([{"id": "u", "role": "user", "content": "Hi"}], **fields)


def test_a_body_nested_thousands_deep_is_a_400(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    deep = json.dumps(_body(state="here")).replace(
        '"state": "here"', '"state": ' + "[" * 5000 + "]" * 5000
    )
    assert "[" * 5000 in deep
    with caplog.at_level(logging.ERROR):
        response = _post(stack, deep)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "too_deep"
    assert f"deeper than {MAX_DEPTH} levels" in error["message"]
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


@pytest.mark.parametrize("field", ["state", "forwardedProps"])
def test_nesting_is_allowed_to_the_limit_and_refused_past_it(stack: Stack, field: str) -> None:
    # The body's own object is level 1, so the field's value may nest MAX_DEPTH - 1 deep.
    allowed = _post(stack, json.dumps(_body(**{field: _nested(MAX_DEPTH - 1)})))
    assert allowed.status_code == 200
    assert parse_body(allowed.text)[-1]["type"] == "RUN_FINISHED"
    refused = _post(stack, json.dumps(_body(**{field: _nested(MAX_DEPTH)})))
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "too_deep"
    assert refused.json()["error"]["message"].startswith(f"{field}.0.k.0.k")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    ("where", "field"),
    [("forwardedProps", "forwardedProps.temperature"), ("state", "state.score")],
)
def test_non_finite_numbers_are_a_400_naming_the_field(
    stack: Stack, constant: str, where: str, field: str
) -> None:
    key = field.split(".")[1]
    raw = json.dumps(_body(**{where: {key: 0.5}})).replace("0.5", constant)
    response = _post(stack, raw)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert error["message"].startswith(f"{field}: {constant} is not a JSON number")


@pytest.mark.parametrize(
    ("escape", "field"),
    [
        ("\\ud800", "messages.0.content"),
        ("\\udfff tail", "messages.0.content"),
        ("\\ud83d", "messages.0.content"),  # the high half of an emoji, its low half missing
    ],
)
def test_lone_surrogates_are_a_400_naming_the_field(stack: Stack, escape: str, field: str) -> None:
    raw = json.dumps(_body()).replace('"content": "Hi"', f'"content": "Hi {escape}"')
    response = _post(stack, raw)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert error["message"].startswith(f"{field}: a lone surrogate")


def test_a_surrogate_pair_is_text(stack: Stack) -> None:
    raw = json.dumps(_body()).replace('"content": "Hi"', '"content": "Hi \\ud83d\\ude00"')
    response = _post(stack, raw)
    assert response.status_code == 200
    assert parse_body(response.text)[-1]["type"] == "RUN_FINISHED"


def test_a_lone_surrogate_in_a_key_is_a_400(stack: Stack) -> None:
    raw = json.dumps(_body(state={"ok": 1})).replace('"ok"', '"\\udc00"')
    response = _post(stack, raw)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("state: a lone surrogate")


def test_a_big_body_is_checked_as_a_small_one(stack: Stack) -> None:
    big = "x" * 600_000  # parsed off the event loop
    raw = json.dumps(_body(state={"blob": big, "bad": 0.5})).replace("0.5", "NaN")
    response = _post(stack, raw)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("state.bad: NaN")
    fine = _post(stack, json.dumps(_body(state={"blob": big})))
    assert fine.status_code == 200
    assert parse_body(fine.text)[-1]["type"] == "RUN_FINISHED"


#: Any text, lone surrogates included (hypothesis leaves them out unless asked).
TEXT = st.text(st.characters(codec=None), max_size=12)
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"id": TEXT, "role": st.sampled_from(["user", "assistant", "system", "tool", "reasoning", "developer"])},
        optional={"content": ANY_JSON | TEXT, "toolCallId": TEXT, "toolCalls": ANY_JSON, "name": TEXT},
    ),
    min_size=1,
    max_size=3,
)  # fmt: skip
RUN_INPUTS = st.fixed_dictionaries(
    {"threadId": TEXT, "runId": TEXT, "messages": MESSAGES},
    optional={"tools": ANY_JSON, "context": ANY_JSON, "state": ANY_JSON, "forwardedProps": ANY_JSON},
)  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=RUN_INPUTS, depth=st.integers(0, 3 * MAX_DEPTH))
def test_fuzzed_run_inputs_get_a_4xx_or_a_stream_that_ends(
    stack: Stack, body: dict[str, Any], depth: int
) -> None:
    """NaN, infinities, lone surrogates and deep nesting anywhere in a RunAgentInput."""
    body.setdefault("forwardedProps", {})
    if isinstance(body["forwardedProps"], dict):
        body["forwardedProps"]["deep"] = _nested(depth)
    raw = json.dumps(body, allow_nan=True)  # surrogates leave as \\u escapes
    response = _post(stack, raw)
    assert response.status_code < 500, response.text
    if response.status_code == 200:
        frames = parse_body(response.text)
        assert frames[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
        check_frames(frames)
        assert not any(frame.get("code") == "internal_error" for frame in frames), frames[-1]
    else:
        error = response.json()["error"]
        assert error["code"] and error["message"]
        assert "Traceback" not in error["message"]
