"""The hostile tests: each README promise (README "Promises") held against a model, a client, an
upstream or a store written to break it, over real sockets.

Each test names the promise it holds and the review finding it came from. The peers they play
against live beside them (``peers_*.py``); this folder is put on ``sys.path`` for them, as
``tests/conftest.py`` puts ``tests/``. Module names here must not repeat one in ``tests/``
(pytest imports test modules by their base name): ``test_hostile_*.py``, ``peers_*.py``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
