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
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import bridge
from agui_rules import check_frames, parse_body
from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, SCRIPTED_MODELS, create_scripted_upstream
from bridge.cli.parser import build_parser
from bridge.cli.replay import create_replay_app, load_recording, replay_summary, serve_command
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.upstream.record import FORMAT
from faulty_upstream import fault_model, faulty_upstream
from servers import ASK_TOOLS, TOOLS, forward_proxy, post, run_input, scripted_config, serve

KEY = "sk-record-test-0123456789abcdef"
_ADDRESS = re.compile(r"127\.0\.0\.1:\d+")
#: Ids the bridge makes itself (tool call ids too, for calls written as text).
_MADE_IDS = frozenset(
    {"messageId", "parentMessageId", "entityId", "toolCallId", "pendingToolCallIds"}
)


def read_records(folder: Path) -> list[list[dict[str, Any]]]:
    return [
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for path in sorted(folder.glob("*.jsonl"))
    ]


def normalized(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
                sent.append(normalized(post(f"{bridge_url}/", body)))

    records = read_records(tmp_path)
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
        assert normalized(events) == frames

    inputs = [record[0]["input"] for record in records]
    # The same key: redaction shapes the model's deltas (an end that may begin the key waits).
    again = _replayed(tmp_path, scripted_config("http://127.0.0.1:1", api_key=KEY), inputs)
    for model, before, after in zip(SCRIPTED_MODELS, sent, again, strict=True):
        assert normalized(after) == before, model


def test_replay_keeps_read_boundaries_and_pace(tmp_path: Path) -> None:
    upstream_app = create_scripted_upstream(pace=0.02)
    with serve(upstream_app) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            post(f"{bridge_url}/", run_input(forwardedProps={"model": "scripted-plain"}))
    (record,) = read_records(tmp_path)
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
    (record,) = read_records(tmp_path)
    end = next(line for line in record if line["type"] == "end")
    assert end["complete"] is False and end["error"] and end["kind"] == "closed"
    (after,) = _replayed(tmp_path, config, [record[0]["input"]])
    assert normalized(after) == normalized(before)


def test_a_refused_request_is_recorded_and_replayed_as_a_502(tmp_path: Path) -> None:
    config = BridgeConfig(
        upstream_url="http://127.0.0.1:9/v1", model="m", record_dir=str(tmp_path), retries=0
    )
    with serve(create_app(config)) as bridge_url:
        before = post(f"{bridge_url}/", run_input())
    assert before[-1]["code"] == "upstream_unreachable"
    (record,) = read_records(tmp_path)
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
    with pytest.raises(
        ValueError, match="not an agui-bridge-record/1 or agui-bridge-record/2 record"
    ):
        load_recording(tmp_path)


def test_the_replay_command_serves_a_recording(tmp_path: Path) -> None:
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            post(f"{bridge_url}/", run_input(forwardedProps={"model": "scripted-reasoning"}))
    (record,) = read_records(tmp_path)
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
    from bridge.cli.settings import config_from_args

    flags = ["--upstream-url", "http://127.0.0.1:8080/v1", "--model", "m"]
    args = build_parser().parse_args(["serve", *flags, "--record", str(tmp_path)])
    config = config_from_args(
        args, upstream_url=args.upstream_url, model="m", models=[], api_key=None
    )
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
    (record,) = read_records(tmp_path)
    requests = [line for line in record if line["type"] == "request"]
    assert [line["exchange"] for line in requests] == [1, 2]  # the call, then its answer
    assert requests[1]["body"]["messages"][-1]["role"] == "tool"
    (after,) = _replayed(tmp_path, config, [record[0]["input"]], tools=[_local_time])
    assert normalized(after) == normalized(before)


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
            # The proxy notes the first request of a connection only: no GET /props before.
            reasoning_scope="current-turn",
        )
        with serve(create_app(config)) as bridge_url:
            frames = post(f"{bridge_url}/", run_input())
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert any(line.startswith(f"POST {upstream_url}/v1/chat/completions") for line in seen)
    (record,) = read_records(tmp_path)
    assert [line["type"] for line in record].count("read") > 1


# --- a recording replays behind any prefix; its header holds the base URL and the version ------


def _prefixed_upstream(prefix: str) -> Starlette:
    """The scripted upstream served under ``prefix`` (as OpenRouter serves under ``/api/v1``)."""
    return Starlette(routes=[Mount(prefix, app=create_scripted_upstream())])


def test_a_recording_through_a_prefix_replays_behind_any_prefix(tmp_path: Path) -> None:
    models = ["scripted-reasoning", "scripted-think-no-open", "scripted-hermes-text"]
    sent: list[list[dict[str, Any]]] = []
    with serve(_prefixed_upstream("/case/x")) as upstream_url:
        # Credentials in the URL too: they go as basic auth, and nowhere in the record.
        with_credentials = upstream_url.replace("http://", "http://someone:pw-in-the-url@")
        config = scripted_config(upstream_url, record_dir=str(tmp_path), api_key=KEY)
        config = replace(config, upstream_url=f"{with_credentials}/case/x/v1")
        with serve(create_app(config)) as bridge_url:
            for model in models:
                body = run_input(
                    messages=[{"id": "u", "role": "user", "content": ASK_TOOLS}],
                    tools=TOOLS,
                    forwardedProps={"model": model},
                )
                sent.append(normalized(post(f"{bridge_url}/", body)))
    assert all(frames[-1]["type"] == "RUN_FINISHED" for frames in sent)

    records = read_records(tmp_path)
    text = "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))
    assert "pw-in-the-url" not in text and "someone" not in text and KEY not in text
    for record in records:
        header = record[0]
        assert header["upstream_url"] == f"{upstream_url}/case/x/v1"
        assert header["config"]["upstream_url"] == f"{upstream_url}/case/x/v1"
        assert header["bridge_version"] == bridge.__version__
        requests = [line for line in record if line["type"] == "request"]
        assert requests and all(
            line["url"] == f"{upstream_url}/case/x/v1/chat/completions" for line in requests
        )

    recording = load_recording(tmp_path)
    assert {exchange.endpoint for exchange in recording.exchanges} == {"/chat/completions"}
    # The serve line names every model the runs asked for, and the flags they were read with.
    line = serve_command(recording, "http://127.0.0.1:8001/v1")
    args = build_parser().parse_args(line[1:])
    assert (args.upstream_url, args.model) == ("http://127.0.0.1:8001/v1", DEFAULT_SCRIPTED_MODEL)
    assert args.models == ",".join(models)
    assert args.starts_in_reasoning_model == ["scripted-think-no-open"]
    inputs = [record[0]["input"] for record in records]
    for prefix in ("/v1", "/another/prefix/v1", "/api"):
        with serve(create_replay_app(recording, speed=4.0)) as replay_url:
            # The same credentials, so the same secrets: the frames' deltas are cut where the
            # redactor holds back what may begin one, and must match.
            replayed = replay_url.replace("http://", "http://someone:pw-in-the-url@")
            again = replace(config, upstream_url=f"{replayed}{prefix}", record_dir=None)
            with serve(create_app(again)) as bridge_url:
                after = [normalized(_post_raw(f"{bridge_url}/", body)) for body in inputs]
        assert after == sent, prefix


def _without_base_url(folder: Path) -> None:
    """Make the records in ``folder`` as a record without its base URL (written by hand, say)."""
    for path in folder.glob("*.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        del lines[0]["upstream_url"], lines[0]["config"]["upstream_url"]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_record_without_its_base_url_replays_by_absolute_path(tmp_path: Path) -> None:
    with serve(_prefixed_upstream("/case/x")) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        config = replace(config, upstream_url=f"{upstream_url}/case/x/v1")
        with serve(create_app(config)) as bridge_url:
            before = post(f"{bridge_url}/", run_input())
    _without_base_url(tmp_path)
    recording = load_recording(tmp_path)
    assert [exchange.endpoint for exchange in recording.exchanges] == [None]
    (record,) = read_records(tmp_path)
    request = next(line for line in record if line["type"] == "request")
    with serve(create_replay_app(recording, speed=4.0)) as replay_url:
        elsewhere = httpx.post(f"{replay_url}/v1/chat/completions", json=request["body"])
        assert elsewhere.status_code == 404
        again = replace(config, upstream_url=f"{replay_url}/case/x/v1", record_dir=None)
        with serve(create_app(again)) as bridge_url:
            after = _post_raw(f"{bridge_url}/", record[0]["input"])
    assert normalized(after) == normalized(before)


def test_replay_tells_the_recording_version_and_endpoints(tmp_path: Path) -> None:
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            post(f"{bridge_url}/", run_input())
    lines = list(replay_summary(load_recording(tmp_path), "http://127.0.0.1:9"))
    assert lines[0] == "agui-bridge replay: 1 recorded answers from 1 runs at http://127.0.0.1:9/v1"
    assert (
        lines[1] == f"  recorded by agui-bridge {bridge.__version__}; this is {bridge.__version__}"
    )
    assert lines[2] == "  POST /chat/completions: 1"


# --- replay's serve line works when pasted ----------------------------------------------------


def _read_until(stream: IO[str], prefix: str, deadline: float) -> str:
    while time.monotonic() < deadline:
        line = stream.readline()
        assert line, f"the process ended before printing {prefix!r}"
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting with {prefix!r}")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_replay_serve_line_works_pasted(tmp_path: Path, api: str) -> None:
    """Record, replay with the command, paste the serve line it prints (with --port 0): the
    bridge it starts gives the recorded events."""
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(
            upstream_url, record_dir=str(tmp_path), model="scripted-think-no-open", upstream_api=api
        )
        with serve(create_app(config)) as bridge_url:
            body = run_input(
                messages=[{"id": "u", "role": "user", "content": ASK_TOOLS}], tools=TOOLS
            )
            before = post(f"{bridge_url}/", body)
    assert before[-1]["type"] == "RUN_FINISHED"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "bridge"]
    replay = subprocess.Popen(
        [*command, "replay", str(tmp_path), "--port", "0", "--speed", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    bridge_process: subprocess.Popen[str] | None = None
    try:
        assert replay.stdout is not None
        deadline = time.monotonic() + 30
        line = _read_until(replay.stdout, "point a bridge at it: ", deadline)
        pasted = shlex.split(line.removeprefix("point a bridge at it: "))
        assert pasted[:2] == ["agui-bridge", "serve"]
        args = build_parser().parse_args(pasted[1:])  # the real parser takes it
        assert args.model == "scripted-think-no-open"
        assert args.upstream_api == api
        assert args.starts_in_reasoning_model == ["scripted-think-no-open"]
        bridge_process = subprocess.Popen(
            [*command, *pasted[1:], "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**env, "OPENAI_API_KEY": ""},
        )
        assert bridge_process.stdout is not None
        opened = _read_until(bridge_process.stdout, "agui-bridge: open ", deadline)
        agent = opened.split("agent at POST ", 1)[1].split(")")[0]
        while True:
            try:
                after = _post_raw(agent, body)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert normalized(after) == normalized(before)
    finally:
        for process in (bridge_process, replay):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)
