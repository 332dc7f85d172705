"""``serve``'s settings from four places, each above the next: the command line's flags, the
``AGUI_BRIDGE_*`` variables, the ``--config`` file (TOML), the defaults. Every flag of ``serve``
has its variable (``--max-tool-rounds`` → ``AGUI_BRIDGE_MAX_TOOL_ROUNDS``) and its key in the
file (``max-tool-rounds = 16``), derived from the one ``argparse`` table, so a new flag has
both; ``Settings.origins`` says where each value came from (``agui-bridge config``)."""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from bridge.cli.parser import Parser, add_serve_flags, given_parser, parse, serve_parser
from bridge.cli.tomlfile import TomlFile, read_toml

#: ``serve``'s flags in the environment: ``--flag-name`` is ``AGUI_BRIDGE_FLAG_NAME``.
ENV_PREFIX = "AGUI_BRIDGE_"
#: Stands in for ``--upstream-url``'s default, below the file: it is not the bridge's own
#: variable, and many a shell sets it for other tools.
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
#: Flags about the command itself, which no file sets (``--config`` has its variable).
_NOT_IN_FILE = frozenset({"help", "config", "print-config"})
_NOT_IN_ENVIRONMENT = frozenset({"help", "print-config"})
#: The file's table of agents: ``[agents.NAME]``, each served at ``/NAME/``.
AGENTS = "agents"
#: An agent's name, the first segment of its path.
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
#: Settings of the process, not of one agent: where it listens, its workers and logs, the
#: page, its shutdown, metrics and traces (one registry and one tracer per process).
PROCESS_KEYS = frozenset(
    {"host", "port", "log-level", "workers", "web-demo", "shutdown-grace", "log-format",
     "metrics", "metrics-public", "otel", "otel-content"}
)  # fmt: skip
#: Keys whose value is a path: a relative one is read from the file's folder.
_PATH_KEYS = frozenset({"state-schema", "record"})
#: Keys that take a string of the flag or an integer (``workers = 4`` or ``"auto"``).
_INTEGER_TOO = frozenset({"workers"})
#: Keys that take a JSON object's string or a TOML table (``[upstream-body]``).
_TABLE_TOO = frozenset({"upstream-body"})


@dataclass(frozen=True)
class Settings:
    """``serve``'s arguments, every one of them set, and where each came from: ``--flag``, a
    variable's name, ``FILE:LINE`` or ``default``."""

    args: argparse.Namespace
    origins: dict[str, str]
    agents: dict[str, Settings] = field(default_factory=dict)
    """The file's ``[agents.NAME]``, each the settings above with its table's over them (in
    ``args.agents`` too, by name, for ``serve --workers``'s processes)."""

    def explained(self, message: str, *, unset: str = "flag") -> str:
        """A message about flags (``BridgeConfig``'s, ``serve``'s), about where each was set:
        its variable, or its key and line in the file; one not set is named as a flag, or
        with ``unset="variable"`` as its variable (``bridge.app:from_env``)."""
        dests = {_flag(action): action.dest for action in options()}

        def named(found: re.Match[str]) -> str:
            flag = found.group()
            origin = self.origins.get(dests.get(flag, ""), "default")
            if origin.startswith(ENV_PREFIX) or origin == BASE_URL_VARIABLE:
                return origin
            if origin not in ("default", flag):
                return f"{flag.removeprefix('--')} at {origin}"
            return env_name(flag) if unset == "variable" else flag

        return re.sub(r"--[a-z][a-z-]*", named, message)


def env_name(flag: str) -> str:
    """The variable that stands for a flag of ``serve`` (``--max-tool-rounds`` →
    ``AGUI_BRIDGE_MAX_TOOL_ROUNDS``)."""
    return ENV_PREFIX + flag.removeprefix("--").replace("-", "_").upper()


def options() -> list[argparse.Action]:
    """``serve``'s flags, in ``--help``'s order (argparse lists its flags nowhere public)."""
    return [action for action in serve_parser()._actions if _flag(action)]


def key_of(action: argparse.Action) -> str:
    """A flag's key in the file: its name (``max-tool-rounds``)."""
    return _flag(action).removeprefix("--")


def file_keys() -> list[str]:
    """Every key the file may set (README "The configuration file" lists them)."""
    shown = [a for a in options() if a.help != argparse.SUPPRESS]  # not --api-key
    return [key_of(a) for a in shown if key_of(a) not in _NOT_IN_FILE]


def argv_from_env(environ: Mapping[str, str]) -> list[str]:
    """``serve``'s flags as the environment sets them: a switch is on with ``1``, ``true``,
    ``yes`` or ``on``; a repeatable flag takes a JSON array, or a comma-separated list."""
    argv: list[str] = []
    for action in options():
        flag = _flag(action)
        if key_of(action) in _NOT_IN_ENVIRONMENT:
            continue
        name = env_name(flag)
        value = environ.get(name)
        if value is None:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            if value.strip().lower() in _TRUE:
                argv.append(flag)
            elif value.strip().lower() not in _FALSE:
                raise ValueError(f"{name}={value!r}: say 1 or 0 (true/false, yes/no, on/off)")
        elif isinstance(action, argparse._AppendAction):
            argv.extend(f"{flag}={item}" for item in _list(name, value))
        else:
            argv.append(f"{flag}={value}")
    return argv


def layered(given: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """The settings: ``given`` (only the flags the command line set: ``given_parser``) over
    the variables in ``environ``, over the file that ``--config`` or ``AGUI_BRIDGE_CONFIG``
    names, over ``OPENAI_BASE_URL`` for the upstream, over the defaults. ``ValueError`` names
    a wrong variable, or a file's unknown key or wrong value with its line."""
    parser = _quiet_parser(_EnvironmentError)
    from_env = vars(parse(parser, argv_from_env(environ)))
    flags = {dest: value for dest, value in vars(given).items() if dest != "command"}
    path = flags.get("config", from_env.get("config"))
    (from_file, lines), agents = _from_file(read_toml(path)) if path else (({}, {}), {})
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for action in options():
        dest, flag = action.dest, _flag(action)
        if dest in flags:
            values[dest], origins[dest] = flags[dest], flag
        elif dest in from_env:
            values[dest], origins[dest] = from_env[dest], env_name(flag)
        elif dest in from_file:
            values[dest], origins[dest] = from_file[dest], lines[dest]
        elif dest == "upstream_url" and environ.get(BASE_URL_VARIABLE):
            values[dest], origins[dest] = environ[BASE_URL_VARIABLE], BASE_URL_VARIABLE
        else:
            values[dest], origins[dest] = action.default, "default"
    command = getattr(given, "command", "serve")
    # An agent's table over the settings above: the agents share what it does not set.
    served = {
        name: Settings(
            argparse.Namespace(**{**values, **own}, command=command, agents={}),
            {**origins, **where},
        )
        for name, (own, where) in agents.items()
    }
    args = argparse.Namespace(
        **values, command=command, agents={n: a.args for n, a in served.items()}
    )
    return Settings(args, origins, served)


class _EnvironmentError(Parser):
    """A parser whose errors name the variables, not the flags."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(variables_named(message))


class _FileError(Parser):
    """A parser whose errors are raised, to be named by the key and line."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message.partition(": ")[2] if message.startswith("argument ") else message)


def _quiet_parser(kind: type[Parser]) -> argparse.ArgumentParser:
    parser = kind(prog="agui-bridge", add_help=False)
    add_serve_flags(parser)
    return given_parser(parser)


def variables_named(message: str) -> str:
    """A message about flags, about the variables that stand for them."""
    return re.sub(r"--[a-z][a-z-]*", lambda m: env_name(m.group()), message)


#: A file's values by ``dest``, and the ``FILE:LINE`` of each.
_Read = tuple[dict[str, Any], dict[str, str]]


def _from_file(file: TomlFile) -> tuple[_Read, dict[str, _Read]]:
    """The file's settings, and each ``[agents.NAME]`` table's."""
    top = dict(file.data)
    agents = top.pop(AGENTS, {})
    if not isinstance(agents, dict) or not all(isinstance(t, dict) for t in agents.values()):
        raise ValueError(f"{file.where(AGENTS)}: {AGENTS} wants tables: [{AGENTS}.NAME]")
    tables = {}
    for name, table in agents.items():
        if not AGENT_NAME.match(name):
            raise ValueError(
                f"{file.where(AGENTS, name)}: an agent's name is 1-64 letters, digits, "
                f"'_' or '-' (its path), not {name!r}"
            )
        tables[name] = _read_table(file, table, (AGENTS, name), PROCESS_KEYS | _NOT_IN_FILE)
    return _read_table(file, top, (), _NOT_IN_FILE), tables


def _read_table(
    file: TomlFile, table: dict[str, Any], prefix: tuple[str, ...], refused: frozenset[str]
) -> _Read:
    actions = {key_of(a): a for a in options() if key_of(a) not in _NOT_IN_FILE}
    parser = _quiet_parser(_FileError)
    values: dict[str, Any] = {}
    lines: dict[str, str] = {}
    places = file.places([(*prefix, key) for key in table])
    for key, value in table.items():
        where = places[(*prefix, key)]
        action = actions.get(key)
        if key in PROCESS_KEYS and key in refused:
            raise ValueError(f"{where}: {key} is the process's: set it outside [{AGENTS}.*]")
        if action is None or key in refused:
            near = difflib.get_close_matches(key.replace("_", "-"), list(actions), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ValueError(f"{where}: unknown key {key!r}{hint}")
        problem = _type_problem(action, key, value)
        if problem is not None:
            raise ValueError(f"{where}: {key} {problem}")
        if isinstance(action, argparse._StoreTrueAction):
            values[action.dest] = value
        else:
            value = _relative_to(file.path.parent, key, value)
            if key in _TABLE_TOO and isinstance(value, dict):
                value = json.dumps(value)
            items = value if isinstance(value, list) else [value]
            try:
                read = parser.parse_args([f"{_flag(action)}={item}" for item in items])
            except ValueError as exc:
                raise ValueError(f"{where}: {key}: {exc}") from None
            values[action.dest] = getattr(read, action.dest)
        lines[action.dest] = where
    return values, lines


def _type_problem(action: argparse.Action, key: str, value: Any) -> str | None:
    """What is wrong with a TOML value's type for ``action`` (``None``: nothing)."""
    if isinstance(action, argparse._StoreTrueAction):
        wanted, ok = "true or false", isinstance(value, bool)
    elif isinstance(action, argparse._AppendAction):
        wanted = "an array of strings"
        ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
    elif action.type is int:
        wanted, ok = "an integer", isinstance(value, int) and not isinstance(value, bool)
    elif action.type is float:
        wanted = "a number"
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif key in _TABLE_TOO:
        wanted, ok = "a table or a string of JSON", isinstance(value, dict | str)
    elif key in _INTEGER_TOO:
        wanted = "an integer or a string"
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    else:
        wanted, ok = "a string", isinstance(value, str)
    return None if ok else f"wants {wanted}, not {_toml_kind(value)}"


def _toml_kind(value: Any) -> str:
    kinds: list[tuple[type, str]] = [(bool, "a boolean"), (int, "an integer"), (float, "a float")]
    kinds += [(str, "a string"), (list, "an array"), (dict, "a table")]
    return next((name for kind, name in kinds if isinstance(value, kind)), "a date or time")


def _relative_to(folder: Path, key: str, value: Any) -> Any:
    """A relative path in the file is read from the file's folder (a service's working
    directory is seldom its file's), as is ``instructions = "@FILE"``."""
    if key in _PATH_KEYS and not Path(value).expanduser().is_absolute():
        return str(folder / value)
    if key == "instructions" and value.startswith("@"):
        path = Path(value[1:]).expanduser()
        return value if path.is_absolute() else f"@{folder / path}"
    return value


def _flag(action: argparse.Action) -> str:
    return next((flag for flag in action.option_strings if flag.startswith("--")), "")


def _list(name: str, value: str) -> list[str]:
    if value.lstrip().startswith("["):
        try:
            items = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{name} is not a JSON array of strings: {exc}") from None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"{name} is not a JSON array of strings")
        return items
    return [item.strip() for item in value.split(",") if item.strip()]
