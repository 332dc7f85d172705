"""The wheel carries the demo page (``bridge/web/``, built from ``web-demo/`` with Node).

Building a wheel from a checkout builds the page first when it is missing or older than its
sources; from an sdist (which carries the built page) nothing is built, so installing needs no
Node. An editable install (``pip install -e .``) serves the page from the checkout and builds
nothing here: ``make demo`` does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: What the page is built from, in a checkout.
SOURCES = ("src", "index.html", "styles.css", "build.mjs", "package-lock.json")


class DemoPageHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        page = root / "bridge" / "web" / "index.html"
        web_demo = root / "web-demo"
        if (root / "PKG-INFO").is_file():  # an sdist: the page came built
            if not page.is_file():
                raise RuntimeError(f"{page} is missing: this sdist was made without the page")
            return
        if page.is_file() and _newest(web_demo) <= page.stat().st_mtime:
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                "building the wheel builds the demo page into bridge/web/, which needs Node.js 20+ "
                "with npm on PATH (or run `make demo` first, on a machine that has them)"
            )
        if not (web_demo / "node_modules" / ".package-lock.json").is_file():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=web_demo, check=True)
        subprocess.run([npm, "run", "build"], cwd=web_demo, check=True)


def _newest(web_demo: Path) -> float:
    paths = [web_demo / name for name in SOURCES]
    files = [file for path in paths for file in ([path] if path.is_file() else path.rglob("*"))]
    return max(file.stat().st_mtime for file in files if file.is_file())
