"""Every run ends with exactly one terminal event, whatever fails (README "Promises").

A model turn ends itself with ``RUN_ERROR`` whatever its upstream does (``tests/test_faults.py``),
and a batch that cannot be encoded ends its run with ``unencodable_event``
(``test_hostile_state.py``, finding 3). What was left: a failure of the bridge's own outside a
turn (reading ``/props`` before the first turn, the approvals, building the next request) cut
the stream with no terminal event, and so did a widget's answer that could not be encoded. Here
a fault is injected in each place, with real servers on both ends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agui_rules import check_frames
from bridge.cli.demo.tools import get_time
from bridge.serve.http import widgets
from bridge.serve.run.props import UpstreamProps
from servers import post, run_input, scripted_stack

ASK = [{"id": "u1", "role": "user", "content": "What time is it?"}]
MCP_UI_SERVER = Path(__file__).resolve().parents[1] / "mcp_ui_server.py"


class Boom(RuntimeError):
    """A bug of the bridge's own, injected."""


def _boom(*_: Any, **__: Any) -> Any:
    raise Boom("injected")


def _ends_once_with(frames: list[dict[str, Any]], code: str) -> None:
    check_frames(frames)
    ends = [f for f in frames if f["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert [(f["type"], f.get("code")) for f in ends] == [("RUN_ERROR", code)]
    assert frames[-1] is ends[0]


def test_a_failure_before_the_first_turn_ends_the_run_with_internal_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``--reasoning-scope auto`` reads ``/props`` after RUN_STARTED: a failure there that is
    no upstream error (a bug) ends the run with ``internal_error``, its traceback in the log
    only, and the run line says ``error``."""
    monkeypatch.setattr(UpstreamProps, "reasoning_scope", _boom)
    caplog.set_level(logging.INFO)
    with scripted_stack(reasoning_scope="auto") as stack:
        frames = post(stack.bridge_url, run_input(ASK))
    _ends_once_with(frames, "internal_error")
    assert "injected" not in frames[-1]["message"]
    assert "Boom: injected" in caplog.text  # the traceback, in the log
    assert "outcome=error code=internal_error" in caplog.text


def test_a_failure_between_turns_ends_the_run_with_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server tool's round is over and the approvals' check of the calls that wait fails:
    the results that went out stay, and the run ends with ``internal_error``."""
    monkeypatch.setattr("bridge.serve.run.resume.Approvals.unaskable", _boom)
    with scripted_stack(reasoning_scope="current-turn", tools=[get_time]) as stack:
        frames = post(stack.bridge_url, run_input(ASK))
    assert any(f["type"] == "TOOL_CALL_RESULT" for f in frames)  # get_time ran
    _ends_once_with(frames, "internal_error")
    # The failure came inside the round's step (issue 43): it is finished before the end.
    assert [(f["type"], f.get("stepName")) for f in frames[-2:]] == [
        ("STEP_FINISHED", "tools: get_time"),
        ("RUN_ERROR", None),
    ]


def test_a_widget_answer_that_cannot_be_encoded_ends_with_run_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A widget's proxied request whose answer cannot be framed ends with RUN_ERROR
    ``unencodable_event``, not a cut stream."""
    pytest.importorskip("mcp")
    monkeypatch.setattr(widgets, "finished_frame", _boom)
    ping = {"__proxiedMCPRequest": {"serverId": "ui", "method": "ping"}}
    with scripted_stack(mcp_servers={"ui": f"python {MCP_UI_SERVER}"}) as stack:
        frames = post(stack.bridge_url, run_input(forwardedProps=ping))
    assert frames[0]["type"] == "RUN_STARTED"
    _ends_once_with(frames, "unencodable_event")
