"""The top layer: the ``agui-bridge`` command and what only it uses.

- ``command``: the command itself (``main``: serve, config, demo, doctor, replay,
  scripted-upstream); ``workers``: ``serve --workers N``; ``agents``: what ``serve`` serves
  (one agent, or the file's ``[agents.NAME]``); ``serving``: the socket, the log, the server
  that drains; ``settings``: the settings to a ``BridgeConfig``; ``effective``: ``agui-bridge
  config``'s printout; ``layers``: flag > ``AGUI_BRIDGE_*`` variable > ``--config`` file >
  default; ``tomlfile``: the file and its keys' lines; ``tool_modules``: ``--tools``;
  ``parser``: the flags; ``options``: the flags ``serve`` and ``demo`` share.
- ``demo/``: the demo's scripted upstream (a deterministic OpenAI-compatible model server, in
  every dialect) and its server tool (``get_time``).
- ``doctor/``: ``agui-bridge doctor``, which probes an upstream and tells the flags it needs.
- ``replay``: ``agui-bridge replay``, recorded runs served again.
"""

from bridge.cli.command import main

__all__ = ["main"]
