"""Issue 14: the layout's promises. Every documented import works without a warning; every module
path of before the core/serve layout still imports, with a DeprecationWarning, as the moved
module itself. (The layers themselves are held by import-linter in ``make lint``.)

Each check runs in a fresh interpreter: the test process has imported everything already.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bridge._moved import alias

DOCUMENTED = [
    "import bridge",
    "from bridge import BridgeConfig, create_app, mount",
    "from bridge import TranslateOptions, translate_chat_stream, atranslate_chat_stream",
    "from bridge import DONE, ChatStreamTranslator, TurnOutcome, ReasoningTagFilter",
    "from bridge import BridgeError, UpstreamHTTPError, KNOWN_REASONING_TAGS",
    "from bridge.app import create_app, mount",
    "from bridge.config import BridgeConfig",
    "from bridge.scripted import create_scripted_upstream, SCRIPTED_MODELS",
    "from bridge.cli import main",
    "from bridge.core.text_tools import TextToolCalls, TEXT_TOOL_FORMATS, FORMAT_ALIASES",
]

#: The old module paths and where they went.
MOVED = {
    "bridge.parts": "bridge.core.parts",
    "bridge.decode": "bridge.core.decode",
    "bridge.decode_responses": "bridge.core.decode_responses",
    "bridge.reasoning_tags": "bridge.core.reasoning_tags",
    "bridge.markers": "bridge.core.markers",
    "bridge.emitter": "bridge.core.emitter",
    "bridge.encode": "bridge.core.encode",
    "bridge.usage": "bridge.core.usage",
    "bridge.errors": "bridge.core.errors",
    "bridge.translate": "bridge.core.translate",
    "bridge.text_tools": "bridge.core.text_tools.filter",
    "bridge.text_tool_formats": "bridge.core.text_tools.formats",
    "bridge.text_tool_call": "bridge.core.text_tools.call",
    "bridge.json_call": "bridge.core.text_tools.json_call",
    "bridge.text_tool_xml": "bridge.core.text_tools.xml_tags",
    "bridge.text_tool_pythonic": "bridge.core.text_tools.pythonic",
    "bridge.text_tool_sections": "bridge.core.text_tools.sections",
    "bridge.text_tool_harmony": "bridge.core.text_tools.harmony",
    "bridge.run": "bridge.serve.run",
    "bridge.stream": "bridge.serve.stream",
    "bridge.upstream": "bridge.serve.upstream",
    "bridge.sse": "bridge.serve.sse",
    "bridge.request": "bridge.serve.request",
    "bridge.history": "bridge.serve.history",
}


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


def test_every_old_path_still_imports_with_a_deprecation_warning() -> None:
    code = "\n".join(
        [
            "import importlib, warnings",
            "failures = []",
            f"for old, new in {MOVED!r}.items():",
            "    with warnings.catch_warnings(record=True) as caught:",
            "        warnings.simplefilter('always')",
            "        module = importlib.import_module(old)",
            "    if module is not importlib.import_module(new):",
            "        failures.append(f'{old} is not {new}')",
            "    if not any(w.category is DeprecationWarning and new in str(w.message)",
            "               for w in caught):",
            "        failures.append(f'{old}: no DeprecationWarning naming {new}')",
            "print(failures)",
        ]
    )
    done = _python(code)
    assert done.stdout.strip() == "[]", done.stderr


def test_a_moved_path_keeps_private_names_and_patches() -> None:
    # Code that patched bridge.upstream._MODELS_TTL must still reach the real module.
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import bridge.upstream as old, bridge.serve.upstream as new\n"
        "old._MODELS_TTL = 1.5; print(new._MODELS_TTL)"
    )
    assert _python(code).stdout.strip() == "1.5"


def test_alias_warns_in_this_process_too() -> None:
    with pytest.warns(DeprecationWarning, match="bridge.serve.sse"):
        alias("bridge._test_alias", "bridge.serve.sse")
    del sys.modules["bridge._test_alias"]
