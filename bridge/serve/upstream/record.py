"""Recorded runs (``agui-bridge serve --record DIR``): everything needed to replay a run anywhere.

Each run is one JSON Lines file, ``DIR/<UTC time>-<pid>-<n>-<run id>.jsonl``, written as the run
goes (a run cut short still leaves its file). Every line is an object with a ``type``; ``t`` is the
seconds since the run began (monotonic clock):

- ``run``: the header: ``format`` (``agui-bridge-record/2``), ``bridge_version``
  (``bridge.__version__``), ``started`` (ISO 8601 UTC), ``thread_id``, ``run_id``,
  ``upstream_url`` (the base URL the exchanges' paths are relative to), ``input`` (the
  ``RunAgentInput`` as read, camelCase: a 0.0.x ``binary`` part as the 1.0 part it was read
  as, a text document as its text) and ``config`` (the bridge's settings, without the API key
  and the auth token, its URLs and MCP command lines without credentials);
- ``request``: ``exchange`` (1, 2, … within the run), ``method``, ``url``, ``headers`` (without
  ``Authorization`` and the other credential headers), ``body`` (JSON when it parses, else text);
- ``response``: ``exchange``, ``status``, ``reason``, ``http_version``, ``headers`` (a list of
  ``[name, value]`` pairs, as received) and, when the body came compressed, ``decoded``: the
  content codings (``["gzip"]``) the ``read`` lines are already decoded from;
- ``read``: ``exchange`` and the body's bytes as one network read brought them (decoded, see
  ``decoded``): ``text`` when they are valid UTF-8, else ``base64``. An end that may begin a
  secret is held back and written with the next read (or at the body's end), so the secret is
  found whole. A body that fails to decode is kept as it came from the read that failed;
- ``end``: ``exchange``; ``complete`` (the body was read to its end; false when the bridge stopped
  reading, after ``[DONE]`` say) and ``error`` (how the connection failed, or null; then ``kind``,
  as ``bridge.serve.upstream.transport.failure_kind`` reads it: ``closed``, ``read_timeout``, …);
- ``error``: ``exchange``, ``error`` and ``kind``: the request failed before any answer
  (``connect``, ``connect_timeout``, …);
- ``event``: one AG-UI ``event`` the bridge sent its client, as it went out (after the client's
  protocol shaping and redaction);
- ``run_end``: the run is over.

Format 1 (before ``decoded``) kept each read as it came off the wire, compressed or not.

In ``input`` and ``body``, an attachment's base64 (4096 characters or more) and any text of a
MiB or more are written as their size and digest (``recording.as_recorded``), not as they are.

No secret is kept: every line goes through the bridge's ``Redactor``, and the body's bytes, UTF-8
or not, through a ``ByteStreamRedactor`` that sees across reads, so the key is not in the record
even when the upstream quoted it back, compressed it, or sent it a few bytes a read; no URL in it
holds credentials (``user:password@``) or a query. A line that cannot be written (a full disk)
stops the recording of that run, logged once; the run goes on, and its file keeps the whole lines
written before (a file with none is removed). ``agui-bridge replay DIR`` serves the recorded
answers again (``bridge/cli/replay.py``).

The recording is a wrapping ``httpx`` transport plus a hook where frames are written, so the
upstream client itself knows nothing of it (but to hand each request its body as built,
``REQUEST_BODY``, which the recording reads rather than parse the bytes again). A context
variable names the run being recorded: the upstream request is made from the task that writes
that run's frames.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
from ag_ui.core import RunAgentInput

# httpx's own decoders: the recording holds the bytes the bridge reads through them.
from bridge import __version__
from bridge.config import BridgeConfig
from bridge.core.upstream_url import shown_url
from bridge.serve.redact import Redactor, shown_target
from bridge.serve.upstream.recording import (
    CURRENT_RECORD,
    RecordingTransport,
    RunRecord,
    as_recorded,
)

FORMAT = "agui-bridge-record/2"
#: The formats ``agui-bridge replay`` reads: 1 kept compressed reads as they came.
READABLE_FORMATS = ("agui-bridge-record/1", FORMAT)


class Recorder:
    """Writes each run of one app to its own file in ``directory``."""

    def __init__(self, directory: str | Path, config: BridgeConfig, redactor: Redactor) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._redactor = redactor
        self._settings = recorded_settings(config)
        self._count = itertools.count(1)

    def wrap(self, inner: httpx.AsyncBaseTransport) -> RecordingTransport:
        """The upstream client's transport (each one it makes: direct, and per proxy from the
        environment), recorded for the run in progress."""
        return RecordingTransport(inner)

    @contextlib.contextmanager
    def run(
        self, run_input: RunAgentInput, recorded: dict[str, Any] | None = None
    ) -> Iterator[RunRecord]:
        """Record one run: the upstream exchanges made meanwhile in this task, and its events.
        ``recorded``: the input as ``recorded_input`` made it (else made here)."""
        started = datetime.now(UTC)
        safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_input.run_id)
        # The process id too: the workers of one bridge (serve --workers) share the folder.
        name = (
            f"{started:%Y%m%dT%H%M%S.%fZ}-{os.getpid()}-{next(self._count):04d}-"
            f"{safe_id[:80]}.jsonl"
        )
        record = RunRecord(self.directory / name, self._redactor)
        record.write(
            "run",
            format=FORMAT,
            bridge_version=__version__,
            started=started.isoformat().replace("+00:00", "Z"),
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            upstream_url=self._settings["upstream_url"],
            input=input_of(run_input) if recorded is None else recorded,
            config=self._settings,
        )
        token = CURRENT_RECORD.set(record)
        try:
            yield record
        finally:
            # Ended by the task that wrote the run's frames; ended elsewhere, the variable dies
            # with that task anyway.
            with contextlib.suppress(ValueError):
                CURRENT_RECORD.reset(token)
            record.close()


async def recorded_input(run_input: RunAgentInput) -> dict[str, Any]:
    """``input_of``, made in a worker thread: a big attachment's digest takes a while."""
    return await anyio.to_thread.run_sync(input_of, run_input)


def input_of(run_input: RunAgentInput) -> dict[str, Any]:
    """The run's input as its record's header holds it: camelCase, its attachments as their
    size and digest (``as_recorded``)."""
    dumped = run_input.model_dump(mode="json", by_alias=True, exclude_none=True)
    recorded: dict[str, Any] = as_recorded(dumped)
    return recorded


def recorded_settings(config: BridgeConfig) -> dict[str, Any]:
    """The bridge's settings as a record's header holds them: without the API key, the auth
    token and the interrupts' secret; the upstream URL and the MCP servers' URLs and command
    lines without credentials."""
    settings = dataclasses.asdict(config)
    settings.pop("api_key", None)
    settings.pop("auth_token", None)
    settings.pop("secret", None)
    settings["upstream_url"] = shown_url(config.upstream_url)
    settings["approval_store"] = shown_url(config.approval_store)
    settings["mcp_servers"] = {
        name: shown_target(target) for name, target in config.mcp_servers.items()
    }
    return settings
