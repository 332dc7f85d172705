"""The README's promises table (README "Promises") names, for each promise, the tests that hold
it against a hostile peer. This holds the table to the suite: every row names at least one
test, and every test it names exists, so a renamed or deleted test cannot leave a promise
that nothing checks any more."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_HEADING = "## Promises"
#: A test as the table names it: `tests/…/file.py::test_name`.
_TEST = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _rows() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n{_HEADING}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return [
        line
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith(("| promise", "|---"))
    ]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_the_readme_has_a_promises_table() -> None:
    assert len(_rows()) >= 10


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row.split("|")[1].strip()[:40])
def test_every_promise_names_tests_that_exist(row: str) -> None:
    named = _TEST.findall(row)
    assert named, f"a promise with no test: {row}"
    for file, name in named:
        path = ROOT / file
        assert path.is_file(), f"{file} does not exist"
        assert name in _tests_in(path), f"{file} has no {name}"
