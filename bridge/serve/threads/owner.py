"""Whose a thread is. A thread id is the client's choice and no secret, so the bridge keeps
each thread under its owner, and another owner's id reads as unknown.

The owner is, in this order: what the app's function says of the request (``create_app(…,
owner=…)``, for a bridge mounted behind the app's own login); the header the app's proxy sets
(``--thread-owner-header``); the caller's bearer token; else nobody in particular, so every
caller is one owner (a laptop's bridge). Kept as a digest: the store never holds a token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from starlette.requests import Request

from bridge.core.errors import InvalidRunInputError

#: A function of the request that names its owner (``None``: the request has none, 401).
OwnerOf = Callable[[Request], str | None]

#: The owner of every thread when callers are not told apart.
EVERYONE = "everyone"

_LONGEST = 4096  # an owner's name longer than this is no name (a header stuffed to the limit)


class Owners:
    """Tells a request's owner, as the bridge is configured to."""

    def __init__(self, *, header: str | None = None, owner: OwnerOf | None = None) -> None:
        self._header = header.lower() if header else None
        self._owner = owner

    def of(self, request: Request) -> str:
        """The owner's digest, or ``InvalidRunInputError`` 401 when the configured identity is
        missing from the request."""
        if self._owner is not None:
            return _digest("app", self._named(self._owner(request), "the app's owner function"))
        if self._header is not None:
            return _digest("header", self._named(request.headers.get(self._header), self._header))
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return bearer_owner(token.strip())
        return _digest("everyone", EVERYONE)

    @staticmethod
    def _named(name: str | None, where: str) -> str:
        if not name or len(name) > _LONGEST:
            raise InvalidRunInputError(
                f"this bridge keeps threads per owner and the request names none ({where})",
                status=401,
                code="unauthorized",
            )
        return name


def bearer_owner(token: str) -> str:
    """The owner a bearer token names (its digest)."""
    return _digest("bearer", token)


def _digest(kind: str, name: str) -> str:
    return hashlib.sha256(f"agui-bridge owner\0{kind}\0{name}".encode()).hexdigest()[:32]
