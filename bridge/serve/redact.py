"""Secrets never leave the bridge: one redaction step for every text it forwards or writes.

Upstreams that refuse a key often quote it back (OpenAI: ``Incorrect API key provided: sk-…``;
some gateways whole, others masked as ``sk-abc*****wxyz``). ``Redactor`` removes the configured
secrets from a text: each whole value, and any piece of one that is ``MIN_PIECE`` characters or
longer, in the forms a server may quote it in (as is, URL-encoded, JSON-escaped). A masked form
keeps only the short pieces the server already showed.

The app applies it where text leaves: SSE frames (``bridge.serve.frames``), HTTP error bodies,
``/capabilities``, and log records (``install_log_redaction``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

#: A piece of a secret this long is a secret: the key's prefix (``sk-proj-``) is 8, and a
#: masked form (``sk-abc*****wxyz``) shows less than that on each side.
MIN_PIECE = 8
#: A whole secret shorter than this is replaced only whole, and not at all below it: replacing
#: every "ab" in every message would make the messages unreadable, and protects nothing.
_MIN_WHOLE = 4
MASK = "[redacted]"

_PERCENT_ESCAPE = re.compile("%[0-9A-F]{2}")


def _forms(secret: str) -> set[str]:
    """The ways a server may quote ``secret`` back: as is, URL-encoded (either hex case, ``+``
    or ``%20`` for spaces), JSON-escaped (ASCII-only or not, ``\\/`` for slashes)."""
    url = quote(secret, safe="")
    forms = {
        secret,
        url,
        quote_plus(secret, safe=""),
        _PERCENT_ESCAPE.sub(lambda match: match.group().lower(), url),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    forms |= {form.replace("/", "\\/") for form in forms}
    return forms


class Redactor:
    """Removes the given secrets from texts. Empty and ``None`` secrets are ignored."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if secret and len(secret) >= _MIN_WHOLE:
                forms |= _forms(secret)
        # Longest first: a form inside a longer one must not leave the longer one's rest.
        self._whole = sorted(forms, key=len, reverse=True)
        self._pieces = frozenset(
            form[i : i + MIN_PIECE] for form in forms for i in range(len(form) - MIN_PIECE + 1)
        )
        self._first_chars = frozenset(piece[0] for piece in self._pieces)

    def __bool__(self) -> bool:
        return bool(self._whole)

    def redact(self, text: str) -> str:
        if not self._whole:
            return text
        for form in self._whole:
            if form in text:
                text = text.replace(form, MASK)
        return self._without_pieces(text)

    def _without_pieces(self, text: str) -> str:
        pieces, first = self._pieces, self._first_chars
        spans: list[list[int]] = []
        for start in range(len(text) - MIN_PIECE + 1):
            if text[start] in first and text[start : start + MIN_PIECE] in pieces:
                end = start + MIN_PIECE
                if spans and start <= spans[-1][1]:
                    spans[-1][1] = end  # overlapping pieces: one longer quote of the secret
                else:
                    spans.append([start, end])
        if not spans:
            return text
        out, done = [], 0
        for start, end in spans:
            out += [text[done:start], MASK]
            done = end
        out.append(text[done:])
        return "".join(out)


class _RedactingFilter(logging.Filter):
    """Rewrites a log record's message (and traceback) without the secrets it may quote."""

    def __init__(self) -> None:
        super().__init__()
        self.redactors: list[Redactor] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.redactors:
            message = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            for redactor in self.redactors:
                message = redactor.redact(message)
                if record.exc_text:
                    record.exc_text = redactor.redact(record.exc_text)
            record.msg, record.args = message, None
        return True


_LOG_FILTER = _RedactingFilter()
#: The loggers that may carry an upstream's words: ours, and uvicorn's error log (tracebacks).
_LOGGERS = ("agui_bridge", "uvicorn.error")


def install_log_redaction(redactor: Redactor) -> None:
    """Redact ``redactor``'s secrets from every record of the bridge's and uvicorn's loggers,
    for the rest of the process (an app's secrets can be in its log until the process ends)."""
    if not redactor or redactor in _LOG_FILTER.redactors:
        return
    _LOG_FILTER.redactors.append(redactor)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _LOG_FILTER not in logger.filters:
            logger.addFilter(_LOG_FILTER)
