"""Recorded runs (``serve --record DIR``) and their replay (``agui-bridge replay DIR``).

A run recorded in every scripted dialect, replayed through a fresh bridge, gives the same events
(ids the bridge makes itself compared by where they first appear); the record holds no key; the
replay keeps the read boundaries and the pace (or a faster one); a connection cut mid-answer is
cut again, so the same RUN_ERROR comes back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_rules import check_frames, parse_body
from bridge.config import BridgeConfig
from bridge.replay import create_replay_app, load_recording
from bridge.scripted import SCRIPTED_MODELS, create_scripted_upstream
from bridge.serve.app import create_app
from bridge.serve.record import FORMAT
from faulty_upstream import fault_model, faulty_upstream
from servers import ASK_TOOLS, TOOLS, forward_proxy, post, run_input, scripted_config, serve

KEY = "sk-record-test-0123456789abcdef"
_ADDRESS = re.compile(r"127\.0\.0\.1:\d+")
#: Ids the bridge makes itself (tool call ids too, for calls written as text).
_MADE_IDS = frozenset(
    {"messageId", "parentMessageId", "entityId", "toolCallId", "pendingToolCallIds"}
)


def _records(folder: Path) -> list[list[dict[str, Any]]]:
    return [
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for path in sorted(folder.glob("*.jsonl"))
    ]


def _normalized(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frames with the ids the bridge makes (random per run) named by first appearance."""
    names: dict[str, str] = {}

    def rename(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: rename(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v, key) for v in value]
        if key in _MADE_IDS and isinstance(value, str):
            return names.setdefault(value, f"id-{len(names)}")
        if key == "message" and isinstance(value, str):  # names the upstream's address
            return _ADDRESS.sub("127.0.0.1:PORT", value)
        return value

    return [rename(frame) for frame in frames]


def _replayed(
    folder: Path, config: BridgeConfig, inputs: list[dict[str, Any]], tools: Any = ()
) -> list[Any]:
    """Each input posted to a bridge (``config``, less the recording, with server ``tools``)
    whose upstream is the replay of ``folder``."""
    recording = load_recording(folder)
    with serve(create_replay_app(recording, speed=4.0)) as replay_url:
        again = replace(config, upstream_url=f"{replay_url}{recording.base_path}", record_dir=None)
        with serve(create_app(again, tools=tools)) as bridge_url:
            return [_post_raw(f"{bridge_url}/", body) for body in inputs]


def _post_raw(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(url, json=body, timeout=30)
    assert response.status_code == 200, response.text
    return check_frames(parse_body(response.text))


def test_every_scripted_dialect_replays_to_the_same_events(tmp_path: Path) -> None:
    upstream_app = create_scripted_upstream()
    sent: list[dict[str, Any]] = []
    with serve(upstream_app) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path), api_key=KEY)
        with serve(create_app(config)) as bridge_url:
            for model in SCRIPTED_MODELS:
                body = run_input(
                    messages=[{"id": "u", "role": "user", "content": ASK_TOOLS}],
                    tools=TOOLS,
                    forwardedProps={"model": model},
                    runId=f"run-{model}",
                )
                sent.append(_normalized(post(f"{bridge_url}/", body)))

    records = _records(tmp_path)
    assert len(records) == len(SCRIPTED_MODELS)
    for record, model in zip(records, SCRIPTED_MODELS, strict=True):
        kinds = [line["type"] for line in record]
        assert kinds[0] == "run" and kinds[-1] == "run_end"
        assert {"request", "response", "read", "end", "event"} <= set(kinds)
        header = record[0]
        assert header["format"] == FORMAT and header["run_id"] == f"run-{model}"
        assert "api_key" not in header["config"]
        request = next(line for line in record if line["type"] == "request")
        assert request["body"]["model"] == model
        assert "authorization" not in {name.lower() for name in request["headers"]}
        times = [line["t"] for line in record]
        assert times == sorted(times)
    assert KEY not in "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))
    # The events recorded are the events the client got.
    for record, frames in zip(records, sent, strict=True):
        events = [line["event"] for line in record if line["type"] == "event"]
        assert _normalized(events) == frames

    inputs = [record[0]["input"] for record in records]
    # The same key: redaction shapes the model's deltas (an end that may begin the key waits).
    again = _replayed(tmp_path, scripted_config("http://127.0.0.1:1", api_key=KEY), inputs)
    for model, before, after in zip(SCRIPTED_MODELS, sent, again, strict=True):
        assert _normalized(after) == before, model


def test_replay_keeps_read_boundaries_and_pace(tmp_path: Path) -> None:
    upstream_app = create_scripted_upstream(pace=0.02)
    with serve(upstream_app) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            post(f"{bridge_url}/", run_input(forwardedProps={"model": "scripted-plain"}))
    (record,) = _records(tmp_path)
    reads = [line for line in record if line["type"] == "read"]
    assert len(reads) > 10  # one per paced frame
    recorded = reads[-1]["t"] - reads[0]["t"]
    request = next(line for line in record if line["type"] == "request")

    recording = load_recording(tmp_path)
    for speed in (1.0, 4.0):
        with serve(create_replay_app(recording, speed=speed)) as replay_url:
            pieces: list[tuple[float, bytes]] = []
            with httpx.stream(
                "POST", f"{replay_url}/v1/chat/completions", json=request["body"], timeout=30
            ) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                for piece in response.iter_raw():
                    pieces.append((time.monotonic(), piece))
        assert [piece for _, piece in pieces] == [line["text"].encode() for line in reads]
        took = pieces[-1][0] - pieces[0][0]
        assert recorded / speed * 0.7 < took < recorded / speed * 1.5 + 0.1, (speed, took)


def test_a_cut_answer_is_cut_again(tmp_path: Path) -> None:
    with faulty_upstream() as upstream:
        model = fault_model("cut", k=3)
        config = BridgeConfig(
            upstream_url=upstream.url, model=model, record_dir=str(tmp_path), retries=0
        )
        with serve(create_app(config)) as bridge_url:
            before = post(f"{bridge_url}/", run_input())
    assert before[-1]["type"] == "RUN_ERROR" and before[-1]["code"] == "upstream_truncated"
    (record,) = _records(tmp_path)
    end = next(line for line in record if line["type"] == "end")
    assert end["complete"] is False and end["error"] and end["kind"] == "closed"
    (after,) = _replayed(tmp_path, config, [record[0]["input"]])
    assert _normalized(after) == _normalized(before)


def test_a_refused_request_is_recorded_and_replayed_as_a_502(tmp_path: Path) -> None:
    config = BridgeConfig(
        upstream_url="http://127.0.0.1:9/v1", model="m", record_dir=str(tmp_path), retries=0
    )
    with serve(create_app(config)) as bridge_url:
        before = post(f"{bridge_url}/", run_input())
    assert before[-1]["code"] == "upstream_unreachable"
    (record,) = _records(tmp_path)
    assert [line["type"] for line in record if line["type"] in ("request", "error")] == [
        "request",
        "error",
    ]
    assert next(line for line in record if line["type"] == "error")["kind"] == "connect"
    (after,) = _replayed(tmp_path, config, [record[0]["input"]])
    assert after[-1]["type"] == "RUN_ERROR" and after[-1]["code"] == "upstream_http_502"
    assert "failed before any answer" in after[-1]["message"]


def test_no_recorded_answer_is_a_404(tmp_path: Path) -> None:
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            post(f"{bridge_url}/", run_input())
    with serve(create_replay_app(load_recording(tmp_path))) as replay_url:
        response = httpx.post(f"{replay_url}/v1/responses", json={}, timeout=10)
    assert response.status_code == 404
    assert "no recorded answer" in response.json()["error"]["message"]


def test_load_recording_refuses_what_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds no recorded runs"):
        load_recording(tmp_path)
    (tmp_path / "x.jsonl").write_text('{"type": "run", "format": "other/9"}\n')
    with pytest.raises(ValueError, match="not an agui-bridge-record/1 record"):
        load_recording(tmp_path)


def test_the_replay_command_serves_a_recording(tmp_path: Path) -> None:
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            post(f"{bridge_url}/", run_input(forwardedProps={"model": "scripted-reasoning"}))
    (record,) = _records(tmp_path)
    request = next(line for line in record if line["type"] == "request")
    replay = subprocess.Popen(
        [sys.executable, "-m", "bridge", "replay", str(tmp_path), "--port", "0", "--speed", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert replay.stdout is not None
        first = replay.stdout.readline()
        assert "1 recorded answers from 1 runs at http://127.0.0.1:" in first, first
        base = first.rsplit(" at ", 1)[1].strip()
        deadline = time.monotonic() + 15
        while True:
            try:
                response = httpx.post(f"{base}/chat/completions", json=request["body"], timeout=10)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert response.status_code == 200
        reads = "".join(line["text"] for line in record if line["type"] == "read")
        assert response.text == reads
    finally:
        replay.terminate()
        replay.wait(timeout=10)


def test_serve_record_flag_maps_onto_the_config(tmp_path: Path) -> None:
    from bridge.cli import _config, _parser

    flags = ["--upstream-url", "http://127.0.0.1:8080/v1", "--model", "m"]
    args = _parser().parse_args(["serve", *flags, "--record", str(tmp_path)])
    config = _config(args, upstream_url=args.upstream_url, model="m", models=[], api_key=None)
    assert config.record_dir == str(tmp_path)


def _local_time() -> str:
    """The time where the bridge runs."""
    return "12:00"


def test_a_run_with_server_tools_records_each_upstream_round(tmp_path: Path) -> None:
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config, tools=[_local_time])) as bridge_url:
            body = run_input(messages=[{"id": "u", "role": "user", "content": "What time is it?"}])
            before = post(f"{bridge_url}/", body)
    (record,) = _records(tmp_path)
    requests = [line for line in record if line["type"] == "request"]
    assert [line["exchange"] for line in requests] == [1, 2]  # the call, then its answer
    assert requests[1]["body"]["messages"][-1]["role"] == "tool"
    (after,) = _replayed(tmp_path, config, [record[0]["input"]], tools=[_local_time])
    assert _normalized(after) == _normalized(before)


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_recording_keeps_the_proxy_environment(
    tmp_path: Path, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--record`` wraps the transports the client makes, so HTTP(S)_PROXY still applies."""
    with forward_proxy() as (proxy_url, seen), serve(create_scripted_upstream()) as upstream_url:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        config = scripted_config(
            upstream_url,
            record_dir=str(tmp_path),
            upstream_transport=transport,
        )
        with serve(create_app(config)) as bridge_url:
            frames = post(f"{bridge_url}/", run_input())
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert any(line.startswith(f"POST {upstream_url}/v1/chat/completions") for line in seen)
    (record,) = _records(tmp_path)
    assert [line["type"] for line in record].count("read") > 1
