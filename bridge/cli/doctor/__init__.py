"""``agui-bridge doctor``: a few small requests to an upstream (``probes``), read by the bridge's
own decoder and filters (``findings``), and what they tell (``report``): where the reasoning
arrives, how tool calls come, whether usage, the Responses API and reasoning sent back work, and
the ``serve`` line with the flags it needs; or, for an upstream that cannot be used, the probe
that failed and why (refused, DNS, TLS, an HTTP 404 and the base URL probably meant).
"""

from bridge.cli.doctor.findings import DEFAULT_KEY_ENV, HARMONY_REASONING
from bridge.cli.doctor.probes import diagnose
from bridge.cli.doctor.report import redacted_output, render_table
from bridge.cli.doctor.view import PROBE_TOOL

__all__ = [
    "DEFAULT_KEY_ENV",
    "HARMONY_REASONING",
    "PROBE_TOOL",
    "diagnose",
    "redacted_output",
    "render_table",
]
