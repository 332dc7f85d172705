"""The serving layer, in rooms of one purpose each, every room using only those below it:

- ``http``: the HTTP face: the ASGI app, a module per request kind (a run, a widget's proxied
  request, health, capabilities, metrics) on the state they share, the ``RunAgentInput`` read
  from a body, events as frames for the client's protocol, the SSE response;
- ``threads``: the threads kept (``--threads``): where (memory, a folder, Redis), per owner,
  with the events of the runs going on in them, for a client that reloads;
- ``run``: one run, whatever the client: the loop of model turns and server tools, the body each
  turn sends, what the run adds to the conversation, the approvals it answers;
- ``tools`` and ``upstream``, apart from each other: the server tools the bridge runs itself;
  the model server (client, transport, SSE, recording);
- ``observe``: what the bridge tells about its runs (metrics, traces, the log line);
- ``redact``: secrets out of every frame, body, log line and recording.

README "Code map" says why the cut is where it is; import-linter holds it (pyproject.toml).
"""
