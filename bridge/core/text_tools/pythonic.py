"""Pythonic tool calls (Llama 3.2/4 and others): ``[get_weather(city="Paris"), get_time()]``.

Taken where such a list opens the answer and its first call names an offered tool, or after
Llama 4's ``<|python_start|>`` (up to ``<|python_end|>``). Keyword arguments only; their values
are Python literals (``True``, ``None``, quotes of either kind, tuples) or JSON, turned into
JSON one argument at a time as each is complete.
"""

from __future__ import annotations

import ast
import json

from bridge.core.parts import Part, Text
from bridge.core.text_tools.call import Call, FormatContext, arguments_reader

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
_NAME_LIMIT = 200
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


class PythonicBody:
    def __init__(self, ctx: FormatContext, opening: str) -> None:
        self._ctx = ctx
        self._tagged = opening == PYTHON_START
        self._state = "open" if self._tagged else "name"  # open|name|args|after|end
        self._raw = opening  # the model's text since the last call, shown if it is no call
        self._buf = ""
        self._calls = 0
        self._call: Call | None = None
        self._arg = ""  # the argument being read
        self._args = 0
        self._stack: list[str] = []
        self._quote = ""
        self._escaped = False
        self._failed = ""  # why the call being read is broken (it is still read to its end)

    def feed(self, text: str, out: list[Part]) -> str | None:
        buf, self._buf = self._buf + text, ""
        while True:
            if self._state == "args":
                rest = self._read_args(buf, out)
                if rest is None:
                    return None
                buf = rest
                continue
            stripped = buf.lstrip()
            space = buf[: len(buf) - len(stripped)]
            if not stripped:
                self._buf = buf
                return None
            if self._state in ("open", "after", "end"):
                if self._state == "end":
                    if stripped.startswith(PYTHON_END):
                        return stripped[len(PYTHON_END) :]
                    if PYTHON_END.startswith(stripped):
                        self._buf = buf
                        return None
                    return buf
                head = stripped[0]
                if self._call is not None:  # a broken call: its text runs to the `,` or `]`
                    self._call.read("", out, raw=space + (head if head in ",]" else ""))
                    self._call.finish(out)
                    self._call = None
                    if head not in ",]":
                        return stripped
                    buf = buf[len(space) :]
                    space = ""
                if self._state == "open" and head == "[":
                    self._state = "name"
                elif self._state == "after" and head in ",]":
                    self._state = "name" if head == "," else "end"
                    if head == "]" and not self._tagged:
                        return stripped[1:]
                else:
                    return self._give_back(buf)
                if not self._calls:
                    self._raw += space + head  # after a call, the list's structure is spent
                buf = stripped[1:]
                continue
            # name
            end = next((i for i, c in enumerate(stripped) if not (c.isalnum() or c in "_.")), -1)
            if end == -1:
                if len(stripped) > _NAME_LIMIT:
                    return self._give_back(buf)
                self._buf = buf
                return None
            name = stripped[:end]
            if stripped[end] != "(" or not name or name[0].isdigit() or not self._offered(name):
                return self._give_back(buf)
            self._call = Call(self._ctx.next_index(), None, arguments_reader(name), "")
            self._call.raw, self._raw = self._raw + space + name + "(", ""
            self._call.read("", out)
            self._state, self._arg, self._args = "args", "", 0
            buf = stripped[end + 1 :]

    def close(self, out: list[Part]) -> None:
        if self._call is not None:
            self._call.read("", out, raw=self._arg)
            self._call.finish(out)
        elif self._raw + self._buf:
            out.append(Text(self._raw + self._buf))
        self._raw = self._buf = ""

    def _offered(self, name: str) -> bool:
        allowed = self._ctx.allowed(marker_of_its_own=self._tagged)
        return allowed is None or name in allowed

    def _give_back(self, rest: str) -> str:
        """No (further) call: what was read of the list goes back to be read as text."""
        raw, self._raw = self._raw, ""
        return raw + rest

    def _read_args(self, text: str, out: list[Part]) -> str | None:
        """Read arguments up to the call's ``)``: ``None`` while it goes on, else what followed
        (the call is then finished, as a call or as broken)."""
        call = self._call
        assert call is not None
        start = 0
        for i, char in enumerate(text):
            if self._quote:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == self._quote:
                    self._quote = ""
            elif char in "'\"":
                self._quote = char
            elif char in _CLOSERS:
                self._stack.append(_CLOSERS[char])
            elif char in ")]}" and self._stack:
                if char != self._stack.pop():
                    self._failed = self._failed or f"unbalanced {char!r}"
            elif char in ",)" and not self._stack:
                arg, self._arg = self._arg + text[start:i], ""
                start = i + 1
                piece = ""
                if arg.strip() or char == ",":
                    piece = "" if self._failed else self._argument(arg)
                    self._failed = self._failed or (
                        "" if piece else f"not a keyword argument with a literal value: {arg!r}"
                    )
                    self._args += 1
                call.read(piece, out, raw=arg + char)
                if char == ")":
                    if self._failed:
                        call.fail(self._failed)  # finished with the list's next `,` or `]`
                    else:
                        call.read("}" if self._args else "{}", out, raw="")
                        call.finish(out)
                        self._call = None
                    self._state, self._calls, self._failed = "after", self._calls + 1, ""
                    return text[i + 1 :]
            elif char in "]}":
                self._failed = self._failed or f"unbalanced {char!r}"
        self._arg += text[start:]
        return None

    def _argument(self, arg: str) -> str:
        """One ``key=value`` as JSON members (``""`` when it is not one)."""
        key, equals, value = arg.partition("=")
        key = key.strip()
        if not equals or not key.isidentifier():
            return ""
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            try:
                parsed = json.loads(value)
            except ValueError:
                return ""
        try:
            encoded = json.dumps(parsed, ensure_ascii=False)
        except (TypeError, ValueError):
            return ""
        return ("{" if not self._args else ", ") + json.dumps(key) + ": " + encoded
