"""The HTTP face: the ASGI app and what each request kind does, the ``RunAgentInput`` read from
a body, the events written as frames for the client's protocol, the SSE response."""
