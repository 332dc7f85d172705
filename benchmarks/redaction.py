"""What redaction costs: one big text, and the model's words a delta at a time.

- ``big text``: ``Redactor.redact`` over 10 MB of prose and over 10 MB of base62 (the key's own
  alphabet, the worst case for a scan that looks for the key's characters), ms per MB.
- ``per delta``: a token-sized delta (4 characters) through the frame boundary with a key
  configured: ``FrameWriter.frame`` of a ``TEXT_MESSAGE_CONTENT`` event, µs per event, beside
  the same event with no secret configured (what the frame costs without redaction).

    python benchmarks/redaction.py            # full run
    python benchmarks/redaction.py --smoke    # 1 MB texts, a few thousand deltas

Run it in a checkout of any commit to compare (the ``per delta`` row needs ``FrameWriter``).
The output is checked: the key is found in every text it was put in. Timing never fails a run.
"""

from __future__ import annotations

import argparse
import random
import string
import time
from collections.abc import Callable

from ag_ui.core import TextMessageContentEvent

from bridge.serve.http.frames import FrameWriter
from bridge.serve.redact import MASK, Redactor

KEY = "sk-proj-Zq8vT2mW9xL4nB7cR1pK6hY3jD5fG0sA"
PROSE = "The quick brown fox considers several alternatives before it jumps over the dog. "


def _best(work: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run")
    args = parser.parse_args()
    size = 1_000_000 if args.smoke else 10_000_000
    deltas = 5_000 if args.smoke else 200_000
    repeat = 1 if args.smoke else 3
    redactor = Redactor([KEY])

    rng = random.Random(1)
    base62 = "".join(rng.choices(string.ascii_letters + string.digits, k=size))
    prose = (PROSE * (size // len(PROSE) + 1))[:size]
    print(f"redaction, {size / 1e6:g} MB texts, best of {repeat}")
    for name, text in (("prose", prose), ("base62", base62)):
        planted = text[: size // 2] + KEY + text[size // 2 :]
        assert MASK in redactor.redact(planted) and KEY not in redactor.redact(planted)
        seconds = _best(lambda text=text: redactor.redact(text), repeat)  # type: ignore[misc]
        per_mb = seconds * 1e3 / (size / 1e6)
        print(f"  big text, {name:7}  {seconds * 1000:8.1f} ms  {per_mb:7.2f} ms/MB")

    event = TextMessageContentEvent(message_id="m", delta="word")
    for name, writer in (
        ("no secret", FrameWriter(Redactor([]))),
        ("a key", FrameWriter(redactor)),
    ):
        seconds = _best(lambda writer=writer: [writer.frame(event) for _ in range(deltas)], repeat)  # type: ignore[misc]
        print(f"  per delta, {name:9}  {seconds / deltas * 1e6:6.2f} µs an event")


if __name__ == "__main__":
    main()
