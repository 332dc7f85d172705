"""One tool call's JSON object, read as it streams: ``{"name": …, "arguments": {…}}``.

The name is reported once its string is complete; the arguments value is handed on piece by
piece, exactly as the model wrote it, while it stays well-formed. Only the outer object's keys
are looked at, so any key order works. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

_SCALAR = frozenset("0123456789-+.eEtrufalsn")


class JsonCallReader:
    """Feeds on the text of one call object; tells the name and the new argument text."""

    def __init__(
        self,
        *,
        name_keys: Iterable[str] = ("name",),
        args_keys: Iterable[str] = ("arguments",),
        stop_after_args: bool = False,
    ) -> None:
        """``stop_after_args``: the object is done as soon as its arguments value is (for formats
        that write only ``name[ARGS]{…}``: the caller feeds a made-up ``{"name": …, "arguments":``
        head, and whatever follows the arguments is left in ``rest``)."""
        self._stop_after_args = stop_after_args
        self._name_keys = frozenset(name_keys)
        self._args_keys = frozenset(args_keys)
        self.text = ""
        self.name: str | None = None
        self.complete = False
        self.error: str | None = None
        self._pos = 0
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._expect = "object"  # object | key | colon | value | next
        self._key_start = -1
        self._key = ""
        self._value_start = -1
        self._args_start = -1
        self._args_end = -1
        self._args_sent = 0
        self._args_is_string = False

    def feed(self, text: str) -> str:
        """Read more of the object; the argument text that became sure, to stream now."""
        self.text += text
        if self.error is None and not self.complete:
            self._scan()
        if self._args_start < 0 or self._args_is_string:
            return ""
        end = self._args_end if self._args_end >= 0 else self._pos
        piece = self.text[max(self._args_sent, self._args_start) : end]
        self._args_sent = max(self._args_sent, end)
        return piece

    @property
    def rest(self) -> str:
        """What followed the object once complete, or the text from where it stopped making
        sense: the caller's to read."""
        return self.text[self._pos :] if self.complete or self.error is not None else ""

    @property
    def arguments_were_text(self) -> bool:
        """The arguments came as a JSON string (held, not streamed: they are decoded whole)."""
        return self._args_start >= 0 and self._args_is_string

    def arguments(self) -> str:
        """The whole arguments text once the object is complete (a JSON string value decoded)."""
        if self._args_start < 0:
            return ""
        raw = self.text[self._args_start : self._args_end]
        if self._args_is_string:
            decoded = json.loads(raw)
            return decoded if isinstance(decoded, str) else json.dumps(decoded)
        return raw

    def _fail(self, why: str) -> None:
        self.error = why

    def _scan(self) -> None:
        text = self.text
        i = self._pos
        while i < len(text):
            char = text[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
                    if self._depth == 1:
                        self._end_string(i)
            elif char in " \t\r\n":
                pass
            elif self._depth == 0:
                if char != "{" or self._expect != "object":
                    self._fail(f"expected a JSON object, found {text[i : i + 20]!r}")
                    break
                self._depth, self._expect = 1, "key"
            elif char == '"':
                self._in_string = True
                if self._depth == 1:
                    if self._expect == "key":
                        self._key_start = i
                    elif self._expect == "value":
                        self._begin_value(i, string=True)
                    else:
                        self._fail("a string where JSON does not allow one")
                        break
            elif char in "{[":
                if self._depth == 1:
                    if self._expect != "value":
                        self._fail(f"unexpected {char!r}")
                        break
                    self._begin_value(i, string=False)
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 1:
                    self._end_value(i + 1)
                elif self._depth == 0:
                    if self._expect == "value" or char != "}":
                        self._fail("the object closed early")
                        break
                    self._end_value(i)
                    self._pos = i + 1
                    self.complete = True
                    self._check_whole()
                    return
            elif self._depth == 1:
                if char == ":" and self._expect == "colon":
                    self._expect = "value"
                elif char == "," and self._expect in ("next", "scalar"):
                    self._end_value(i)
                    self._expect = "key"
                elif char in _SCALAR and self._expect in ("value", "scalar"):
                    if self._expect == "value":
                        self._begin_value(i, string=False)
                        self._expect = "scalar"
                else:
                    self._fail(f"unexpected {char!r} in the call object")
                    break
            i += 1
            if self.complete:  # stop_after_args: the arguments value just ended
                self._pos = self._args_end
                self._check_arguments()
                return
        self._pos = i

    def _end_string(self, i: int) -> None:
        if self._expect == "key":
            self._key = json.loads(self.text[self._key_start : i + 1])
            self._expect = "colon"
        elif self._expect == "value":
            if self._key in self._name_keys and self.name is None:
                self.name = json.loads(self.text[self._value_start : i + 1])
            self._end_value(i + 1)

    def _begin_value(self, i: int, *, string: bool) -> None:
        self._value_start = i
        if self._key in self._args_keys and self._args_start < 0:
            self._args_start = i
            self._args_is_string = string

    def _end_value(self, end: int) -> None:
        if self._expect in ("value", "scalar") or self._value_start >= 0:
            if (
                self._args_start == self._value_start
                and self._args_end < 0
                and self._args_start >= 0
            ):
                self._args_end = end
                if self._stop_after_args:
                    self.complete = True
            self._value_start = -1
            self._expect = "next"

    def _check_arguments(self) -> None:
        try:
            json.loads(self.text[self._args_start : self._args_end])
        except ValueError as exc:
            self._fail(f"the arguments are not valid JSON: {exc}")

    def _check_whole(self) -> None:
        try:
            json.loads(self.text[: self._pos])
        except ValueError as exc:
            self._fail(f"not valid JSON: {exc}")
            return
        if self.name is None:
            self._fail("the call names no function")
