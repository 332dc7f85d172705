"""The small ones of issue 56 (point 7), over real sockets on one process and on three sharing
Redis or a folder: a frame's number is ASCII digits (400 otherwise, never a 500); a client
that has an ended run's last frame gets 204, one that names a frame past it 400; a run id
holding ``%XX`` is followed from its start, and reads as unknown to another owner; a run id no
URL path can carry is refused at its POST. Then the configuration's: a TOML file nested too
deep, and a thread owner header that is no header's name, each one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from threads_processes import (
    ALICE,
    BOB,
    SHORT,
    TOPOLOGIES,
    Processes,
    fresh,
    run_body,
    topology,
)
from threads_tools import numbers, sse


@pytest.fixture(scope="module", params=TOPOLOGIES)
def bridges(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Processes]:
    with topology(request, tmp_path_factory, models=SHORT) as made:
        yield made


def _run(url: str, run_id: str) -> int:
    """Post a short run to its end; the number of its last frame."""
    answer = httpx.post(url + "/", json=run_body(fresh("t"), run_id, SHORT), headers=ALICE)
    assert answer.status_code == 200, answer.text
    frames = sse(answer.text)
    assert frames[-1][1]["type"] == "RUN_FINISHED"
    return numbers(frames)[-1]


def _events(url: str, run_id: str, headers: dict[str, str], **params: str) -> httpx.Response:
    return httpx.get(
        f"{url}/runs/{quote(run_id, safe='')}/events", headers=headers, params=params, timeout=30
    )


@pytest.mark.parametrize("number", ["²", "١٢", "3²", "-1", "+2", " 2"])
def test_a_frame_number_is_ascii_digits(bridges: Processes, number: str) -> None:
    run_id = fresh("digits")
    _run(bridges.urls[0], run_id)
    for url in bridges.urls[:2]:  # the run's process, and another (the store's copy)
        told = _events(url, run_id, {**ALICE, "Last-Event-ID": f"{run_id}:{number}".encode()})
        asked = _events(url, run_id, ALICE, after=number)
        assert (told.status_code, asked.status_code) == (400, 400), (told.text, asked.text)
        assert told.json()["error"]["code"] == asked.json()["error"]["code"] == "invalid_input"


def test_the_end_of_an_ended_run_is_204_and_past_it_400(bridges: Processes) -> None:
    run_id = fresh("end")
    last = _run(bridges.urls[0], run_id)
    for url in bridges.urls[:2]:
        at = _events(url, run_id, {**ALICE, "Last-Event-ID": f"{run_id}:{last}"})
        before = _events(url, run_id, {**ALICE, "Last-Event-ID": f"{run_id}:{last - 1}"})
        past = _events(url, run_id, {**ALICE, "Last-Event-ID": f"{run_id}:{last + 1}"})
        far = _events(url, run_id, ALICE, after=str(last + 1000))
        assert at.status_code == 204 and at.content == b""
        assert before.status_code == 200
        rest = sse(before.text)
        assert [(n, data["type"]) for n, (_, data) in zip(numbers(rest), rest, strict=True)] == [
            (last, "RUN_FINISHED")
        ]
        assert (past.status_code, far.status_code) == (400, 400), (past.text, far.text)


@pytest.mark.parametrize("run_id", ["a%41b", "100%25 sure", "é%2Fx"])
def test_a_run_id_holding_percent_escapes_is_followed_from_its_start(
    bridges: Processes, run_id: str
) -> None:
    run_id = f"{run_id}-{fresh('p')}"
    last = _run(bridges.urls[0], run_id)
    for url in bridges.urls[:2]:
        whole = _events(url, run_id, ALICE)
        assert whole.status_code == 200, whole.text
        frames = sse(whole.text)
        assert numbers(frames) == list(range(1, last + 1))
        assert frames[0][0] == f"{quote(run_id, safe='')}:1"
        assert _events(url, run_id, BOB).status_code == 404  # another owner's: unknown


@pytest.mark.parametrize("run_id", [".", "..", "a/b", "/", "../x"])
def test_a_run_id_no_path_can_carry_is_refused_at_its_post(bridges: Processes, run_id: str) -> None:
    answer = httpx.post(
        bridges.urls[0] + "/", json=run_body(fresh("t"), run_id, SHORT), headers=ALICE
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_input"


def _serve(*flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "bridge", "serve", "--upstream-url", "http://127.0.0.1:9/v1"]
    return subprocess.run(
        [*command, "--model", "m", "--threads", "memory", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_config_nested_too_deep_is_one_line_and_exit_2(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 3000 + "]" * 3000 + "\n")
    done = _serve("--config", str(deep))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"agui-bridge: {deep}: its values are nested too deep to read"
    ]


@pytest.mark.parametrize("name", ["", "X User", "X-User\n", "X:User", "Ünder"])
def test_a_thread_owner_header_must_be_a_headers_name(tmp_path: Path, name: str) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(f"thread-owner-header = {name!r}\n".replace("'", '"'))
    for done in (_serve("--thread-owner-header", name), _serve("--config", str(config))):
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.splitlines()) == 1
        assert "must be a header's name" in done.stderr
