"""The thread tests (issue 42, README "Threads"): what the bridge keeps of a thread, checked
against what the official clients hold. This folder and ``tests/`` are put on ``sys.path`` for
their helpers. Module names here must not repeat one elsewhere in ``tests/`` (pytest imports
test modules by their base name): ``test_threads_*.py``.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
