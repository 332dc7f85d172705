"""The ASGI app's public face: ``create_app`` and ``mount`` (the code is in ``bridge.serve.app``).

Kept as a module of its own, without a deprecation, because the README and many apps import
``from bridge.app import create_app, mount``; ``from bridge import create_app, mount`` works too.
"""

from bridge.serve.app import Bridge, create_app, mount

__all__ = ["Bridge", "create_app", "mount"]
