"""The serving layer: HTTP in (``app``: the ASGI app; ``run``: one run's lifecycle; ``request``
and ``history``: the upstream request from a ``RunAgentInput``), HTTP out (``upstream`` with
``sse``: the upstream client; ``stream``: the SSE response; ``frames``: where events become
frames, shaped for the client's protocol and redacted by ``redact``)."""
