import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Test files that drive Chromium: under ``pytest -n`` they take turns on one worker (two
#: browsers and their pages' builds at once, on a small machine, time each other out).
CHROMIUM = frozenset(
    {
        "test_browser.py",
        "test_copilotkit.py",
        "test_copilotkit_ask.py",
        "test_copilotkit_state.py",
        "hostile/test_hostile_copilotkit_threads.py",
    }
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (``make test``): a file's tests run on one worker
    (its module fixtures, servers and builds made once), the Chromium files on one worker in
    turn, and the live files (``tests/live/``: one ``llama-server`` per worker) on one worker."""
    for item in items:
        name = Path(str(item.fspath)).resolve().relative_to(HERE).as_posix()
        if name in CHROMIUM:
            group = "chromium"
        elif name.startswith("live/"):
            group = "live"
        else:
            group = name
        item.add_marker(pytest.mark.xdist_group(group))
