"""What folding a run into its thread costs (``bridge.serve.threads.fold``, with ``--threads``):
applying a run's frames to the thread as the client would, once, at the run's end.

Each case is one run of ``--size`` characters in one-token deltas (a reasoning message, a text
and a tool call's arguments, a third each): its frames are made as the bridge makes them
(``encode_event``), then folded (``ThreadFold.apply_frame`` on each, the messages read once).
The figures: CPU microseconds per frame to encode it (part of what each token costs the bridge
already) and to fold it, and their ratio; two sizes, so a cost that grows with the run shows.

    python benchmarks/thread_fold.py            # 300 KB and 3 MB
    python benchmarks/thread_fold.py --smoke    # 30 KB and 300 KB
    PYTHONPATH=/tmp/before python benchmarks/thread_fold.py   # another checkout's bridge

Timing never fails a run; a wrong fold does.
"""

from __future__ import annotations

import argparse
import time

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from bridge.core.encode import encode_event
from bridge.serve.threads.fold import ThreadFold

TOKEN = "word"  # one token: four characters


def events(size: int) -> list[BaseEvent]:
    count = size // 3 // len(TOKEN)
    return [
        RunStartedEvent(thread_id="t", run_id="r"),
        ReasoningMessageStartEvent(message_id="r", role="reasoning"),
        *(ReasoningMessageContentEvent(message_id="r", delta=TOKEN) for _ in range(count)),
        ReasoningMessageEndEvent(message_id="r"),
        TextMessageStartEvent(message_id="m", role="assistant"),
        *(TextMessageContentEvent(message_id="m", delta=TOKEN) for _ in range(count)),
        ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m"),
        *(ToolCallArgsEvent(tool_call_id="c", delta=TOKEN) for _ in range(count)),
        ToolCallEndEvent(tool_call_id="c"),
        TextMessageEndEvent(message_id="m"),
        RunFinishedEvent(thread_id="t", run_id="r"),
    ]


def case(size: int) -> tuple[int, float, float]:
    """Frames, CPU seconds to encode them, CPU seconds to fold them and read the messages."""
    batch = events(size)
    started = time.process_time()
    frames = [encode_event(event) for event in batch]
    encoded = time.process_time() - started
    started = time.process_time()
    fold = ThreadFold([{"id": "u", "role": "user", "content": "Hi"}], {})
    for frame in frames:
        fold.apply_frame(frame)
    messages = fold.messages
    folded = time.process_time() - started
    whole = TOKEN * (size // 3 // len(TOKEN))
    assert fold.ended and fold.skipped == 0
    assert messages[1]["content"] == whole and messages[2]["content"] == whole
    assert messages[2]["toolCalls"][0]["function"]["arguments"] == whole
    return len(frames), encoded, folded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="30 KB and 300 KB")
    args = parser.parse_args()
    sizes = [30_000, 300_000] if args.smoke else [300_000, 3_000_000]
    print(f"{'run':>8}  {'frames':>8}  {'encode µs/frame':>15}  {'fold µs/frame':>13}  fold/encode")
    for size in sizes:
        frames, encoded, folded = case(size)
        print(
            f"{size // 1000:>6}KB  {frames:>8}  {encoded / frames * 1e6:>15.2f}  "
            f"{folded / frames * 1e6:>13.2f}  {folded / encoded:>10.2f}"
        )


if __name__ == "__main__":
    main()
