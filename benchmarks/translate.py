"""Throughput of the Chat Completions → AG-UI pipeline on a synthetic, deterministic stream.

The stream looks like an OpenAI-compatible server's ``chat.completion.chunk`` stream: a role
chunk, a third of reasoning tokens, a third of answer tokens, three parallel tool calls whose
argument fragments interleave, a finish chunk, a usage-only chunk and ``[DONE]``. Two variants:
reasoning in ``delta.reasoning_content`` (``field``), and reasoning as ``<think>…</think>``
inside ``content`` (``think-tags``, through the tag filter).

Stages, each the best of ``--repeat`` runs with a fresh ``ChatStreamTranslator``:
``translate`` (feed every parsed chunk, then close), ``translate+encode`` (also encode every
event with ``bridge.core.encode.encode_event``, what the server writes: byte-identical to
``EventEncoder``), ``translate+EventEncoder`` (the same with ag-ui's own encoder, for reference)
and ``sse+translate+encode`` (starting from raw SSE bytes: ``json.loads`` of each ``data:``
line first).

    python benchmarks/translate.py            # full run, writes benchmarks/results/translate.json
    python benchmarks/translate.py --smoke    # a tiny run of every path, writes nothing

The output is checked (three tool calls, reasoning, text and arguments unchanged); a wrong
output exits non-zero. Timing never fails the run: the floor is printed, not enforced.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from bridge import DONE, ChatStreamTranslator, TranslateOptions
from bridge.core.encode import encode_event
from bridge.serve.upstream.sse import SseReader, chunk_from_data

FULL_CHUNKS = 20_000
FULL_REPEAT = 5
SMOKE_CHUNKS = 2_000
SMOKE_REPEAT = 1
MIN_CHUNKS = 100  # three tool calls need a header, an opening and a closing fragment each

# From the performance issue; printed next to the figure, never asserted.
FLOOR_CHUNKS_PER_S = 60_000
FLOOR_STAGE = "translate+encode"
FLOOR_NOTE = "floor: 60k chunks/s with encoding"

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "translate.json"

STAGES = ("translate", "translate+encode", "translate+EventEncoder", "sse+translate+encode")

_COMPLETION_ID = "chatcmpl-bench0000000000000000"
_CREATED = 1_735_689_600
_MODEL = "bench-model-8b"
_TOOLS = ("get_weather", "search_docs", "run_query")
# Word-ish tokens, a few non-ASCII so that encoding meets them too.
_WORDS = (
    "the", "model", "considers", "whether", "a", "stream", "of", "tokens", "arrives", "in",
    "order", "and", "then", "answers", "with", "care", "because", "user", "asked", "about",
    "weather", "Paris", "café", "naïve", "→", "so", "it", "checks", "three", "sources",
    "before", "calling", "tools", "résumé", "data", "is", "fine", "now", "let", "me",
)  # fmt: skip

Chunk = dict[str, Any] | str
Encode = Callable[[BaseEvent], str]


@dataclass(frozen=True, kw_only=True)
class Stream:
    """One synthetic upstream stream and what the translator must make of it."""

    variant: str
    chunks: list[Chunk]
    sse: bytes
    reasoning: str
    text: str
    arguments: dict[str, str]  # tool name → its whole arguments JSON


@dataclass(frozen=True, kw_only=True)
class Result:
    variant: str
    stage: str
    chunks: int
    events: int
    times_s: list[float]

    @property
    def best_s(self) -> float:
        return min(self.times_s)

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.best_s

    @property
    def us_per_chunk(self) -> float:
        return self.best_s / self.chunks * 1e6

    @property
    def note(self) -> str:
        if self.stage != FLOOR_STAGE:
            return ""
        if self.chunks < 10_000:
            return f"{FLOOR_NOTE} (smoke run: too short to measure)"
        verdict = "meets it" if self.chunks_per_s >= FLOOR_CHUNKS_PER_S else "BELOW it"
        return f"{FLOOR_NOTE} ({verdict})"

    def as_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "stage": self.stage,
            "chunks": self.chunks,
            "events": self.events,
            "best_s": self.best_s,
            "chunks_per_s": round(self.chunks_per_s, 1),
            "us_per_chunk": round(self.us_per_chunk, 3),
            "times_s": self.times_s,
        }


# -- the stream ------------------------------------------------------------------------------
def _tokens(count: int, offset: int) -> list[str]:
    """Deterministic word tokens; the first has no leading space, some end a sentence."""
    tokens: list[str] = []
    for i in range(count):
        word = _WORDS[(offset + i * 7) % len(_WORDS)]
        if i % 17 == 16:
            word += "."
        elif i % 11 == 10:
            word += ","
        tokens.append(word if i == 0 else " " + word)
    return tokens


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": _COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": _MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def _tool_call_chunks(count: int) -> tuple[list[Chunk], dict[str, str]]:
    """Three parallel calls, ``count`` deltas in all, interleaved 0, 1, 2, 0, 1, 2…"""
    per_call = [count // 3 + (1 if i < count % 3 else 0) for i in range(3)]
    deltas: list[list[dict[str, Any]]] = []
    arguments: dict[str, str] = {}
    for index, (name, size) in enumerate(zip(_TOOLS, per_call, strict=True)):
        # The first delta carries the id and name (and empty arguments, as OpenAI sends it).
        header = {
            "index": index,
            "id": f"call_{index}_bench",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        fragments = ['{"query": "', *_tokens(size - 3, offset=index * 5), '"}']
        arguments[name] = "".join(fragments)
        deltas.append(
            [header]
            + [{"index": index, "function": {"arguments": fragment}} for fragment in fragments]
        )
    chunks: list[Chunk] = []
    for position in range(max(per_call)):
        for call in deltas:
            if position < len(call):
                chunks.append(_chunk({"tool_calls": [call[position]]}))
    return chunks, arguments


def build_stream(variant: str, total: int) -> Stream:
    """A stream of exactly ``total`` chunks (``[DONE]`` included)."""
    body = total - 4  # role chunk, finish chunk, usage chunk, [DONE]
    n_reasoning = body // 3
    n_text = body // 3
    reasoning_tokens = _tokens(n_reasoning, offset=0)
    text_tokens = _tokens(n_text, offset=3)

    chunks: list[Chunk] = [_chunk({"role": "assistant", "content": ""})]
    if variant == "field":
        chunks += [_chunk({"reasoning_content": token}) for token in reasoning_tokens]
        reasoning = "".join(reasoning_tokens)
    elif variant == "think-tags":
        # Five of the reasoning chunks carry tags and whitespace; the closing tag is split so
        # that the filter has to hold back a partial tag.
        inner = reasoning_tokens[: n_reasoning - 5]
        pieces = ["<think>", "\n", *inner, "\n", "</", "think>\n\n"]
        chunks += [_chunk({"content": piece}) for piece in pieces]
        # llama.cpp's rule, which the filter follows: the whitespace at the reasoning's edges
        # and after the closing tag is dropped.
        reasoning = "".join(inner).strip()
    else:
        raise ValueError(f"unknown variant {variant!r}")
    chunks += [_chunk({"content": token}) for token in text_tokens]
    tool_chunks, arguments = _tool_call_chunks(body - n_reasoning - n_text)
    chunks += tool_chunks
    chunks.append(_chunk({}, finish_reason="tool_calls"))
    chunks.append(
        {
            "id": _COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": _MODEL,
            "choices": [],
            "usage": {
                "prompt_tokens": 512,
                "completion_tokens": body,
                "total_tokens": 512 + body,
                "completion_tokens_details": {"reasoning_tokens": n_reasoning},
            },
        }
    )
    chunks.append(DONE)
    assert len(chunks) == total, (len(chunks), total)
    return Stream(
        variant=variant,
        chunks=chunks,
        sse=_to_sse(chunks),
        reasoning=reasoning,
        text="".join(text_tokens),
        arguments=arguments,
    )


def _to_sse(chunks: Sequence[Chunk]) -> bytes:
    lines: list[str] = []
    for chunk in chunks:
        data = chunk if isinstance(chunk, str) else json.dumps(chunk, ensure_ascii=False)
        lines.append(f"data: {data}\n\n")
    return "".join(lines).encode()


def parse_sse(body: bytes) -> Iterator[Chunk]:
    """Chunks from SSE bytes as the bridge reads an upstream: ``SseReader`` splits the events,
    ``chunk_from_data`` reads each (orjson, surrogate and error handling; ``[DONE]`` as text)."""
    for event, data in SseReader(len(body) + 1).feed(body):
        chunk = chunk_from_data(data, event)
        if chunk is not None:
            yield chunk


# -- the measured work -----------------------------------------------------------------------
def translate(chunks: Iterable[Chunk], options: TranslateOptions, encode: Encode | None) -> int:
    """Feed every chunk to a fresh translator and close it; return the number of events."""
    translator = ChatStreamTranslator(options)
    events = 0
    for chunk in chunks:
        out = translator.feed(chunk)
        events += len(out)
        if encode is not None:
            for event in out:
                encode(event)
    out = translator.close()
    if encode is not None:
        for event in out:
            encode(event)
    return events + len(out)


def stage_runner(stream: Stream, stage: str, options: TranslateOptions) -> Callable[[], int]:
    encode = encode_event
    if stage == "translate":
        return lambda: translate(stream.chunks, options, None)
    if stage == "translate+encode":
        return lambda: translate(stream.chunks, options, encode)
    if stage == "translate+EventEncoder":
        return lambda: translate(stream.chunks, options, EventEncoder().encode)
    if stage == "sse+translate+encode":
        return lambda: translate(parse_sse(stream.sse), options, encode)
    raise ValueError(f"unknown stage {stage!r}")


def measure(run: Callable[[], int], repeat: int) -> tuple[list[float], int]:
    times: list[float] = []
    events = 0
    for _ in range(repeat):
        gc.collect()  # start each run from the same heap; the collector stays on, as in a server
        start = time.perf_counter()
        events = run()
        times.append(time.perf_counter() - start)
    return times, events


# -- the sanity check ------------------------------------------------------------------------
def check(stream: Stream, options: TranslateOptions) -> list[str]:
    """What is wrong with the translator's output for ``stream`` (empty when all is well)."""
    problems: list[str] = []
    translator = ChatStreamTranslator(options)
    events: list[BaseEvent] = []
    for chunk in stream.chunks:
        events += translator.feed(chunk)
    events += translator.close()

    starts = [event for event in events if isinstance(event, ToolCallStartEvent)]
    if len(starts) != 3:
        problems.append(f"{len(starts)} TOOL_CALL_START events, expected 3")
    reasoning = "".join(
        event.delta for event in events if isinstance(event, ReasoningMessageContentEvent)
    )
    if reasoning != stream.reasoning:
        problems.append(_differs("reasoning", reasoning, stream.reasoning))
    text = "".join(event.delta for event in events if isinstance(event, TextMessageContentEvent))
    if text != stream.text:
        problems.append(_differs("text", text, stream.text))
    names = {event.tool_call_id: event.tool_call_name for event in starts}
    arguments: dict[str, str] = dict.fromkeys(names.values(), "")
    for event in events:
        if isinstance(event, ToolCallArgsEvent):
            arguments[names[event.tool_call_id]] += event.delta
    if arguments != stream.arguments:
        problems.append("tool call arguments differ from the generated ones")

    outcome = translator.outcome
    if outcome.error is not None or outcome.finish_reason != "tool_calls" or outcome.usage is None:
        problems.append(f"unexpected outcome {outcome!r}")

    encode = EventEncoder().encode
    for event in events:
        frame = encode(event)
        payload = json.loads(frame.removeprefix("data: ")) if frame.endswith("\n\n") else {}
        if not frame.startswith("data: ") or payload.get("type") != event.type.value:
            problems.append(f"bad SSE frame for {event.type.value}: {frame[:80]!r}")
            break

    sse_translator = ChatStreamTranslator(options)
    sse_events: list[EventType] = []
    for chunk in parse_sse(stream.sse):
        sse_events += [event.type for event in sse_translator.feed(chunk)]
    sse_events += [event.type for event in sse_translator.close()]
    if sse_events != [event.type for event in events]:
        problems.append("the SSE path gives other events than the parsed-chunk path")
    return [f"{stream.variant}: {problem}" for problem in problems]


def _differs(what: str, got: str, expected: str) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
        min(len(got), len(expected)),
    )
    return (
        f"{what} differs at character {at} (got {len(got)} characters, expected "
        f"{len(expected)}): {got[at : at + 30]!r} vs {expected[at : at + 30]!r}"
    )


# -- report ----------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    cpu_model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                cpu_model = line.partition(":")[2].strip()
                break
    packages: dict[str, str | None] = {}
    for package in ("ag-ui-protocol", "pydantic", "pydantic-core"):
        try:
            packages[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            packages[package] = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "cpu_model": cpu_model or platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "packages": packages,
        "git": _git_revision(),
    }


def _git_revision() -> str | None:
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def table(results: Sequence[Result]) -> str:
    header = ("variant", "stage", "chunks/s", "µs/chunk", "events", "")
    rows = [
        (
            result.variant,
            result.stage,
            f"{result.chunks_per_s:,.0f}",
            f"{result.us_per_chunk:.2f}",
            f"{result.events:,}",
            result.note,
        )
        for result in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    right = {2, 3, 4}

    def line(row: Sequence[str]) -> str:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=False))
        ]
        return "  ".join([*cells, row[-1]]).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"a tiny run ({SMOKE_CHUNKS:,} chunks, {SMOKE_REPEAT} repeat) of every code path; "
        "writes no results file",
    )
    parser.add_argument("--chunks", type=int, help=f"chunks per stream (default {FULL_CHUNKS:,})")
    parser.add_argument("--repeat", type=int, help=f"runs per figure, best kept ({FULL_REPEAT})")
    args = parser.parse_args(argv)
    chunks: int = args.chunks or (SMOKE_CHUNKS if args.smoke else FULL_CHUNKS)
    repeat: int = args.repeat or (SMOKE_REPEAT if args.smoke else FULL_REPEAT)
    if chunks < MIN_CHUNKS:
        parser.error(f"--chunks must be at least {MIN_CHUNKS}")
    if repeat < 1:
        parser.error("--repeat must be at least 1")

    options = TranslateOptions()
    streams = [build_stream(variant, chunks) for variant in ("field", "think-tags")]
    problems = [problem for stream in streams for problem in check(stream, options)]
    if problems:
        print("sanity check failed:", *problems, sep="\n  ", file=sys.stderr)
        return 1

    results: list[Result] = []
    for stream in streams:
        for stage in STAGES:
            times, events = measure(stage_runner(stream, stage, options), repeat)
            results.append(
                Result(
                    variant=stream.variant,
                    stage=stage,
                    chunks=len(stream.chunks),
                    events=events,
                    times_s=times,
                )
            )

    print(f"{chunks:,} chunks per stream, best of {repeat}; output checked: ok")
    print(table(results))
    if args.smoke:
        return 0
    report = {
        "benchmark": "translate",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {"chunks": chunks, "repeat": repeat, "stages": list(STAGES)},
        "floor": {"stage": FLOOR_STAGE, "chunks_per_s": FLOOR_CHUNKS_PER_S, "note": FLOOR_NOTE},
        "results": [result.as_json() for result in results],
    }
    RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_PATH.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {RESULTS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
