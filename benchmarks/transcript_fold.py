"""What the run's transcript costs (``bridge.serve.run.transcript``, kept when server tools are
configured): folding a turn's events into the messages the next request is built from.

Each case is one model turn: a reasoning message, a text message and a tool call's arguments,
each ``--size`` of text in deltas of a given length, then the messages read once (as the tool
loop does before its next request). CPU seconds of ``Transcript.add`` plus that read, and the
folded texts checked whole.

    python benchmarks/transcript_fold.py            # 600 KB in one-token deltas, 8 MB in 400s
    python benchmarks/transcript_fold.py --smoke    # 60 KB
    PYTHONPATH=/tmp/before python benchmarks/transcript_fold.py   # another checkout's bridge

Timing never fails a run; a wrong fold does.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageStartEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
)

import bridge
from bridge.serve.run.transcript import Transcript

TOKEN = "word"  # one token: four characters


def events(size: int, delta: int) -> Iterator[BaseEvent]:
    piece = (TOKEN * (delta // len(TOKEN) + 1))[:delta]
    count = size // delta
    yield ReasoningMessageStartEvent(message_id="r", role="reasoning")
    for _ in range(count):
        yield ReasoningMessageContentEvent(message_id="r", delta=piece)
    yield TextMessageStartEvent(message_id="m", role="assistant")
    for _ in range(count):
        yield TextMessageContentEvent(message_id="m", delta=piece)
    yield ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m")
    for _ in range(count):
        yield ToolCallArgsEvent(tool_call_id="c", delta=piece)


def fold(size: int, delta: int) -> float:
    """CPU seconds to fold one turn and read its messages and call once."""
    batch = list(events(size, delta))
    expected = (size // delta) * delta
    started = time.process_time()
    transcript = Transcript()
    for event in batch:  # one event a batch, as a token-per-chunk upstream gives them
        transcript.add([event])
    messages = transcript.messages
    call = transcript.calls(["c"])[0]
    took = time.process_time() - started
    reasoning, text = messages
    assert isinstance(reasoning, ReasoningMessage) and len(reasoning.content) == expected
    assert isinstance(text, AssistantMessage) and len(text.content or "") == expected
    assert len(call.function.arguments) == expected
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run")
    args = parser.parse_args()
    cases = [(60_000, 4)] if args.smoke else [(600_000, 4), (8_000_000, 400)]
    print(f"transcript fold, bridge from {bridge.__file__}")
    for size, delta in cases:
        seconds = fold(size, delta)
        count = size // delta
        print(
            f"  {size / 1e6:5.2f} MB each of reasoning, text and arguments, {count:>7} deltas "
            f"of {delta:>3} characters: {seconds:8.3f} s CPU"
        )


if __name__ == "__main__":
    main()
