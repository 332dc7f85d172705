"""The wheel as a pip user gets it: built from this checkout, installed into a clean venv with no
Node on PATH, ``agui-bridge demo`` serves the full page (the one ``make demo`` builds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import bridge

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "bridge" / "web"
#: What the page is made of, as the build writes it (the source map stays out of the wheel).
PAGE_FILES = ("index.html", "app.js", "styles.css")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        timeout=600,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    (built,) = out.glob("agui_bridge-*.whl")
    return built


def test_the_wheel_carries_the_page_and_py_typed(wheel: Path) -> None:
    assert wheel.name.startswith(f"agui_bridge-{bridge.__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "bridge/py.typed" in names
    for name in PAGE_FILES:
        assert f"bridge/web/{name}" in names
        assert zipfile.ZipFile(wheel).read(f"bridge/web/{name}") == (PAGE / name).read_bytes()
    assert not [name for name in names if name.endswith(".map")]
    assert not [name for name in names if not name.startswith(("bridge/", "agui_bridge-"))]


def test_the_installed_wheel_serves_the_full_page_with_no_node(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        timeout=600,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    # Only the venv on PATH: no node, no npm; nothing of the checkout importable.
    env = {"PATH": str(env_dir / "bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    where = subprocess.run(
        [str(python), "-c", "import bridge; print(bridge.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert where.stdout.startswith(str(env_dir)), where.stdout

    with _demo(env_dir / "bin" / "agui-bridge", cwd=tmp_path, env=env) as url:
        home = httpx.get(f"{url}/", timeout=10)
        assert home.status_code == 200
        assert home.content == (PAGE / "index.html").read_bytes()
        assert "not built" not in home.text
        scripts = re.findall(r'<script[^>]+src="\.?/?([^"]+)"', home.text)
        assert scripts, home.text
        for script in scripts:
            served = httpx.get(f"{url}/{script}", timeout=10)
            assert served.status_code == 200
            assert served.content == (PAGE / script).read_bytes()
        styles = httpx.get(f"{url}/styles.css", timeout=10)
        assert styles.content == (PAGE / "styles.css").read_bytes()
        assert httpx.get(f"{url}/agent/health", timeout=10).json() == {"status": "ok"}


@contextmanager
def _demo(program: Path, *, cwd: Path, env: dict[str, str]) -> Iterator[str]:
    process = subprocess.Popen(
        [str(program), "demo", "--port", "0", "--log-level", "warning"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        output = ""
        for _ in range(5):  # a warning may come first (the demo's approvals have no secret)
            output += process.stdout.readline()
            found = re.search(r"open (http://127\.0\.0\.1:\d+)/ ", output)
            if found:
                break
        assert found, output
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=15)
