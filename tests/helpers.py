"""Shared test helpers: fixtures, running the translator, and reading its output back."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag_ui.core import BaseEvent

from agui_rules import check_events
from bridge import DONE, BridgeError, ChatStreamTranslator, TranslateOptions, TurnOutcome

#: Exchanges recorded from a real llama.cpp server (their README says how), kept in the repository.
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "llamacpp"


def counter_ids() -> Any:
    numbers = itertools.count(1)
    return lambda prefix: f"{prefix}-{next(numbers)}"


def sse_data_lines(body: str) -> Iterator[str]:
    """The ``data`` payloads of a recorded SSE body (one-line events, as servers send them)."""
    for line in body.splitlines():
        if line.startswith("data:"):
            yield line[5:].strip()


def fixture_chunks(name: str) -> list[Any]:
    body = (FIXTURES / f"{name}.sse").read_text(encoding="utf-8")
    return [DONE if data == DONE else json.loads(data) for data in sse_data_lines(body)]


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@dataclass
class Result:
    """A translated stream, checked by the client's rules, with what a user would see."""

    events: list[BaseEvent]
    outcome: TurnOutcome
    wire: list[dict[str, Any]]
    raised: BridgeError | None = None
    calls: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def types(self) -> list[str]:
        return [frame["type"] for frame in self.wire]

    @property
    def reasoning(self) -> str:
        return "".join(f["delta"] for f in self.wire if f["type"] == "REASONING_MESSAGE_CONTENT")

    @property
    def text(self) -> str:
        return "".join(f["delta"] for f in self.wire if f["type"] == "TEXT_MESSAGE_CONTENT")

    @property
    def reasoning_messages(self) -> list[str]:
        messages: dict[str, str] = {}
        for f in self.wire:
            if f["type"] == "REASONING_MESSAGE_START":
                messages[f["messageId"]] = ""
            elif f["type"] == "REASONING_MESSAGE_CONTENT":
                messages[f["messageId"]] += f["delta"]
        return list(messages.values())

    @property
    def tool_calls(self) -> list[tuple[str, str]]:
        """(name, arguments) per call, in START order."""
        return [(c["name"], c["arguments"]) for c in self.calls.values()]


def run(
    chunks: Iterable[Any],
    options: TranslateOptions | None = None,
    *,
    complete: bool = True,
    translator: ChatStreamTranslator | None = None,
) -> Result:
    """Feed chunks one by one, then close; always checks the stream by the client's rules."""
    translator = translator or ChatStreamTranslator(options, new_id=counter_ids())
    events: list[BaseEvent] = []
    raised = None
    try:
        for chunk in chunks:
            events.extend(translator.feed(chunk))
    except BridgeError as exc:
        raised = exc
    events.extend(translator.close())
    frames = check_events(events, complete=complete)
    result = Result(events, translator.outcome, frames, raised)
    for f in frames:
        if f["type"] == "TOOL_CALL_START":
            result.calls[f["toolCallId"]] = {
                "name": f["toolCallName"],
                "arguments": "",
                "parent": f.get("parentMessageId", ""),
            }
        elif f["type"] == "TOOL_CALL_ARGS":
            result.calls[f["toolCallId"]]["arguments"] += f["delta"]
    return result


def chunk(*, content: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    """A chat.completion.chunk with one choice; extra keywords go into the delta."""
    if content is not None:
        delta["content"] = content
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def tool_delta(
    index: int, *, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        call["function"] = function
    return chunk(tool_calls=[call])


def text_chunks(*pieces: str, finish: str = "stop") -> list[dict[str, Any]]:
    return [*(chunk(content=p) for p in pieces), chunk(finish=finish)]


def sse_chunks_from_bytes(pieces: Iterable[bytes], *, max_line: int = 4 * 1024 * 1024) -> list[Any]:
    """Read an SSE body, delivered in the given byte pieces, the way the bridge reads upstreams:
    ``SseReader`` splits the events as bytes, ``chunk_from_data`` reads each one."""
    from bridge.serve.upstream.sse import SseReader, chunk_from_data

    reader = SseReader(max_line)
    chunks = []
    for piece in pieces:
        for event, data in reader.feed(piece):
            item = chunk_from_data(data, event)
            if item is not None:
                chunks.append(item)
        if reader.failure is not None:
            raise reader.failure
    return chunks


def split_every(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


class CountedObservation:
    """What ``UpstreamClient`` tells a turn's ``TurnObservation``, counted."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.retries = 0
        self.resends = 0

    def headers(self) -> dict[str, str]:
        return {}

    def answered(self, status: int) -> None:
        self.statuses.append(status)

    def retry(self) -> None:
        self.retries += 1

    def resent(self) -> None:
        self.resends += 1


def tool_call_counts(metrics: str, tool: str) -> dict[str, float]:
    """A server tool's calls by outcome, from ``agui_bridge_tool_calls_total`` in a /metrics
    exposition (the sum over workers is the bridge's, in multiprocess mode)."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name == "agui_bridge_tool_calls_total"
                and labels.get("tool") == tool
                and labels.get("side") == "server"
            ):
                counts[labels["outcome"]] = counts.get(labels["outcome"], 0.0) + sample.value
    return counts


def worker_pids(parent: int) -> list[int]:
    """The worker processes ``serve --workers`` started under ``parent`` (multiprocessing's
    spawned interpreters, not its resource tracker), read from ``/proc``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return sorted(found)
