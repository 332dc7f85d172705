"""How a stream ends, by provider (issue 57): OpenRouter's ``finish_reason: "error"`` with no
``error`` object is the run's error in the provider's reason; a stream that ends with ``[DONE]``
and never said why (llama-cpp-python's server cutting a stream) is ``upstream_truncated``, not
a clean finish with half an answer; Kimi's usage, streamed in the choice, lands in
``RUN_FINISHED``. Each over real sockets, an upstream that sends exactly those chunks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from servers import post, run_input, serve


def _upstream(chunks: list[dict[str, Any] | str]) -> Starlette:
    async def complete(request: Request) -> StreamingResponse:
        await request.body()

        async def body() -> AsyncIterator[str]:
            for chunk in chunks:
                yield f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"])])


def _chunk(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}],
    }


def _run(chunks: list[dict[str, Any] | str]) -> list[dict[str, Any]]:
    with serve(_upstream(chunks)) as upstream:
        config = BridgeConfig(upstream_url=f"{upstream}/v1", model="m")
        with serve(create_app(config)) as bridge:
            return post(f"{bridge}/", run_input([{"id": "u", "role": "user", "content": "Hi"}]))


def _text(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")


@pytest.mark.parametrize(
    ("native", "said"),
    [
        ("error", "the upstream ended the answer with an error"),
        ("MALFORMED_FUNCTION_CALL", "(MALFORMED_FUNCTION_CALL)"),
    ],
)
def test_openrouters_finish_reason_error_is_the_runs_error(native: str, said: str) -> None:
    frames = _run(
        [
            _chunk({"role": "assistant", "content": "Half an"}),
            _chunk({"content": " answer"}, "error", native_finish_reason=native),
            "[DONE]",
        ]
    )
    assert _text(frames) == "Half an answer"  # nothing the upstream sent is dropped
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "upstream_error"
    assert said in frames[-1]["message"]


def test_done_with_no_finish_reason_is_a_truncated_answer() -> None:
    frames = _run(
        [
            _chunk({"role": "assistant", "content": "Half an"}),
            _chunk({"content": " answer"}),
            "[DONE]",
        ]
    )
    assert _text(frames) == "Half an answer"
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "upstream_truncated"
    assert "[DONE] and no finish_reason" in frames[-1]["message"]


def test_a_finish_reason_then_done_is_a_clean_finish() -> None:
    frames = _run(
        [_chunk({"role": "assistant", "content": "Whole."}), _chunk({}, "stop"), "[DONE]"]
    )
    assert frames[-1]["type"] == "RUN_FINISHED" and _text(frames) == "Whole."


def test_kimis_usage_in_the_choice_lands_in_run_finished() -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    frames = _run(
        [
            _chunk({"role": "assistant", "content": "Hi."}),
            _chunk({}, "stop", usage=usage),
            "[DONE]",
        ]
    )
    assert frames[-1]["type"] == "RUN_FINISHED"
    [spent] = frames[-1]["usage"]  # one model: one entry
    assert spent["inputTokens"] == 11 and spent["outputTokens"] == 7


def test_azures_content_filter_says_which_category_stopped_the_answer() -> None:
    """Azure OpenAI: a first chunk with no choices (its prompt's filter results), then the
    answer, stopped with ``finish_reason: "content_filter"`` and the categories' verdicts."""
    verdicts = {
        "hate": {"filtered": True, "severity": "medium"},
        "self_harm": {"filtered": False, "severity": "safe"},
        "jailbreak": {"filtered": True, "detected": True},
    }
    prompt = {"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False}}}
    frames = _run(
        [
            {"id": "", "object": "", "model": "", "choices": [], "prompt_filter_results": [prompt]},
            _chunk({"role": "assistant", "content": "Well"}),
            _chunk({}, "content_filter", content_filter_results=verdicts),
            "[DONE]",
        ]
    )
    assert _text(frames) == "Well"
    finished = frames[-1]
    assert finished["type"] == "RUN_FINISHED"
    result = finished["result"]
    assert result["finishReason"] == "content_filter" and result["truncated"] is True
    assert result["filtered"] == "hate (medium), jailbreak (detected)"
    assert result["message"].endswith("content filter: hate (medium), jailbreak (detected).")
