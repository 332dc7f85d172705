"""Peers for ``test_hostile_instructions.py``: the scripted upstream behind a tap that keeps
every request body as the bridge sent it, byte for byte (the scripted upstream itself keeps
only the parsed JSON)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bridge.cli.demo import create_scripted_upstream


class TappedUpstream:
    """``create_scripted_upstream()`` whose POST bodies are appended, raw, to ``bodies``, and
    the address and port each came from to ``peers`` (one per connection)."""

    def __init__(self) -> None:
        self.inner: ASGIApp = create_scripted_upstream()
        self.bodies: list[bytes] = []
        self.peers: list[tuple[str, int]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        chunks: list[bytes] = []
        self.peers.append(tuple(scope["client"]))

        async def tapped() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.bodies.append(b"".join(chunks))
            return message

        await self.inner(scope, tapped, send)
