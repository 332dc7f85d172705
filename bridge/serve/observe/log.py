"""The run's log line: one per run, at INFO, on the ``agui_bridge.runs`` logger (README "One line
per run"), one per MCP App widget's proxied request, and ``JsonFormatter``, the form
``--log-format json`` gives every line of the log."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bridge.config import LogFormat
from bridge.core.oneline import json_line, needs_escape
from bridge.serve.observe.facts import RunFacts

#: One line per run, at INFO, on its own logger (route or silence it apart).
run_logger = logging.getLogger("agui_bridge.runs")


def log_run(
    run: RunFacts,
    duration: float,
    bytes_sent: int,
    redact: Callable[[str], str],
    log_format: LogFormat,
) -> None:
    """The run's line: its facts as ``key=value`` text, or one JSON object."""
    if not run_logger.isEnabledFor(logging.INFO):
        return
    ttft = run.time_to_first_token
    fields: dict[str, Any] = {
        "event": "run",
        "thread": redact(run.thread_id),
        "run": redact(run.run_id),
        "model": run.model,
        "protocol": run.protocol,
        "outcome": run.outcome,
        "code": run.code or None,
        "duration_ms": round(duration * 1000, 1),
        "ttft_ms": None if ttft is None else round(ttft * 1000, 1),
        "tokens_in": run.tokens["input"],
        "tokens_out": run.tokens["output"],
        "tokens_reasoning": run.tokens["reasoning"],
        "tool_calls": run.tool_calls,
        "upstream_requests": run.upstream_requests,
        "upstream_resends": run.upstream_resends,
        "state_updates": run.state_updates,
        "bytes_sent": bytes_sent,
        "pid": os.getpid(),  # the worker, with serve --workers
    }
    if log_format == "json":
        line = json_line(json.dumps(fields, ensure_ascii=False, separators=(",", ":")))
    else:
        line = "run " + " ".join(
            f"{key}={'-' if value is None else _quoted(value)}"
            for key, value in fields.items()
            if key != "event"
        )
    run_logger.info("%s", line, extra={"agui_run": fields})


def _quoted(value: object) -> str:
    """A value as the text line shows it: as it is, or as a JSON string when it is empty or
    holds a space, a quote, an ``=`` or anything ``one_line`` escapes."""
    text = str(value)
    if text and not needs_escape(text) and not any(c in text for c in ' "='):
        return text
    return json_line(json.dumps(text, ensure_ascii=False))


def log_proxied(server: str, method: str, outcome: str, duration: float) -> None:
    """An MCP App widget's request answered (a run of its own kind: no model, no turn)."""
    run_logger.info(
        "proxied MCP request server=%s method=%s outcome=%s duration_ms=%.1f",
        server,
        method,
        outcome,
        duration * 1000,
        extra={
            "agui_run": {
                "event": "proxied_mcp_request",
                "server": server,
                "method": method,
                "outcome": outcome,
                "duration_ms": round(duration * 1000, 1),
                "pid": os.getpid(),
            }
        },
    )


def log_thread(kind: str, thread_id: str, run_id: str, replayed: int) -> None:
    """A request of threads kept: a hydrate, a reconnect, a cancel, a run that ended with no
    client following it (``replayed``: the events sent again)."""
    run_logger.info(
        "thread %s thread=%s run=%s replayed=%d",
        kind,
        _quoted(thread_id),
        _quoted(run_id),
        replayed,
        extra={
            "agui_run": {
                "event": f"thread_{kind}",
                "thread_id": thread_id,
                "run_id": run_id,
                "replayed": replayed,
                "pid": os.getpid(),
            }
        },
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: ``time``, ``level``, ``logger``, then the run line's
    fields or the ``message`` (and its ``exception``). ``serve --log-format json`` puts it on
    every logger of the bridge's and uvicorn's. Nothing in it is raw that ends a line for
    anyone (``json_line``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()  # uvicorn's formats and colours do not apply

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        run = getattr(record, "agui_run", None)
        if isinstance(run, dict):
            fields.update(run)
        else:
            fields["message"] = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            fields["exception"] = record.exc_text
        return json_line(json.dumps(fields, ensure_ascii=False, default=str))
