"""The recorded llama.cpp exchanges (``tests/fixtures/llamacpp/``) recorded again from the live
bed, as ``make record-llamacpp`` does, into a folder of the test's: every stream the live server
sends for those requests reads through the bridge as the server itself split it, whole and cut
into 7-byte pieces, and the ``none_`` streams (tags left in content) as the ``deepseek_`` ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import llama_server
from bridge import UpstreamStreamError
from helpers import run, split_every, sse_chunks_from_bytes
from record_fixtures import exchanges, record_all, stream_split


@pytest.fixture(scope="module")
def recorded(bed: llama_server.Bed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llamacpp")
    record_all(bed, folder)
    return folder


def _expected(folder: Path, name: str) -> dict[str, Any]:
    if not name.startswith("none_"):
        return stream_split((folder / f"{name}.sse").read_bytes())
    # The bridge splits tags the way llama.cpp's deepseek parser does, up to the whitespace at
    # the reasoning's edges.
    expected = _expected(folder, name.replace("none_", "deepseek_", 1))
    expected["reasoning"] = expected["reasoning"].strip()
    return expected


def test_every_recorded_stream_reads_as_the_server_split_it(recorded: Path) -> None:
    streams = [name for name in exchanges(recorded) if (recorded / f"{name}.sse").is_file()]
    assert len(streams) >= 8
    for name in streams:
        body = (recorded / f"{name}.sse").read_bytes()
        expected = _expected(recorded, name)
        for pieces in ([body], split_every(body, 7)):
            result = run(sse_chunks_from_bytes(pieces))
            assert result.raised is None, name
            if name.startswith("none_"):
                assert result.reasoning.strip() == expected["reasoning"], name
            else:
                assert result.reasoning == expected["reasoning"], name
            assert result.text == expected["content"], name
            assert result.tool_calls == expected["tool_calls"], name
            assert result.outcome.finish_reason == expected["finish"], name


def test_the_recorded_errors_are_upstream_errors(recorded: Path) -> None:
    for name in ("deepseek_error_context_exceeded_stream", "deepseek_error_messages_not_array"):
        body = json.loads((recorded / f"{name}.json").read_text(encoding="utf-8"))
        result = run([body])
        assert isinstance(result.raised, UpstreamStreamError), name
        assert result.raised.message == body["error"]["message"]


def test_every_exchange_is_recorded_again(recorded: Path) -> None:
    names = exchanges(recorded)
    assert names == exchanges(Path(__file__).resolve().parent.parent / "fixtures" / "llamacpp")
    props = json.loads((recorded / "deepseek_server_props.json").read_text(encoding="utf-8"))
    assert props["build_info"]
    assert props["model_alias"] == llama_server.MODEL_ALIAS
