"""The tests of the threads kept (issue 42, README "Threads"). ``tests/`` and this folder are
put on ``sys.path``, as ``tests/hostile/conftest.py`` does, for the shared servers and the peers
beside the tests. Module names here must not repeat one elsewhere in ``tests/`` (pytest imports
test modules by their base name): ``test_threads_*.py``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
