"""``agui-bridge config`` and ``serve --print-config``: the effective settings as a TOML file
would say them, each with where it came from, secrets masked."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from bridge.cli.layers import AGENTS, Settings, env_name, file_keys, key_of, options
from bridge.core.upstream_url import shown_url, url_secrets
from bridge.serve.redact import Redactor

#: Settings whose value is a secret: said to be set, never shown.
_SECRETS = frozenset({"auth_token"})
#: Settings that are URLs, which may carry a password or a key in their query.
_URLS = frozenset({"upstream_url", "approval_store", "threads"})
#: Settings that name a variable holding a secret: whether it is set is said, not its value.
_SECRET_VARIABLES = frozenset({"api_key_env", "secret_env"})


def printed(settings: Settings, environ: Mapping[str, str]) -> str:
    """One ``key = value  # origin`` line per key of the file (a comment for one unset), a
    valid ``bridge.toml`` once the masked secrets are put back. Every line is also redacted of
    the secrets the settings and their variables hold, in every encoding, as the bridge's own
    output is."""
    keys = set(file_keys())
    shown = [a for a in options() if key_of(a) in keys]
    lines = ["# agui-bridge serve: the effective settings (flag > variable > file > default)"]
    lines += [_line(a, settings, environ) for a in shown]
    for name, agent in settings.agents.items():  # what each agent's table sets
        lines += ["", f"[{AGENTS}.{name}]"]
        lines += [
            _line(a, agent, environ)
            for a in shown
            if agent.origins[a.dest] != settings.origins[a.dest]
        ]
    held = _secrets(settings.args, environ)
    for agent in settings.agents.values():
        held += _secrets(agent.args, environ)
    return Redactor(held).redact("\n".join(lines))


def _line(action: argparse.Action, settings: Settings, environ: Mapping[str, str]) -> str:
    """``key = value  # origin``, or a comment for a key not set."""
    key, value = key_of(action), getattr(settings.args, action.dest)
    origin = settings.origins[action.dest]
    if action.dest in _SECRET_VARIABLES and value:
        held = "set" if environ.get(value) else "not set"
        origin = f"{origin}; ${value} is {held}, its value is not shown"
    if value is None or value == []:
        return f"# {key}: not set ({origin})"
    if action.dest in _SECRETS:
        return f'{key} = "(hidden)"  # {origin}'
    return f"{key} = {_toml(_shown(action.dest, value))}  # {origin}"


def _shown(dest: str, value: Any) -> Any:
    if dest in _URLS:
        return shown_url(value)
    if dest == "mcp":  # NAME=URL: the URL as the bridge shows it
        return [_shown_mcp(entry) for entry in value]
    return value


def _shown_mcp(entry: str) -> str:
    name, _, target = entry.partition("=")
    return f"{name}={shown_url(target)}" if "://" in target else entry


def _toml(value: Any) -> str:
    """A value in TOML: JSON's strings, with DEL escaped too (TOML forbids it raw)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value).replace("\x7f", "\\u007f")
    return repr(value)


def _secrets(args: Any, environ: Mapping[str, str]) -> list[str | None]:
    """The secrets that settings hold or name, to be redacted from the printout."""
    secrets = [args.auth_token, environ.get(args.api_key_env), environ.get(args.secret_env)]
    secrets += [environ.get(env_name("--auth-token"))]
    for dest in _URLS:
        secrets += url_secrets(getattr(args, dest) or "")
    return secrets
