"""Issue 22 (5): a recorder that cannot write stops recording that run, and the run goes on.

A full disk mid-run, a record folder that is gone, a value JSON cannot hold: the client still
gets every event and the terminal one; the warning is logged once; the file keeps only whole
lines, and no empty file is left behind. (Before, the recorder raised inside the run's frames:
the client got a cut response with no terminal event, and a 0-byte file stayed.)
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
from pathlib import Path
from typing import IO, Any

import pytest
from ag_ui.core import RunAgentInput

from bridge.cli.demo import create_scripted_upstream
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.redact import Redactor
from bridge.serve.upstream.record import Recorder
from bridge.serve.upstream.recording import RunRecord
from servers import ASK_TOOLS, TOOLS, post, run_input, scripted_config, serve

STOPPED = "recording stopped for this run"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if STOPPED in r.getMessage()]


def _body() -> dict[str, Any]:
    return run_input(
        messages=[{"id": "u", "role": "user", "content": ASK_TOOLS}],
        tools=TOOLS,
        forwardedProps={"model": "scripted-reasoning"},
    )


class _SmallDisk:
    """A record file on a disk with room for ``room`` bytes: a write past it writes what fits,
    then fails as a full disk does."""

    def __init__(self, file: IO[bytes], room: int) -> None:
        self._file = file
        self._room = room

    def write(self, data: bytes | str) -> int:
        data = data.encode() if isinstance(data, str) else data
        fits = data[: self._room]
        self._file.write(fits)
        self._file.flush()
        self._room -= len(fits)
        if len(fits) < len(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._file.close()


def test_a_full_disk_mid_run_stops_the_recording_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    room = 6000  # the header and a few lines
    real_open = Path.open

    def small_disk(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if path.parent != tmp_path or not {"w", "x"} & set(mode):
            return real_open(path, mode, *args, **kwargs)
        return _SmallDisk(real_open(path, "wb"), room)

    monkeypatch.setattr(Path, "open", small_disk)
    caplog.set_level(logging.WARNING, logger="agui_bridge")
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            frames = post(f"{bridge_url}/", _body())  # checks the protocol's order too
    assert frames[-1]["type"] == "RUN_FINISHED"
    assert len(frames) > 20  # a run long enough to outgrow the disk
    assert len(_warnings(caplog)) == 1
    assert "No space left on device" in _warnings(caplog)[0]

    (path,) = tmp_path.glob("*.jsonl")
    text = path.read_text(encoding="utf-8")
    assert 0 < len(text) <= room and text.endswith("\n")  # whole lines only
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "run" and lines[-1]["type"] != "run_end"


def test_a_record_folder_gone_mid_serve_stops_recording_not_the_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "runs"
    caplog.set_level(logging.WARNING, logger="agui_bridge")
    with serve(create_scripted_upstream()) as upstream_url:
        config = scripted_config(upstream_url, record_dir=str(folder))
        with serve(create_app(config)) as bridge_url:
            shutil.rmtree(folder)
            folder.write_text("a file where the folder was")  # nothing can be created in it
            frames = post(f"{bridge_url}/", _body())
            assert frames[-1]["type"] == "RUN_FINISHED"
            assert len(_warnings(caplog)) == 1
            assert list(tmp_path.glob("**/*.jsonl")) == []

            folder.unlink()
            folder.mkdir()  # the next run is recorded again
            again = post(f"{bridge_url}/", _body())
    assert again[-1]["type"] == "RUN_FINISHED"
    (path,) = folder.glob("*.jsonl")
    assert json.loads(path.read_text().splitlines()[-1])["type"] == "run_end"


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def test_a_line_json_cannot_hold_stops_the_record_with_whole_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agui_bridge")
    config = BridgeConfig(upstream_url="http://upstream.test/v1", model="m")
    recorder = Recorder(tmp_path, config, Redactor([]))
    with recorder.run(RunAgentInput.model_validate(run_input())) as record:
        record.write("event", event={"type": "CUSTOM", "value": _deep(100_000)})
        assert not record.recording
        record.write("event", event={"type": "CUSTOM"})  # nothing more, and no second warning
    assert len(_warnings(caplog)) == 1
    (path,) = tmp_path.glob("*.jsonl")
    assert [json.loads(line)["type"] for line in path.read_text().splitlines()] == ["run"]


def test_no_empty_record_is_left_behind(tmp_path: Path) -> None:
    record = RunRecord(tmp_path / "run.jsonl", Redactor([]))
    record.write("run", input=_deep(100_000))  # the first line fails: no file at all
    record.close()
    assert list(tmp_path.iterdir()) == []
