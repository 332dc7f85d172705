"""The thread tests (issue 42, README "Threads"): what the bridge keeps of a thread, checked
against what the official clients hold. This folder and ``tests/`` are put on ``sys.path`` for
their helpers. Module names here must not repeat one elsewhere in ``tests/`` (pytest imports
test modules by their base name): ``test_threads_*.py``.
"""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


from redis_server import RedisServer  # noqa: E402  (found on the path put above)


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real ``redis-server`` for a module's tests."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server
