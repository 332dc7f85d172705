"""The browser tests find a Chromium the way a user's machine has one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from node_tools import find_chromium


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_chromium_from_the_variable_then_path_then_playwright(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PLAYWRIGHT_BROWSERS_PATH", raising=False)
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_chromium() is None

    playwright = _program(
        tmp_path / "home/.cache/ms-playwright/chromium-1200/chrome-linux64/chrome"
    )
    assert find_chromium() == playwright
    mine = _program(tmp_path / "browsers/chromium-1300/chrome-linux/chrome")
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "browsers"))
    assert find_chromium() == mine

    chrome = _program(tmp_path / "bin/google-chrome")
    assert find_chromium() == chrome
    chromium_browser = _program(tmp_path / "bin/chromium-browser")
    assert find_chromium() == chromium_browser
    chromium = _program(tmp_path / "bin/chromium")
    assert find_chromium() == chromium

    monkeypatch.setenv("CHROMIUM", "/opt/somewhere/chrome")
    assert find_chromium() == Path("/opt/somewhere/chrome")
    assert os.environ["CHROMIUM"] == "/opt/somewhere/chrome"
