"""The top layer: the ``agui-bridge`` command and what only it uses.

- ``command``: the command itself (``main``: serve, demo, doctor, replay, scripted-upstream);
  ``workers``: ``serve --workers N``; ``serving``: the socket, the log, the server that drains;
  ``settings``: flags (or ``AGUI_BRIDGE_*`` variables) to a ``BridgeConfig``; ``parser``: the
  flags; ``options``: the flags ``serve`` and ``demo`` share.
- ``demo/``: the demo's scripted upstream (a deterministic OpenAI-compatible model server, in
  every dialect) and its server tool (``get_time``).
- ``doctor/``: ``agui-bridge doctor``, which probes an upstream and tells the flags it needs.
- ``replay``: ``agui-bridge replay``, recorded runs served again.
"""

from bridge.cli.command import main

__all__ = ["main"]
