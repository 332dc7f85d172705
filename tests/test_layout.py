"""The layout's promises: every documented import works without a warning, the core alone loads
no serving stack, the package root holds only the folders of the layers and the public face,
``bridge/serve/`` only its rooms (no file over 400 lines, each room and module named in the
README's code map, each room in an import contract), and the module paths of before
(forwarding files kept "for one release", the serving layer's flat files) are gone. (The layers
themselves are held by import-linter in ``make lint``.)

Each check runs in a fresh interpreter: the test process has imported everything already.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bridge"

DOCUMENTED = [
    "import bridge",
    "from bridge import BridgeConfig, create_app, mount, __version__",
    "from bridge import TranslateOptions, translate_chat_stream, atranslate_chat_stream",
    "from bridge import DONE, ChatStreamTranslator, TurnOutcome, ReasoningTagFilter",
    "from bridge import BridgeError, UpstreamHTTPError, KNOWN_REASONING_TAGS",
    "from bridge.app import create_app, mount",
    "from bridge.app import Bridge, from_env",
    "from bridge.config import BridgeConfig",
    "from bridge.cli import main",
    "from bridge.cli.demo import create_scripted_upstream, SCRIPTED_MODELS",
    "from bridge.core.text_tools import TextToolCalls, TEXT_TOOL_FORMATS, FORMAT_ALIASES",
    "from bridge import requires_approval",
    "from bridge.serve.observe import JsonFormatter",
]

#: What the package root holds: a folder per layer, the shared config, the public face, and
#: what the build adds (the built demo page, git-ignored; ``py.typed`` for type checkers).
ROOT_ENTRIES = {
    "core", "serve", "cli", "config.py", "app.py", "__init__.py", "__main__.py", "web", "py.typed",
}  # fmt: skip

#: Module paths that were forwarding files or moved into ``bridge/cli/``: none may import.
REMOVED = [
    "bridge._moved", "bridge.parts", "bridge.decode", "bridge.decode_responses",
    "bridge.reasoning_tags", "bridge.markers", "bridge.emitter", "bridge.encode", "bridge.usage",
    "bridge.errors", "bridge.translate", "bridge.text_tools", "bridge.text_tool_formats",
    "bridge.text_tool_call", "bridge.json_call", "bridge.text_tool_xml", "bridge.text_tool_pythonic",
    "bridge.text_tool_sections", "bridge.text_tool_harmony", "bridge.run", "bridge.stream",
    "bridge.upstream", "bridge.sse", "bridge.request", "bridge.history", "bridge.cli_options",
    "bridge.scripted", "bridge.demo_tools", "bridge.doctor", "bridge.replay",
    "bridge.serve.app", "bridge.serve.capabilities", "bridge.serve.frames",
    "bridge.serve.run_input", "bridge.serve.stream", "bridge.serve.transcript",
    "bridge.serve.resume", "bridge.serve.request", "bridge.serve.history", "bridge.serve.props",
    "bridge.serve.transport", "bridge.serve.record", "bridge.serve.sse", "bridge.serve.mcp_tools",
    "bridge.serve.mcp_apps", "bridge.serve.approvals", "bridge.serve.metrics", "bridge.serve.otel",
    "bridge.serve.upstream.upstream", "bridge.serve.tools.tools", "bridge.serve.run.run",
]  # fmt: skip

SERVE = PACKAGE / "serve"
#: The serving layer's rooms, and the one module all of them use.
ROOMS = {"http", "threads", "run", "tools", "upstream", "observe"}
SERVE_ENTRIES = {*ROOMS, "redact.py", "__init__.py"}
README = PACKAGE.parent / "README.md"
PYPROJECT = PACKAGE.parent / "pyproject.toml"
MAX_LINES = 400


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("statement", DOCUMENTED)
def test_documented_imports_work_without_a_warning(statement: str) -> None:
    done = _python(f"import warnings; warnings.simplefilter('error'); {statement}")
    assert done.returncode == 0, done.stderr


def test_the_core_alone_loads_no_serving_stack() -> None:
    code = (
        "import sys; from bridge import translate_chat_stream; "
        "print(sorted({'starlette', 'httpx', 'uvicorn', 'anyio'} & set(sys.modules)))"
    )
    assert _python(code).stdout.strip() == "[]"


def test_the_package_root_holds_the_layers_and_the_public_face_only() -> None:
    entries = {path.name for path in PACKAGE.iterdir() if path.name != "__pycache__"}
    assert entries <= ROOT_ENTRIES, sorted(entries - ROOT_ENTRIES)
    assert {"core", "serve", "cli", "config.py", "app.py", "__init__.py"} <= entries


def test_the_old_paths_are_gone() -> None:
    code = "\n".join(
        [
            "import importlib",
            "found = []",
            f"for old in {REMOVED!r}:",
            "    try:",
            "        importlib.import_module(old)",
            "    except ModuleNotFoundError:",
            "        continue",
            "    found.append(old)",
            "print(found)",
        ]
    )
    done = _python(code)
    assert done.stdout.strip() == "[]", done.stderr


def test_serve_holds_its_rooms_only() -> None:
    entries = {path.name for path in SERVE.iterdir() if path.name != "__pycache__"}
    assert entries == SERVE_ENTRIES, sorted(entries ^ SERVE_ENTRIES)
    for room in ROOMS:
        assert (SERVE / room / "__init__.py").read_text().startswith('"""'), room


def test_no_file_in_serve_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(SERVE)): lines
        for path in SERVE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _code_map() -> dict[str, set[str]]:
    """The README code map's rows for bridge/serve/: folder → the names its row gives."""
    rows: dict[str, set[str]] = {}
    for line in README.read_text().splitlines():
        match = re.match(r"\| `bridge/serve/(\w+)/` \|[^|]*\|(.*)\|$", line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`(\w+)`", match.group(2)))
    return rows


def test_the_readme_code_map_names_every_room_and_module() -> None:
    rows = _code_map()
    assert set(rows) == ROOMS
    for room, named in rows.items():
        modules = {path.stem for path in (SERVE / room).glob("*.py")} - {"__init__"}
        assert modules <= named, (room, sorted(modules - named))
    docstring = (PACKAGE / "__init__.py").read_text()
    assert all(f"``bridge/serve/{room}/``" in docstring for room in ROOMS)


def test_an_import_contract_holds_each_room() -> None:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layered = {
        tuple(contract.get("containers", ())): contract["layers"]
        for contract in contracts
        if contract["type"] == "layers"
    }
    rooms = {name.strip() for layer in layered[("bridge.serve",)] for name in layer.split("|")}
    assert rooms == {*ROOMS, "redact"}
    for room in ROOMS:
        layers = layered[(f"bridge.serve.{room}",)]
        named = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
        modules = {path.stem for path in (SERVE / room).glob("*.py")} - {"__init__"}
        assert named == modules, (room, sorted(named ^ modules))
    assert any(contract["type"] == "acyclic_siblings" for contract in contracts)
