"""The layout's promises: every documented import works without a warning, the core alone loads
no serving stack, the package root holds only the folders of the layers and the public face, and
the module paths of before (forwarding files kept "for one release") are gone. (The layers
themselves are held by import-linter in ``make lint``.)

Each check runs in a fresh interpreter: the test process has imported everything already.
"""

from __future__ import annotations

import subprocess
import sys
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
    "from bridge.config import BridgeConfig",
    "from bridge.cli import main",
    "from bridge.cli.demo import create_scripted_upstream, SCRIPTED_MODELS",
    "from bridge.core.text_tools import TextToolCalls, TEXT_TOOL_FORMATS, FORMAT_ALIASES",
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
]  # fmt: skip


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
