"""What the bridge tells about its runs: each run's observation (``observation``), gathering
the facts (``facts``) that its sinks read: Prometheus metrics (``metrics``), OpenTelemetry traces
(``otel``) and the one log line per run (``log``).

``JsonFormatter`` is named here, where the README and logging configurations name it
(``bridge.serve.observe.JsonFormatter``)."""

from bridge.serve.observe.log import JsonFormatter

__all__ = ["JsonFormatter"]
