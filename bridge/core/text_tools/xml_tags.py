"""Calls whose arguments are written as tagged parameters, typed by the tool's JSON schema.

- Qwen3-Coder: ``<tool_call>\\n<function=get_weather>\\n<parameter=city>\\nParis\\n</parameter>\\n
  </function>\\n</tool_call>`` (also without the ``<tool_call>`` wrapper); the newline after a
  parameter's opening tag and the one before its closing tag are layout, not value;
- GLM-4.5: ``<tool_call>get_weather\\n<arg_key>city</arg_key>\\n<arg_value>Paris</arg_value>\\n
  </tool_call>``;
- Llama 3.1's ``<function=name>{…}</function>`` shares the ``<function=`` tag: after the name, a
  ``{`` means JSON arguments.

A value's type comes from the tool's schema: a string is the text as written (streamed live while
the model writes it); a number, boolean, null, object or array is parsed (JSON, else a Python
literal), and stays text when it does not parse. Without a schema, Qwen3-Coder's values are text
(its template writes every value as text) and GLM's are JSON where they parse (its template
writes non-strings as JSON).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bridge.core.markers import marker_set
from bridge.core.parts import Part, Text
from bridge.core.text_tools.call import Call, FormatContext, arguments_reader, plausible_name

_NAME_LIMIT = 200


@dataclass(frozen=True)
class ParamTags:
    key_open: str
    key_close: str
    value_open: str  # "" when the value follows the key's closing tag at once
    value_close: str
    end: str
    layout_newlines: bool  # one newline after the value's opening and before its closing is layout
    untyped_text: bool  # without a schema, a value is text (else: JSON where it parses)


QWEN3_CODER_TAGS = ParamTags("<parameter=", ">", "", "</parameter>", "</function>", True, True)
GLM45_TAGS = ParamTags(
    "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "</tool_call>", False, False
)


def schema_types(schema: Mapping[str, Any] | None) -> frozenset[str]:
    if schema is None:
        return frozenset()
    kinds = schema.get("type")
    if isinstance(kinds, str):
        return frozenset([kinds])
    if isinstance(kinds, list):
        return frozenset(kind for kind in kinds if isinstance(kind, str))
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key) or ():
            if isinstance(sub, Mapping):
                found |= schema_types(sub)
    return frozenset(found)


def is_text(schema: Mapping[str, Any] | None, *, untyped_text: bool) -> bool:
    kinds = schema_types(schema)
    return kinds == {"string"} if kinds else untyped_text


def typed_json(value: str, schema: Mapping[str, Any] | None, *, untyped_text: bool) -> str:
    """A parameter's written value as JSON text, typed by its schema."""
    if is_text(schema, untyped_text=untyped_text):
        return json.dumps(value, ensure_ascii=False)
    stripped = value.strip()
    try:
        return json.dumps(json.loads(stripped), ensure_ascii=False)
    except ValueError:
        pass
    try:  # Python spellings: True, None, single quotes
        return json.dumps(ast.literal_eval(stripped), ensure_ascii=False)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if "boolean" in schema_types(schema) and stripped.lower() in ("true", "false"):
        return stripped.lower()
    return json.dumps(value, ensure_ascii=False)


class TaggedParams:
    """Reads key/value tags up to the end tag, building the arguments object for ``call``."""

    def __init__(
        self,
        tags: ParamTags,
        call: Call,
        schema_of: Callable[[str], Mapping[str, Any] | None],
    ) -> None:
        self._tags = tags
        self._call = call
        self._schema_of = schema_of
        self._buf = ""
        self._state = "between"  # between | key | before_value | value | skip
        self._end = marker_set([tags.end])
        self._count = 0
        self._schema: Mapping[str, Any] | None = None
        self._streaming = False  # a text value, streamed as it comes
        self._value_begun = False
        self._value_close = marker_set([tags.value_close])

    def feed(self, text: str, out: list[Part]) -> str | None:
        """``None`` while the parameters go on; once the end tag is read, or the text broke the
        form (the call is then finished as broken), what followed."""
        buf, self._buf = self._buf + text, ""
        tags = self._tags
        while True:
            if self._state == "skip":  # the call is broken: read on to its end tag
                position, marker = self._end.find(buf)
                if not marker:
                    keep = self._end.partial_length(buf)
                    self._call.read("", out, raw=buf[: len(buf) - keep])
                    self._buf = buf[len(buf) - keep :]
                    return None
                self._call.read("", out, raw=buf[: position + len(marker)])
                self._call.finish(out)
                return buf[position + len(marker) :]
            if self._state in ("between", "before_value"):
                stripped = buf.lstrip()
                space = buf[: len(buf) - len(stripped)]
                expected = (
                    (tags.key_open, tags.end) if self._state == "between" else (tags.value_open,)
                )
                found = next((tag for tag in expected if stripped.startswith(tag)), None)
                if found is None:
                    if not stripped or any(tag.startswith(stripped) for tag in expected):
                        self._buf = buf
                        return None
                    return self._fail(
                        f"unexpected {stripped[:20]!r} among the parameters", buf, out
                    )
                rest = stripped[len(found) :]
                if found == tags.end:
                    self._call.read("}" if self._count else "{}", out, raw=space + found)
                    self._call.finish(out)
                    return rest
                self._call.read("", out, raw=space + found)
                self._state = "key" if found == tags.key_open else "value"
                self._value_begun = False
                buf = rest
            elif self._state == "key":
                position = buf.find(tags.key_close)
                if position == -1:
                    if len(buf) > _NAME_LIMIT:
                        return self._fail("a parameter name that does not end", buf, out)
                    self._buf = buf
                    return None
                key = buf[:position].strip()
                if not key or "<" in key:
                    return self._fail(f"a bad parameter name {key[:20]!r}", buf, out)
                self._schema = self._schema_of(key)
                self._streaming = is_text(self._schema, untyped_text=tags.untyped_text)
                head = ("{" if not self._count else ", ") + json.dumps(key) + ": "
                end = position + len(tags.key_close)
                self._call.read(head, out, raw=buf[:end])
                self._state = "before_value" if tags.value_open else "value"
                buf = buf[end:]
            else:
                if not self._value(buf, out):
                    return None
                buf, self._buf = self._buf, ""
                self._state = "between"
                self._count += 1

    def close(self, out: list[Part]) -> None:
        self._call.read("", out, raw=self._buf)
        self._buf = ""
        self._call.finish(out)

    def _value(self, buf: str, out: list[Part]) -> bool:
        """Read the value in ``buf``: ``True`` once it ended (what followed left in ``_buf``)."""
        tags = self._tags
        position, marker = self._value_close.find(buf)
        if not self._streaming:  # typed: read whole, then converted
            if not marker:
                self._buf = buf
                return False
            value = buf[:position]
            if tags.layout_newlines:
                value = value.removeprefix("\n").removesuffix("\n")
            typed = typed_json(value, self._schema, untyped_text=tags.untyped_text)
            self._call.read(typed, out, raw=buf[: position + len(marker)])
            self._buf = buf[position + len(marker) :]
            return True
        if not self._value_begun:  # text: streamed as it comes, after its layout newline
            if not buf:
                return False
            self._value_begun = True
            layout = "\n" if tags.layout_newlines and buf[0] == "\n" else ""
            self._call.read('"', out, raw=layout)
            buf = buf[len(layout) :]
            position, marker = self._value_close.find(buf)
        if not marker:
            keep = self._value_close.partial_length(buf)
            if tags.layout_newlines and buf[: len(buf) - keep].endswith("\n"):
                keep += 1  # perhaps the layout newline before the closing tag
            sure = buf[: len(buf) - keep]
            if sure:
                self._call.read(json.dumps(sure, ensure_ascii=False)[1:-1], out, raw=sure)
            self._buf = buf[len(sure) :]
            return False
        value = buf[:position]
        if tags.layout_newlines:
            value = value.removesuffix("\n")
        raw = buf[: position + len(marker)]
        self._call.read(json.dumps(value, ensure_ascii=False)[1:-1] + '"', out, raw=raw)
        self._buf = buf[position + len(marker) :]
        return True

    def _fail(self, why: str, buf: str, out: list[Part]) -> str | None:
        self._call.fail(why)
        self._state = "skip"
        return self.feed(buf, out)


class FunctionTagBody:
    """``<function=name>`` followed by JSON arguments and ``</function>`` (Llama 3.1), or by
    Qwen3-Coder's ``<parameter=…>`` tags up to ``</function>``."""

    OPEN = "<function="
    CLOSE = "</function>"

    def __init__(
        self, ctx: FormatContext, *, prefix: str = OPEN, json_ok: bool = True, xml_ok: bool = True
    ) -> None:
        self._ctx = ctx
        self._prefix = prefix  # the model's text before the name, shown if this is no call
        self._json_ok = json_ok
        self._xml_ok = xml_ok
        self._state = "name"  # name | decide | json | tail | xml
        self._buf = ""
        self._name = ""
        self._call: Call | None = None
        self._params: TaggedParams | None = None
        self.was_call = False

    def feed(self, text: str, out: list[Part]) -> str | None:
        if self._state == "name":
            self._buf += text
            position = self._buf.find(">")
            name = self._buf[:position] if position != -1 else self._buf
            bad = next((i for i, char in enumerate(name) if not plausible_name(char)), -1)
            if bad != -1 or len(name) > _NAME_LIMIT or position == 0:
                cut = bad if bad != -1 else len(name)
                out.append(Text(self._prefix + self._buf[:cut]))
                return self._buf[cut:]
            if position == -1:
                return None
            self._name = name
            self._prefix += name + ">"
            text, self._buf, self._state = self._buf[position + 1 :], "", "decide"
        if self._state == "decide":
            self._buf += text
            stripped = self._buf.lstrip()
            if not stripped:
                return None
            space = self._buf[: len(self._buf) - len(stripped)]
            xml_heads = (QWEN3_CODER_TAGS.key_open, self.CLOSE)
            if (
                self._xml_ok
                and stripped[0] == "<"
                and any(head.startswith(stripped) and head != stripped for head in xml_heads)
            ):
                return None  # perhaps `<parameter=` or `</function>`, still arriving
            if self._json_ok and stripped[0] == "{":
                self._state = "json"
            elif self._xml_ok and stripped.startswith(xml_heads):
                self._state = "xml"
            else:
                out.append(Text(self._prefix + space))
                return stripped
            allowed = self._ctx.allowed(marker_of_its_own=True)
            call = Call(self._ctx.next_index(), None, arguments_reader(self._name), "", allowed)
            call.raw = self._prefix + space
            call.read("", out)
            self._call, self.was_call, self._buf = call, True, ""
            if self._state == "xml":
                tool = self._name
                self._params = TaggedParams(
                    QWEN3_CODER_TAGS,
                    call,
                    lambda key: self._ctx.parameter_schema(tool, key),
                )
            text = stripped
        if self._state == "xml":
            assert self._params is not None
            return self._params.feed(text, out)
        if self._state == "json":
            assert self._call is not None
            rest = self._call.consume(text, out)
            if rest is None:
                return None
            text, self._state = rest, "tail"
        self._buf += text
        if self.CLOSE.startswith(self._buf) and len(self._buf) < len(self.CLOSE):
            return None  # perhaps the closing tag, still arriving
        return self._buf[len(self.CLOSE) :] if self._buf.startswith(self.CLOSE) else self._buf

    def close(self, out: list[Part]) -> None:
        if self._state in ("name", "decide"):
            out.append(Text(self._prefix + self._buf))
        elif self._state == "xml":
            assert self._params is not None
            self._params.close(out)
        elif self._state == "json":
            assert self._call is not None
            self._call.finish(out)
        elif self._buf:
            out.append(Text(self._buf))


class GlmBody:
    """After ``<tool_call>``: the name, then ``<arg_key>``/``<arg_value>`` pairs, then
    ``</tool_call>``."""

    def __init__(self, ctx: FormatContext, prefix: str) -> None:
        self._ctx = ctx
        self._prefix = prefix
        self._buf = ""
        self._params: TaggedParams | None = None

    def feed(self, text: str, out: list[Part]) -> str | None:
        if self._params is not None:
            return self._params.feed(text, out)
        self._buf += text
        end = next((i for i, char in enumerate(self._buf) if char in "\n<"), -1)
        name = (self._buf if end == -1 else self._buf[:end]).strip()
        if not plausible_name(name) or len(name) > _NAME_LIMIT or (end != -1 and not name):
            out.append(Text(self._prefix + self._buf))
            return ""
        if end == -1:
            return None
        allowed = self._ctx.allowed(marker_of_its_own=True)
        call = Call(self._ctx.next_index(), None, arguments_reader(name), "", allowed)
        call.raw = self._prefix + self._buf[:end]
        call.read("", out)
        if call.reader.error is not None:
            call.finish(out)
            return self._buf[end:]
        self._params = TaggedParams(
            GLM45_TAGS, call, lambda key: self._ctx.parameter_schema(name, key)
        )
        text, self._buf = self._buf[end:], ""
        return self._params.feed(text, out)

    def close(self, out: list[Part]) -> None:
        if self._params is not None:
            self._params.close(out)
        elif self._buf or self._prefix:
            out.append(Text(self._prefix + self._buf))
