"""Secrets never leave the bridge: one redaction step for every text it forwards or writes.

Upstreams that refuse a key often quote it back (OpenAI: ``Incorrect API key provided: sk-…``;
some gateways whole, others masked as ``sk-abc*****wxyz``). ``Redactor`` removes the configured
secrets from a text: each whole value, and any piece of one that is ``MIN_PIECE`` characters or
longer, in the forms a server may quote it in (as is, URL-encoded, JSON-escaped). A masked form
keeps only the short pieces the server already showed.

The app applies it where text leaves: SSE frames (``bridge.serve.http.frames``), HTTP error bodies,
``/capabilities``, log records (``install_log_redaction``, which makes each one line too) and
recordings, whose upstream bodies are bytes (``ByteStreamRedactor``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar
from urllib.parse import quote, quote_plus, urlsplit

from bridge.core.oneline import one_line
from bridge.core.upstream_url import shown_url

#: A piece of a secret this long is a secret: the key's prefix (``sk-proj-``) is 8, and a
#: masked form (``sk-abc*****wxyz``) shows less than that on each side.
MIN_PIECE = 8
#: A whole secret shorter than this is replaced only whole, and not at all below it: replacing
#: every "ab" in every message would make the messages unreadable, and protects nothing.
_MIN_WHOLE = 4
MASK = "[redacted]"
#: The characters a big text is scanned in at once (``Redactor.redact_sliced``).
SLICE = 256 * 1024

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


#: Every piece of a secret contains one of its 4-character grams at an offset divisible by this:
#: the scan looks for those grams only (a compiled alternation, C speed) and checks the pieces
#: around each hit, so its cost is one pass over the text whatever the secrets' length.
_GRAM = 4


class Redactor:
    """Removes the given secrets from texts. Empty and ``None`` secrets are ignored."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if secret and len(secret) >= _MIN_WHOLE:
                forms |= _forms(secret)
        long = [form for form in forms if len(form) >= MIN_PIECE]
        self._pieces = frozenset(
            form[i : i + MIN_PIECE] for form in long for i in range(len(form) - MIN_PIECE + 1)
        )
        #: Secrets too short to have pieces are replaced only whole.
        self._short = frozenset(form for form in forms if len(form) < MIN_PIECE)
        grams = {
            form[i : i + _GRAM]
            for form in long
            for i in range(0, len(form) - MIN_PIECE + _GRAM, _GRAM)
        }
        # Longest first: a short secret inside a gram's text must not hide the gram.
        needles = sorted(grams | self._short, key=lambda needle: (-len(needle), needle))
        self._scan = re.compile("|".join(map(re.escape, needles))) if needles else None
        #: What a text may end with and still become a secret with the next text: the proper
        #: prefixes of every piece and short secret.
        self._prefixes = frozenset(
            whole[:size] for whole in self._pieces | self._short for size in range(1, len(whole))
        )
        self._longest_prefix = max(map(len, self._prefixes), default=0)
        self._longest = max(map(len, forms), default=0)
        #: Every form is ASCII (API keys are): no secret can begin inside a multi-byte character.
        self._ascii = all(form.isascii() for form in forms)

    def __bool__(self) -> bool:
        return self._scan is not None

    def redact(self, text: str) -> str:
        """``text`` with every secret, and every piece of one, replaced by ``MASK``."""
        if self._scan is None:
            return text
        return _masked(text, self._spans(text))

    def split_held(self, text: str) -> tuple[str, str]:
        """``text`` as what may go out now, redacted, and what must wait for the text that
        follows: an end that may begin a secret, or a secret that may go on."""
        if self._scan is None:
            return text, ""
        held = self.held_suffix(text)
        if self._scan.search(text) is None:  # the common case, a token of words: one scan
            return (text[:-held], text[-held:]) if held else (text, "")
        spans = self._spans(text)
        ready = len(text) - held
        if spans and spans[-1][1] > ready:  # only the last span can reach past where we stop
            # The secret may go on in the next text: its span waits, but no more of it than the
            # longest secret (a longer span is copies touching), so what is held stays bounded.
            start = spans[-1][0]
            ready = max(start, len(text) - self._longest)
            if ready > start:
                spans[-1][1] = ready
            else:
                spans = spans[:-1]
        return _masked(text[:ready], spans), text[ready:]

    def held_suffix(self, text: str) -> int:
        """How many characters at the end of ``text`` may be the start of a secret that the
        next text completes (0 when none): a stream holds them back until it knows."""
        prefixes = self._prefixes
        tail = text[-self._longest_prefix :] if self._longest_prefix else ""
        for start in range(len(tail)):
            if tail[start:] in prefixes:
                return len(tail) - start
        return 0

    def stream(self) -> StreamRedactor[str]:
        """A redactor for one text that arrives in pieces (a message's deltas)."""
        return StreamRedactor(self.split_held, self.redact, "")

    def redact_sliced(self, text: str) -> str:
        """``redact`` a slice of ``SLICE`` characters at a time: one scan of a text of
        megabytes holds the GIL, and with it the event loop, for as long as it takes (a
        16 MB thread: 170 ms); in a worker thread, the loop gets its turn between slices."""
        if self._scan is None or len(text) <= SLICE:
            return self.redact(text)
        stream = self.stream()
        pieces = [stream.feed(text[at : at + SLICE]) for at in range(0, len(text), SLICE)]
        return "".join([*pieces, stream.close()])

    def redact_sliced_bytes(self, data: bytes) -> bytes:
        """``redact_sliced`` for bytes (UTF-8 or not): a slice decoded and scanned at a time."""
        if self._scan is None:
            return data
        stream = self.stream_bytes()
        pieces = [stream.feed(data[at : at + SLICE]) for at in range(0, len(data), SLICE)]
        return b"".join([*pieces, stream.close()])

    def redact_bytes(self, data: bytes) -> bytes:
        """``data`` (UTF-8 or not) with every secret, and every piece of one, replaced by
        ``MASK``; every other byte as it was."""
        if self._scan is None:
            return data
        return _encoded(self.redact(_decoded(data)))

    def split_held_bytes(self, data: bytes) -> tuple[bytes, bytes]:
        """``split_held`` for bytes: what may go out now, redacted, and what must wait (an end
        that may begin a secret; with a secret beyond ASCII, also a character cut short)."""
        if self._scan is None:
            return data, b""
        cut = len(data) if self._ascii else len(data) - _unfinished_utf8(data)
        ready, held = self.split_held(_decoded(data[:cut]))
        return _encoded(ready), _encoded(held) + data[cut:]

    def stream_bytes(self) -> StreamRedactor[bytes]:
        """A redactor for bytes that arrive in pieces (an upstream's body, read by read)."""
        return StreamRedactor(self.split_held_bytes, self.redact_bytes, b"")

    def _spans(self, text: str) -> list[list[int]]:
        """Where the secrets are in ``text``: sorted, merged ``[start, end)`` spans."""
        assert self._scan is not None
        pieces, short, size = self._pieces, self._short, MIN_PIECE
        found: list[list[int]] = []
        covered = 0  # a piece that starts before this lies in a span already found
        for hit in self._scan.finditer(text):
            at = hit.start()
            if hit.group() in short:
                found.append([at, hit.end()])
                continue
            # The gram sits 0-3 characters into a piece; a gram the scan stepped over (it
            # finds no overlapping hits) sits up to 3 characters after this one.
            for start in range(max(at - _GRAM + 1, covered), at + _GRAM):
                if text[start : start + size] in pieces:
                    end = start + size
                    while end < len(text) and text[end - size + 1 : end + 1] in pieces:
                        end += 1
                    found.append([start, end])
                    # Its pieces chain to ``end``: a secret that repeats itself ("abab…")
                    # makes one long span, walked once, not once per hit in it.
                    covered = end - size + 1
                    break
        if not found:
            return found
        found.sort()
        spans = [found[0]]
        for start, end in found[1:]:
            if start <= spans[-1][1]:  # overlapping or touching: one longer quote of a secret
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        return spans


def _masked(text: str, spans: list[list[int]]) -> str:
    if not spans:
        return text
    out, done = [], 0
    for start, end in spans:
        out += [text[done:start], MASK]
        done = end
    out.append(text[done:])
    return "".join(out)


_Piece = TypeVar("_Piece", str, bytes)


class StreamRedactor(Generic[_Piece]):
    """One text that arrives in pieces (a message's deltas, a call's arguments; or bytes, an
    upstream's body as recorded, read by read, UTF-8 or not), redacted across the pieces'
    boundaries: a piece's end that may begin a secret is held back while it still may, and goes
    out, redacted, with the next piece or ``close()``."""

    def __init__(
        self,
        split: Callable[[_Piece], tuple[_Piece, _Piece]],
        finish: Callable[[_Piece], _Piece],
        empty: _Piece,
    ) -> None:
        self._split: Callable[[_Piece], tuple[_Piece, _Piece]] = split
        self._finish: Callable[[_Piece], _Piece] = finish
        self._empty: _Piece = empty
        self._held: _Piece = empty

    def feed(self, piece: _Piece) -> _Piece:
        ready, self._held = self._split(self._held + piece)
        return ready

    def close(self) -> _Piece:
        held, self._held = self._held, self._empty
        return self._finish(held)


#: A stream of bytes (``Redactor.stream_bytes``): the same object over bytes.
ByteStreamRedactor = StreamRedactor[bytes]


# Bytes are redacted as UTF-8 text in which each byte that is not UTF-8 stands as a lone
# surrogate (``surrogateescape``): a secret's UTF-8 bytes are found wherever they stand whole,
# whatever surrounds them (binary, a character cut by a read), and every byte comes back as it was.
def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _unfinished_utf8(data: bytes) -> int:
    """How many bytes at the end of ``data`` begin a UTF-8 character they do not finish."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the character's first
            size = 2 if 0xC0 <= byte < 0xE0 else 3 if 0xE0 <= byte < 0xF0 else 4
            return back if 0xC0 <= byte < 0xF8 and back < size else 0
    return 0


class _LogFilter(logging.Filter):
    """Rewrites a log record's message as one line without the secrets it may quote: redacted
    first (a secret is found as it was written), then escaped (``one_line``). A traceback keeps
    its lines, each escaped and indented, so that no line of it passes for a record of its own
    (an exception's message is often an upstream's or a tool's words)."""

    def __init__(self) -> None:
        super().__init__()
        self.redactors: list[Redactor] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        for redactor in self.redactors:
            message = redactor.redact(message)
            if record.exc_text:
                record.exc_text = redactor.redact(record.exc_text)
        record.msg, record.args = one_line(message), None
        # uvicorn's coloured form of a message would be formatted apart, from the raw arguments.
        record.__dict__.pop("color_message", None)
        if record.exc_text:
            record.exc_text = "\n".join(
                _TRACEBACK_INDENT + one_line(line) for line in record.exc_text.split("\n")
            )
        return True


#: Before each line of a traceback in the log: a record's own line starts with its level.
_TRACEBACK_INDENT = "  "
_LOG_FILTER = _LogFilter()
#: The loggers that may carry an upstream's or a tool server's words: ours, uvicorn's error log
#: (tracebacks), the MCP SDK's (``mcp.*``; its client session logs as ``client``) and asyncio's
#: (a task's exception nobody awaited). A logger's filter sees only the records made on that
#: very logger, so each is named.
_LOGGERS = ("agui_bridge", "uvicorn.error", "client", "asyncio")
_LOGGER_FAMILIES = ("agui_bridge", "mcp")


def install_log_redaction(redactor: Redactor) -> None:
    """Make every record of the bridge's, uvicorn's and the MCP SDK's loggers one escaped line
    (``one_line``) without ``redactor``'s secrets, for the rest of the process (an app's secrets
    can be in its log until the process ends). Loggers made later (the MCP SDK's, imported when
    its servers start) are covered by calling ``redact_new_loggers()`` once they exist."""
    if redactor and redactor not in _LOG_FILTER.redactors:
        _LOG_FILTER.redactors.append(redactor)
    redact_new_loggers()


def redact_new_loggers() -> None:
    """Put the redacting filter on every logger of the families that exists by now."""
    names = set(_LOGGERS)
    for name in list(logging.Logger.manager.loggerDict):
        if name.split(".", 1)[0] in _LOGGER_FAMILIES:
            names.add(name)
    for name in names:
        logger = logging.getLogger(name)
        if _LOG_FILTER not in logger.filters:
            logger.addFilter(_LOG_FILTER)


#: Command-line flags whose value is a credential (``--token X``, ``--api-key=X``).
_SECRET_FLAG = re.compile(
    r"^(--?[\w-]*(?:token|key|secret|password|passwd|auth|credential)[\w-]*)(=.*)?$",
    re.IGNORECASE,
)


def shown_target(target: str) -> str:
    """An MCP server's URL or command line as logs and records show it: URLs without their
    user name, password and query values; a credential flag's value masked
    (``--token X`` → ``--token [redacted]``)."""
    words = target.split(" ")
    shown: list[str] = []
    mask_next = False
    for word in words:
        if mask_next and word:
            shown.append(MASK)
            mask_next = False
            continue
        flag = _SECRET_FLAG.match(word)
        if flag:
            shown.append(f"{flag.group(1)}={MASK}" if flag.group(2) else word)
            mask_next = flag.group(2) is None
            continue
        shown.append(_shown_url_in(word))
    return " ".join(shown)


def _shown_url_in(word: str) -> str:
    scheme, sep, _ = word.partition("://")
    if not sep or not scheme.isalpha():
        return word
    query = "&".join(
        f"{name}={MASK}" if value else name
        for name, _, value in (
            pair.partition("=") for pair in urlsplit(word).query.split("&") if pair
        )
    )
    return shown_url(word) + (f"?{query}" if query else "")
