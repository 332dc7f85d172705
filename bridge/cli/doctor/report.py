"""The doctor's report for people: a two-column table, the ``serve`` line and the warnings; or
one JSON object. Never with the key in it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from bridge.serve.redact import Redactor


def render_table(report: Mapping[str, Any]) -> str:
    """The report as a two-column table, the ``serve`` line and the warnings; for an unusable
    upstream, the probe that failed instead of what the others found, and no ``serve`` line."""
    models = report.get("models") or []
    shown = ", ".join(models[:4]) + (f", … ({len(models)} in all)" if len(models) > 4 else "")
    tags = report.get("reasoning_tags")
    rows = [
        ("upstream", report["upstream"]),
        ("server", report.get("server") or "(not told)"),
        ("models", shown or "(none listed)"),
        ("model probed", report.get("model") or "(none)"),
        ("usable", _yes(report.get("usable"))),
    ]
    failed = report.get("failed_probe")
    if failed:
        rows.append(("failed probe", f"{failed['probe']}: {failed['method']} {failed['path']}"))
    if report.get("suggested_upstream_url"):
        rows.append(("did you mean", f"--upstream-url {report['suggested_upstream_url']}"))
    if report.get("usable"):
        rows += [
            ("reasoning", report.get("reasoning")),
            ("reasoning_tags", f"{tags[0]} … {tags[1]}" if tags else "-"),
            *(
                [("reasoning_format", f"llama.cpp --reasoning-format {report['reasoning_format']}")]
                if report.get("reasoning_format")
                else []
            ),
            ("starts_in_reasoning", _yes(report.get("starts_in_reasoning"))),
            ("tool_calls", report.get("tool_calls")),
            ("usage", _yes(report.get("usage"))),
            ("responses_api", _yes(report.get("responses_api"))),
            ("reasoning_round_trip", report.get("reasoning_round_trip")),
            ("reasoning_scope", report.get("reasoning_scope_reason")),
            ("provider", f"{report.get('provider')} ({report.get('provider_reason')})"),
            ("attachments", report.get("attachments_reason")),
        ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
    if report.get("serve_command"):
        lines += ["", "serve it with:", f"  {report['serve_command']}"]
    warnings = report.get("warnings") or []
    if warnings:
        lines += ["", "warnings:", *(f"  - {warning}" for warning in warnings)]
    return "\n".join(lines)


def _yes(value: Any) -> str:
    return "yes" if value else "no"


def redacted_output(
    report: Mapping[str, Any], secrets: Iterable[str | None], *, as_json: bool
) -> str:
    """The report as printed: a table or one JSON object, never with a secret in it (the key,
    the upstream URL's password)."""
    text = json.dumps(report, ensure_ascii=False, indent=2) if as_json else render_table(report)
    return Redactor(secrets).redact(text)
