"""``agui-bridge doctor`` against a live llama-server with each chat template the live tests use:
it names llama.cpp, the reasoning format, tool calls, usage and the Responses API, warns of
nothing that is not so, and the ``serve`` line it prints, run as printed, serves a run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import llama_server
from live_tools import ARTIFACTS, DETERMINISTIC, llama, one_run, user
from servers import free_port

ROOT = Path(__file__).resolve().parents[2]
#: The doctor sends no sampling settings (a server's defaults are what users get): greedy and
#: seeded by the server's own defaults, so that its diagnosis is the same every time.
GREEDY = ("--temp", "0", "--seed", "42")


def _doctor(url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "doctor", "--upstream-url", url, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert done.stdout, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def _serve_as_printed(command: str) -> str:
    """Runs the printed ``serve`` line (``agui-bridge`` as ``python -m bridge``), on a free port;
    one run through the official client must finish."""
    words = shlex.split(command)
    assert words[:2] == ["agui-bridge", "serve"], command
    port = free_port()
    log = (ARTIFACTS / f"serve-{port}.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", *words[1:], "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/agent/health", timeout=2).is_success:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        report = one_run(
            f"http://127.0.0.1:{port}/agent/",
            [user("Write a short story about a cat named Tom.")],
            forwardedProps={**DETERMINISTIC, "max_tokens": 24},
        )
        return str(report["events"][-1]["type"])
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()


@pytest.mark.parametrize(
    ("template", "reasoning_format", "reasoning"),
    [
        (llama_server.THINKING_TEMPLATE, "deepseek", "reasoning_content"),
        (llama_server.THINKING_TEMPLATE, "none", "tags"),
        (llama_server.PRESERVING_TEMPLATE, "deepseek", "reasoning_content"),
    ],
)
def test_the_doctor_tells_llama_cpp_as_it_is_and_its_serve_line_works(
    bed: llama_server.Bed, template: str, reasoning_format: str, reasoning: str
) -> None:
    with llama(bed, template=template, reasoning_format=reasoning_format, extra=GREEDY) as server:
        report = _doctor(server.url)
        assert report["usable"] is True, report
        assert str(report["server"]).startswith("llama.cpp (build b")
        assert report["reasoning"] == reasoning
        assert report["reasoning_format"] == reasoning_format
        assert report["starts_in_reasoning"] is False  # llama.cpp writes the opened <think>
        assert report["usage"] is True
        assert report["responses_api"] is True
        assert report["reasoning_round_trip"] == "accepted"
        failed = [probe for probe in report["probes"] if not probe["ok"]]  # type: ignore[attr-defined]
        assert failed == []
        preserves = template == llama_server.PRESERVING_TEMPLATE
        assert report["reasoning_scope"] == ("all" if preserves else "current-turn")
        # Started without --mmproj: its /props says no image, audio or video is taken.
        assert report["attachments"] == dict.fromkeys(
            ("image", "audio", "video", "document"), False
        )
        assert str(report["attachments_reason"]).startswith(
            "images: no, audio: no, video: no — llama-server was started without --mmproj"
        )
        if report["tool_calls"] == "structured":
            assert report["warnings"] == []  # nothing to warn of
        else:
            # The model writes words even when forced: said as the model's choice, since the
            # template takes tools; the only warning.
            assert report["tool_calls"] == "none"
            (warning,) = report["warnings"]  # type: ignore[misc]
            assert "the model's choice" in warning
        assert report["serve_command"] == (
            f"agui-bridge serve --upstream-url {server.url} --model {llama_server.MODEL_ALIAS}"
        )
        assert _serve_as_printed(str(report["serve_command"])) == "RUN_FINISHED"


def test_the_doctor_says_why_functionarys_plain_answers_fail(bed: llama_server.Bed) -> None:
    """With functionary's template, llama.cpp's parser refuses what this small model writes when
    no call is forced (an error chunk after a 200): the plain probe fails, and so would a run."""
    with llama(bed, template=llama_server.TOOLS_TEMPLATE, extra=GREEDY) as server:
        report = _doctor(server.url)
    assert report["usable"] is False and report["serve_command"] is None
    assert str(report["server"]).startswith("llama.cpp")
    failed = report["failed_probe"]
    assert failed["probe"] == "plain"  # type: ignore[index]
    assert failed["code"] == "upstream_error"  # type: ignore[index]
    assert "format" in failed["message"]  # type: ignore[index]
