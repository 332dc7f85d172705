import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Test files that drive Chromium: under ``pytest -n`` they take turns on one worker (two
#: browsers and their pages' builds at once, on a small machine, time each other out).
CHROMIUM = frozenset(
    {
        "tests/test_browser.py",
        "tests/test_copilotkit.py",
        "tests/test_copilotkit_ask.py",
        "tests/test_copilotkit_state.py",
        "tests/hostile/test_hostile_copilotkit_threads.py",
    }
)


def group_of(path: str) -> str:
    """The work unit a test file's tests are in under ``make test``'s ``pytest -n N --dist
    loadfile``: the file (its module fixtures, servers and builds made once), but one for every
    Chromium file, run in turn, and one for the live files (``tests/live/``: each starts its
    ``llama-server``, which takes both cores)."""
    if path in CHROMIUM:
        return "chromium"
    if path.startswith("tests/live/"):
        return "live"
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` by ``group_of`` (pytest-xdist's ``loadgroup`` marks no longer reach
    its scheduler under pytest 9.2, which names a test by ``_id``, not ``_nodeid``)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid.split("::", 1)[0])

    return Groups(config, log)
