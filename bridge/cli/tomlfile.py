"""A TOML file read with the standard library (``serve --config FILE``), and the line each key
is on: ``tomllib`` gives the values but no line numbers, and an error that names a key should
name where it is written."""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The largest configuration file read: checked before it is read.
MAX_CONFIG_BYTES = 1024 * 1024

#: One part of a key: bare, a basic string or a literal string (TOML 1.0, "Keys").
_PART = re.compile(r'\s*([A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\')\s*')
#: A table's header: ``[a.b]`` or an array of tables' ``[[a.b]]``.
_HEADER = re.compile(r"\s*\[\[?(?P<path>[^\[\]]+)\]\]?\s*(?:#.*)?\Z")
#: What may begin a value of several lines: a multi-line string, an array left open.
_MULTI_LINE = re.compile(r'"""|\'\'\'|[\[,]\s*(?:#.*)?\Z')


@dataclass(frozen=True)
class TomlFile:
    """A configuration file: its path, its text and what ``tomllib`` read of it."""

    path: Path
    text: str
    data: dict[str, Any]

    def where(self, *keys: str) -> str:
        """``FILE:LINE`` of the key ``keys`` names (a table's key inside it), for messages."""
        return self.places([keys])[keys]

    def places(self, wanted: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
        """``where`` for each of ``wanted``, in one pass over the text."""
        lines = lines_of(self.text, wanted)
        return {
            keys: f"{self.path}:{lines[keys]}" if keys in lines else str(self.path)
            for keys in wanted
        }


def read_toml(path: str | os.PathLike[str]) -> TomlFile:
    """The file at ``path``, read and parsed; ``ValueError`` names the file and what is wrong
    (``tomllib``'s own message names the line and column)."""
    where = Path(path)
    try:
        text = bounded_text(where, MAX_CONFIG_BYTES)
        data = tomllib.loads(text)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ValueError(f"{where}: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise ValueError(f"{where}: its values are nested too deep to read") from None
    return TomlFile(where, text, data)


def bounded_text(path: Path, limit: int) -> str:
    """A UTF-8 file's text, its size checked before it is read (and its read bounded, should
    it grow meanwhile): ``ValueError`` past ``limit`` bytes, ``OSError`` as reading raises."""
    with path.open("rb") as file:
        if os.fstat(file.fileno()).st_size > limit:
            raise ValueError(f"over {limit} bytes")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"over {limit} bytes")
    return data.decode("utf-8")


def line_of(text: str, keys: tuple[str, ...]) -> int | None:
    """The line (from 1) where the key ``keys`` is defined, or begins to be: a ``key = …`` line
    under the table it belongs to, a dotted key, or a table's header."""
    return lines_of(text, [keys]).get(keys)


def lines_of(text: str, wanted: list[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
    """``line_of`` for each of ``wanted``, in one pass. A line that only looks like a key or a
    header inside a multi-line string or array is not one: once the text has had such a
    value, the text before a candidate must parse on its own (the whole file did, so only
    the inside of a value fails)."""
    lines = text.split("\n")
    found: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    spans_lines = False  # a multi-line string or array has begun somewhere above
    for number, line in enumerate(lines):
        header = _HEADER.match(line)
        path = _key_path(header.group("path")) if header else _key_path(line, assigned=True)
        if path is not None and not (spans_lines and not _outside_values(lines[:number])):
            if header:
                table = path
            else:
                path = table + path
            for keys in wanted:
                if keys not in found and path[: len(keys)] == keys:
                    found[keys] = number + 1
        spans_lines = spans_lines or _MULTI_LINE.search(line) is not None
    return found


def _key_path(text: str, *, assigned: bool = False) -> tuple[str, ...] | None:
    """The dotted key ``text`` begins with (all of it, or up to ``=`` with ``assigned``)."""
    parts: list[str] = []
    at = 0
    while True:
        part = _PART.match(text, at)
        if part is None:
            return None
        parts.append(_unquoted(part.group(1)))
        at = part.end()
        if text.startswith(".", at):
            at += 1
            continue
        rest = text[at:]
        if assigned:
            return tuple(parts) if rest.startswith("=") else None
        return tuple(parts) if not rest.strip() else None


def _unquoted(part: str) -> str:
    if part.startswith('"'):
        # A basic string's escapes are JSON's, but for \e and \xHH, which TOML 1.1 adds.
        try:
            value: str = json.loads(part)
        except ValueError:
            return part
        return value
    return part.strip("'")


def _outside_values(before: list[str]) -> bool:
    try:
        tomllib.loads("\n".join(before))
    except (tomllib.TOMLDecodeError, RecursionError):
        return False
    return True
