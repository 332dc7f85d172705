"""An OpenAI-compatible upstream that never stops: ``python tests/firehose_upstream.py [PORT]``.

- ``POST …/chat/completions`` with any model: reasoning chunks written back to back, forever (the
  bridge's reads always find data buffered), until the connection closes.
- with a model whose name holds ``paced``: ``PACED_CHUNKS`` text chunks, one every ``PACE``
  seconds (``paced-50``: every 50 ms; ``paced-50-20``: 20 chunks), then ``finish_reason`` and
  ``[DONE]``.
- ``GET /status``: ``{"open": streams being written now, "served": streams begun}``.

Raw asyncio streams, not a framework: it must write as fast as the socket takes, and notice a
closed connection only by writing to it. It prints ``port N`` once it listens.
"""

from __future__ import annotations

import asyncio
import json
import sys

PACE = 0.01
PACED_CHUNKS = 100
_OPEN = 0
_SERVED = 0


def _frame(delta: dict[str, object], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-firehose",
        "object": "chat.completion.chunk",
        "model": "firehose",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


_BURST = _frame({"reasoning_content": "and on "}) * 1024
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)


def _pace(model: str) -> tuple[float, int]:
    """``paced[-MS[-CHUNKS]]``: the seconds between chunks and how many."""
    parts = model.split("paced", 1)[1].strip("-").split("-")
    pace = float(parts[0]) / 1000 if parts[0] else PACE
    chunks = int(parts[1]) if len(parts) > 1 and parts[1] else PACED_CHUNKS
    return pace, chunks


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global _OPEN, _SERVED
    try:
        method, path, _ = (await reader.readline()).decode().split(" ", 2)
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        body = json.loads(await reader.readexactly(length)) if length else {}
        if path.endswith("/status"):
            payload = json.dumps({"open": _OPEN, "served": _SERVED}).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                + b"content-length: %d\r\n\r\n" % len(payload)
                + payload
            )
            await writer.drain()
            return
        if method != "POST" or not path.endswith("/chat/completions"):
            writer.write(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            await writer.drain()
            return
        _OPEN += 1
        _SERVED += 1
        try:
            writer.write(_HEAD)
            model = str(body.get("model", ""))
            if "paced" in model:
                pace, chunks = _pace(model)
                for number in range(chunks):
                    writer.write(_frame({"content": f"{number} "}))
                    await writer.drain()
                    await asyncio.sleep(pace)
                writer.write(_frame({}, "stop") + b"data: [DONE]\n\n")
                await writer.drain()
                return
            while True:
                writer.write(_BURST)
                await writer.drain()
                await asyncio.sleep(0)  # this server stays responsive; its reader finds data
        finally:
            _OPEN -= 1
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", port)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
