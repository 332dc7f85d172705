"""The configuration file and Python tools from the command line (issue 43, points 2 and 3):
``serve --config bridge.toml`` (TOML, a key for every flag), flag > variable > file > default,
``agui-bridge config`` printing the effective settings with secrets masked and where each came
from, an unknown key or a wrong value stopping the start with the key and its line; ``--tools
package.module`` serving the functions of a module's ``__all__``. Real ``agui-bridge``
processes, a real scripted upstream."""

from __future__ import annotations

import argparse
import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from bridge.cli.layers import Settings, file_keys, key_of, layered, options
from bridge.cli.tomlfile import MAX_CONFIG_BYTES, line_of
from peers_config import ROOT, TOOLS_MODULE, command, environment, serving
from servers import post, run_input, serve

TOKEN = "tok-" + secrets.token_hex(16)
KEY = "sk-" + secrets.token_hex(16)
PASSWORD = "pw-" + secrets.token_hex(12)


def _pieces(secret: str) -> set[str]:
    return {secret[i : i + 8] for i in range(len(secret) - 7)}


def _settings(path: Path | None, environ: dict[str, str], *flags: str) -> Settings:
    from bridge.cli.parser import build_parser, parse

    extra = ["--config", str(path)] if path else []
    given = parse(build_parser(given_only=True), ["serve", *extra, *flags])
    return layered(given, environ)


def _other_value(action: argparse.Action) -> tuple[Any, Any]:
    """A value the file may give the flag that is not its default: as TOML holds it, and as
    the flag's parse leaves it."""
    if isinstance(action, argparse._StoreTrueAction):
        return True, True
    if isinstance(action, argparse._AppendAction):
        return ["x=y.z"], ["x=y.z"]
    if action.choices:
        other = next(c for c in action.choices if c != action.default)
        return other, other
    if action.type is int:
        return action.default + 1, action.default + 1
    if action.type is float:
        return action.default + 1.5, action.default + 1.5
    if key_of(action) in ("api-key-env", "secret-env"):
        return "SOME_VARIABLE", "SOME_VARIABLE"
    if key_of(action) == "workers":
        return 3, "3"
    return "given-text", "given-text"


def test_every_flag_has_its_key_and_the_file_says_where_each_came_from(tmp_path: Path) -> None:
    """Finding: no config file. Promise: every flag of ``serve`` (but ``--config`` and
    ``--print-config``, which are about the command) has a key of its name in the file, its
    value read as the flag's; each is said to come from its line."""
    by_key = {key_of(a): a for a in options()}
    lines, expected = ["# every key"], {}
    for key in file_keys():
        raw, parsed = _other_value(by_key[key])
        if key in ("state-schema", "record"):  # a relative path: from the file's folder
            raw, parsed = "sub/x", str(tmp_path / "sub/x")
        lines.append(f"{key} = {json.dumps(raw)}")
        expected[by_key[key].dest] = (parsed, f"{tmp_path / 'bridge.toml'}:{len(lines)}")
    (tmp_path / "bridge.toml").write_text("\n".join(lines) + "\n")
    settings = _settings(tmp_path / "bridge.toml", {})
    got = {dest: (getattr(settings.args, dest), settings.origins[dest]) for dest in expected}
    assert got == expected
    assert {"config", "print-config", "api-key", "help"}.isdisjoint(file_keys())
    assert {key_of(a) for a in options()} - set(file_keys()) == {
        "help",
        "config",
        "print-config",
        "api-key",
    }


def test_a_flag_beats_its_variable_which_beats_the_file_which_beats_the_default(
    tmp_path: Path,
) -> None:
    """Promise: precedence flag > ``AGUI_BRIDGE_*`` variable > file > default, each value's
    origin said; ``OPENAI_BASE_URL`` stands in for the default, below the file."""
    path = tmp_path / "bridge.toml"
    path.write_text('upstream-url = "http://file/v1"\nmax-tool-rounds = 5\napprove = ["a*"]\n')
    env = {"AGUI_BRIDGE_MAX_TOOL_ROUNDS": "6", "OPENAI_BASE_URL": "http://base/v1"}
    flagged = _settings(path, env, "--max-tool-rounds", "7", "--approve", "b*")
    assert (flagged.args.max_tool_rounds, flagged.origins["max_tool_rounds"]) == (
        7,
        "--max-tool-rounds",
    )
    assert flagged.args.approve == ["b*"]  # a repeatable flag replaces the file's, no merge
    by_variable = _settings(path, env)
    assert (by_variable.args.max_tool_rounds, by_variable.origins["max_tool_rounds"]) == (
        6,
        "AGUI_BRIDGE_MAX_TOOL_ROUNDS",
    )
    assert by_variable.args.upstream_url == "http://file/v1"  # the file over OPENAI_BASE_URL
    by_file = _settings(path, {})
    assert (by_file.args.max_tool_rounds, by_file.origins["max_tool_rounds"]) == (
        5,
        f"{path}:2",
    )
    path.write_text("")
    by_default = _settings(path, {"OPENAI_BASE_URL": "http://base/v1"})
    assert (by_default.args.max_tool_rounds, by_default.origins["max_tool_rounds"]) == (
        16,
        "default",
    )
    assert by_default.origins["upstream_url"] == "OPENAI_BASE_URL"


#: A file that holds a trap before each mistake: a multi-line string and an array whose lines
#: look like keys, a table, quoted and dotted keys.
TRAPS = '''# bridge
model = "m"
instructions = """
max-tool-rounds = "not a key: inside a string"
"""
approve = [
  "files__*",
]
'''


@pytest.mark.parametrize(
    ("mistake", "line", "says"),
    [
        ("max_tool_rounds = 3", 9, "unknown key 'max_tool_rounds' (did you mean max-tool-rounds?)"),
        ('max-tool-rounds = "3"', 9, "max-tool-rounds wants an integer, not a string"),
        ("\n\nshared-state = 1", 11, "shared-state wants true or false, not an integer"),
        ('"text-tool-format" = "bogus"', 9, "text-tool-format: invalid choice: 'bogus'"),
        ('approve = "files__*"', None, "approve wants an array of strings, not a string"),
        ("connect-timeout = 1e12", 9, "connect_timeout (connect-timeout at "),
        ("[agent]\nmodel = 'x'", 9, "unknown key 'agent'"),
        ("tools.x = 1", 9, "tools wants an array of strings, not a table"),
    ],
)
def test_an_unknown_key_or_a_wrong_value_stops_the_start_naming_the_key_and_its_line(
    tmp_path: Path, mistake: str, line: int | None, says: str
) -> None:
    """Finding: a mistyped key silently ignored would serve a different bridge. Promise: the
    start stops (exit status 2, one line, before anything listens) naming the key and the
    line it is on, found past multi-line values whose lines only look like keys; a value the
    flag would refuse is refused as the flag's."""
    path = tmp_path / "bridge.toml"
    path.write_text(TRAPS + mistake + "\n")
    if mistake.startswith("approve"):  # the key twice is TOML's own error, with its line
        path.write_text(TRAPS.replace('approve = [\n  "files__*",\n]\n', "") + mistake + "\n")
        line = 6
    done = command(
        "serve", "--config", str(path), "--upstream-url", "http://127.0.0.1:9/v1",
        cwd=tmp_path, env=environment(),
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done
    [said] = done.stderr.strip().split("\n")
    assert said.startswith("agui-bridge: ") and f"{path}:{line}" in said, said
    assert says in said, said


def test_line_of_finds_tables_dotted_and_quoted_keys_not_text_inside_values() -> None:
    """The line finder alone (``tomllib`` gives none): a key under its table, a dotted key, a
    quoted one, a table's header; never a line inside a multi-line string or array."""
    text = '''a = """
[agents.fake]
model = "inside"
"""
b = [
  "model = 'inside'",
]
[agents.main]
"model" = "x"
tools.extra = ["y"]
[agents. 'other' ]
instructions = 'z'
'''
    assert line_of(text, ("agents",)) == 8
    assert line_of(text, ("agents", "main", "model")) == 9
    assert line_of(text, ("agents", "main", "tools")) == 10
    assert line_of(text, ("agents", "other")) == 11
    assert line_of(text, ("agents", "other", "instructions")) == 12
    assert line_of(text, ("model",)) is None


def test_a_file_over_its_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Promise: a limit comes before the work it bounds. A sparse file of 64 GiB would take
    the machine's memory if it were read: its size refuses it first."""
    path = tmp_path / "huge.toml"
    with path.open("wb") as file:
        file.truncate(64 * 1024**3)
    done = command("config", "--config", str(path), cwd=tmp_path, env=environment())
    assert done.returncode == 2
    assert done.stderr.strip() == f"agui-bridge: {path}: over {MAX_CONFIG_BYTES} bytes"


def test_config_prints_the_effective_settings_with_every_secret_masked(tmp_path: Path) -> None:
    """Promise: ``agui-bridge config`` (and ``serve --print-config``) print every key with its
    value and origin, and no secret in any form: the token, the key, the interrupt secret,
    passwords and keys in URLs (the upstream's, the approval store's, an MCP server's)."""
    path = tmp_path / "bridge.toml"
    path.write_text(
        f'upstream-url = "http://me:{PASSWORD}@127.0.0.1:9/v1?api-key={PASSWORD}x"\n'
        'model = "m"\n'
        f'mcp = ["files=https://mcp.example/mcp?token={PASSWORD}y"]\n'
        f'approval-store = "redis://:{PASSWORD}z@127.0.0.1:6379/0"\n'
    )
    env = environment(
        AGUI_BRIDGE_AUTH_TOKEN=TOKEN, OPENAI_API_KEY=KEY, AGUI_BRIDGE_SECRET=KEY + "s"
    )
    for args in (["config", "--config", str(path)], ["serve", "--print-config"]):
        if args[0] == "serve":
            env["AGUI_BRIDGE_CONFIG"] = str(path)
        done = command(*args, cwd=tmp_path, env=env)
        out = done.stdout
        for secret in (TOKEN, KEY, PASSWORD):
            assert not any(piece in out for piece in _pieces(secret)), (secret, out)
        assert 'auth-token = "(hidden)"  # AGUI_BRIDGE_AUTH_TOKEN' in out
        assert f'model = "m"  # {path}:2' in out
        assert 'upstream-url = "http://127.0.0.1:9/v1"' in out
        assert "$OPENAI_API_KEY is set, its value is not shown" in out
        assert "max-tool-rounds = 16  # default" in out
        # Every key is there, once, as a setting or as a comment saying it is not set.
        said = re.findall(r"^(?:# )?([a-z-]+)(?: = |: not set)", out, re.MULTILINE)
        assert sorted(said) == sorted(file_keys())


def test_serve_from_a_file_runs_its_instructions_and_its_module_of_tools(tmp_path: Path) -> None:
    """Findings: no config file, no Python tools from the command line. Promise: ``serve
    --config bridge.toml`` serves the file's model, its instructions (``@FILE``, read from the
    file's folder) and the module it names in ``tools`` (imported from the working directory):
    its ``__all__``'s functions run as server tools, ``@requires_approval`` kept, the
    helper it does not name not offered."""
    (tmp_path / "my_tools.py").write_text(TOOLS_MODULE)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "prompt.md").write_text("You are the operator's agent.\n")
    upstream_app = create_scripted_upstream()
    with serve(upstream_app) as upstream:
        (tmp_path / "conf" / "bridge.toml").write_text(
            f'upstream-url = "{upstream}/v1"\n'
            f'model = "{DEFAULT_SCRIPTED_MODEL}"\n'
            'instructions = "@prompt.md"\n'
            'tools = ["my_tools"]\n'
        )
        with serving("--config", "conf/bridge.toml", cwd=tmp_path, env=environment()) as bridge:
            frames = post(f"{bridge.url}/agent", run_input(
                [{"id": "u1", "role": "user", "content": "Please get_weather"}]
            ))  # fmt: skip
            asked = post(f"{bridge.url}/agent", run_input(
                [{"id": "u1", "role": "user", "content": "Please delete_file"}]
            ))  # fmt: skip
        requests = upstream_app.state.requests
    results = [f["content"] for f in frames if f["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1 and "says the module" in results[0]
    assert asked[-1]["type"] == "RUN_FINISHED"
    assert asked[-1]["outcome"]["type"] == "interrupt"
    assert not [f for f in asked if f["type"] == "TOOL_CALL_RESULT"]
    first = requests[0]
    assert first["messages"][0] == {"role": "system", "content": "You are the operator's agent.\n"}
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert offered == {"get_weather", "delete_file"}


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("no_such_module_here", "--tools no_such_module_here: cannot import it: "
         "ModuleNotFoundError: No module named 'no_such_module_here'"),
        ("broken_tools", "--tools broken_tools: cannot import it: ZeroDivisionError: "
         "division by zero"),
        ("bare_tools", "--tools bare_tools: the module has no __all__"),
        ("odd_tools", "--tools odd_tools: 'LIMIT' in __all__ is not a function"),
    ],
)  # fmt: skip
def test_a_module_that_cannot_serve_stops_the_start_in_one_line(
    tmp_path: Path, module: str, says: str
) -> None:
    """Promise: ``--tools`` with a module that cannot be imported (missing, or failing as it
    runs), that has no ``__all__``, or whose ``__all__`` names what is not a function stops
    the start before anything listens: one line, exit status 2, no traceback."""
    (tmp_path / "broken_tools.py").write_text("__all__ = ['f']\n1 / 0\n")
    (tmp_path / "bare_tools.py").write_text("def f() -> str:\n    return 'x'\n")
    (tmp_path / "odd_tools.py").write_text("__all__ = ['LIMIT']\nLIMIT = 3\n")
    done = command(
        "serve", "--upstream-url", "http://127.0.0.1:9/v1", "--model", "m", "--port", "0",
        "--tools", module, cwd=tmp_path, env=environment(),
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    [said] = done.stderr.strip().split("\n")
    assert said.startswith(f"agui-bridge: {says}"), said


def test_the_readme_lists_every_key_of_the_file() -> None:
    """README "The configuration file" has one row per key, no more, no fewer."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The configuration file", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"^\| `([a-z-]+)` \|", section, re.MULTILINE)
    assert sorted(listed) == sorted(file_keys())
    assert len(listed) == len(set(listed))


def test_serve_print_config_prints_and_exits_without_serving(tmp_path: Path) -> None:
    """``serve --print-config`` prints the settings and exits 0, before it would listen."""
    done = command(
        "serve", "--print-config", "--model", "m", "--upstream-url", "http://127.0.0.1:9/v1",
        cwd=tmp_path, env=environment(),
    )  # fmt: skip
    assert done.returncode == 0
    assert 'model = "m"  # --model' in done.stdout
    assert "open http" not in done.stdout


def test_from_env_reads_the_file_its_variable_names_tools_and_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: ``bridge.app:from_env`` (under uvicorn, gunicorn, granian) reads the file
    ``AGUI_BRIDGE_CONFIG`` names as ``serve`` does, its ``tools`` among it; a file of several
    agents, which it cannot serve, is refused rather than half served."""
    from bridge.cli.settings import served_from_env

    monkeypatch.chdir(tmp_path)
    (tmp_path / "env_tools.py").write_text(TOOLS_MODULE)
    path = tmp_path / "bridge.toml"
    path.write_text(
        'upstream-url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        'instructions = "Be brief."\ntools = ["env_tools"]\n'
    )
    config, tools = served_from_env({"AGUI_BRIDGE_CONFIG": str(path)})
    assert config.instructions == "Be brief." and config.model == "m"
    assert [tool.__name__ for tool in tools] == ["get_weather", "delete_file"]
    path.write_text(path.read_text() + "[agents.a]\n")
    with pytest.raises(ValueError, match=r"serves one agent"):
        served_from_env({"AGUI_BRIDGE_CONFIG": str(path)})
