"""Every text from outside that the bridge logs or traces is one line: ``one_line`` escapes what
could end a line or steer a terminal, visibly.

Ids, model and tool names, a widget's log line, an MCP server's stderr and errors come from
clients, models, upstreams and tool servers. Written raw, a ``\\n`` or a ``\\r`` in one forges a
log line of its own, an ESC sequence recolours or rewrites the operator's terminal, and U+2028
ends a line for log viewers that read JavaScript's line terminators. So the C0 and C1 control
characters, DEL, the Unicode line and paragraph separators, the bidirectional overrides (which
reorder what a reader sees) and lone surrogates (which a UTF-8 log cannot even write) become
escapes (``\\n``, ``\\x1b``, ``\\u2028``). Redaction comes first: a secret is looked for as it
was written (``bridge.serve.redact``'s log filter redacts, then calls ``one_line``).
"""

from __future__ import annotations

import re
import sys

#: What must not reach a log line or a span raw.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str) -> str:
    """``text`` as one line with nothing a terminal or a log reader would act on."""
    return _UNSAFE.sub(_escape, text)


def say_refused(reason: object) -> None:
    """``agui-bridge: <reason>`` on stderr, one line in one write: processes started together
    (``--workers``) that each refuse to start say it at once, and ``print``'s two writes (the
    text, then its newline) on an unbuffered stderr ran their lines into one."""
    sys.stderr.write(f"agui-bridge: {one_line(str(reason))}\n")
    sys.stderr.flush()


def needs_escape(text: str) -> bool:
    """Whether ``one_line`` would change ``text``."""
    return _UNSAFE.search(text) is not None


def json_line(text: str) -> str:
    """JSON text (``json.dumps(…, ensure_ascii=False)``, which escapes only C0) with the rest of
    what ``one_line`` escapes written as ``\\uXXXX`` too: the same JSON value, one safe line.
    Those characters can stand only inside a JSON string, where the escape means the same."""
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
