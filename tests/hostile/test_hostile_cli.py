"""The command and what it writes, against hostile clients, models and tool servers (issue 40,
findings 8, 10 and 11), with real ``agui-bridge`` processes on real sockets.

- Finding 8: every text from outside that the log or a trace carries (ids, a widget's log line,
  an MCP server's stderr, an upstream's error) is one line with its control characters escaped,
  redacted first; the user's words reach a span's status only with ``--otel-content``.
- Finding 10: a duration that is NaN, infinite or absurd stops the start with one line (from
  the flags, and from the variables under another server, where the worker exits with the
  status uvicorn and gunicorn read as "cannot start"); ``--workers`` leaves no folder behind
  however the bridge ends, killed included.
- Finding 11: no flag is read from a prefix of its name, ``--api-key`` is refused, and a key
  given where a variable's name belongs is never echoed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL, create_scripted_upstream
from bridge.core.oneline import json_line, one_line, say_refused
from helpers import worker_pids
from peers_cli import HOSTILE_TEXTS, PROMPT, unauthorized_upstream
from servers import post, run_input, serve

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = Path(sys.executable).parent
PEER = HERE / "peers_cli.py"
KEY = "sk-hostile-" + secrets.token_hex(16)
#: What no log line or span may carry raw: C0 but the line feed, DEL, C1, the line and
#: paragraph separators, the bidirectional overrides.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
#: uvicorn's text lines begin with the record's level.
LEVEL = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):\s")


def _pieces(secret: str) -> set[str]:
    return {secret[i : i + 8] for i in range(len(secret) - 7)}


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGUI_BRIDGE_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), str(ROOT / "tests")])
    env.update(extra)
    return env


@dataclass
class Bridge:
    process: subprocess.Popen[bytes]
    url: str = ""
    stderr: list[str] = field(default_factory=list)


@contextmanager
def bridge(
    upstream: str, *flags: str, env: dict[str, str] | None = None, session: bool = False
) -> Iterator[Bridge]:
    """``agui-bridge serve`` before ``upstream`` until it prints where it serves; stopped by
    SIGTERM after the block unless the test ended it."""
    command = [
        sys.executable, "-m", "bridge", "serve", "--upstream-url", f"{upstream}/v1",
        "--model", DEFAULT_SCRIPTED_MODEL, "--port", "0", *flags,
    ]  # fmt: skip
    # Bytes, decoded here: a text pipe would turn a raw CR into a line feed.
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env or _environment(),
        start_new_session=session,
    )
    made = Bridge(process)
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None and stderr is not None
    reader = threading.Thread(
        target=lambda: made.stderr.append(stderr.read().decode("utf-8", "surrogateescape"))
    )
    reader.start()
    try:
        opened = stdout.readline().decode()
        found = re.search(r"open (http://[\d.]+:\d+)/ ", opened)
        assert found, (opened, made.stderr)
        made.url = found.group(1)
        yield made
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)


def _widget_log(data: str) -> dict[str, Any]:
    request = {
        "serverId": "hostile",
        "method": "notifications/message",
        "params": {"level": "info", "data": data},
    }
    return run_input(threadId="widget", forwardedProps={"__proxiedMCPRequest": request})


def _hostile_request_line(url: str) -> None:
    """A request line with an ESC and a CR in its target, on a raw socket."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"GET /agent/health?\x1b[2J=\rFORGED HTTP/1.1\r\nHost: x\r\n\r\n")
        raw.recv(1024)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_hostile_text_is_one_escaped_line_per_record_and_still_redacted(log_format: str) -> None:
    """Finding 8: run and thread ids with CR, LF, ESC, U+2028, NEL, a bidi override, DEL and a
    C1 CSI, the same in a widget's log line, an MCP server's stderr and a request line: the log
    has one line per record, each starting with its level (or a JSON object), and nothing raw
    that ends a line or steers a terminal; the run line gives the ids back exactly (JSON), and
    the key inside them is redacted before they are escaped."""
    texts = [f"{text} {KEY}" for text in HOSTILE_TEXTS]
    mcp = f"hostile={sys.executable} {PEER}"
    env = _environment(OPENAI_API_KEY=KEY)
    flags = ("--log-format", log_format, "--mcp", mcp)
    with serve(create_scripted_upstream()) as upstream, bridge(upstream, *flags, env=env) as made:
        for index, text in enumerate(texts):
            frames = post(f"{made.url}/agent", run_input(threadId=text, runId=f"run{index}-{text}"))
            assert frames[-1]["type"] == "RUN_FINISHED"
            logged = post(f"{made.url}/agent", _widget_log(text))
            assert logged[-1]["result"] == {"success": True}
        _hostile_request_line(made.url)
    log = "".join(made.stderr)
    assert not RAW.findall(log), [line for line in log.split("\n") if RAW.search(line)]
    assert not [piece for piece in _pieces(KEY) if piece in log]
    lines = [line for line in log.split("\n") if line]
    wanted = [text.replace(KEY, "[redacted]") for text in texts]
    if log_format == "json":
        records = [json.loads(line) for line in lines]  # every line one JSON object
        runs = [record for record in records if record.get("event") == "run"]
        assert [run["thread"] for run in runs] == wanted
        assert [run["run"] for run in runs] == [f"run{i}-{t}" for i, t in enumerate(wanted)]
        messages = [record.get("message", "") for record in records]
    else:
        assert [line for line in lines if not LEVEL.match(line)] == []
        runs = [line for line in lines if " run thread=" in line]
        threads = [json.loads(_value(line, "thread")) for line in runs]
        assert threads == wanted  # exactly the ids, as JSON strings on the one line
        messages = lines
    widget = [m for m in messages if "[mcp-app hostile]" in m]
    stderr = [m for m in messages if "[mcp hostile]" in m]
    assert len(widget) == len(texts) and all("[redacted]" in line for line in widget)
    for escape in ("\\r", "\\x1b[2J", "\\n", "\\u2028", "\\x85", "\\u202e", "\\x7f", "\\x9b"):
        assert any(escape in line for line in widget), escape
    assert any("\\x1b[2J" in line for line in stderr) and any("\\u2028" in line for line in stderr)
    # A forged line exists only inside the record that carries it.
    forged = [m for m in messages if "FORGED" in m or "DEGROF" in m]
    assert all(re.search(r"\[mcp(-app)? hostile\]| run thread=", m) for m in forged), forged


def _value(line: str, key: str) -> str:
    """A value of the text run line: a word, or a JSON string."""
    found = re.search(rf' {key}=("(?:[^"\\]|\\.)*"|\S+)', line)
    assert found, line
    value = found.group(1)
    return value if value.startswith('"') else json.dumps(value)


def test_one_line_escapes_what_ends_a_line_or_steers_a_terminal_and_nothing_else() -> None:
    """Finding 8, the helper: each such character becomes a visible escape, the rest of the
    text (words of any script, emoji, backslashes) stays as it is, and escaping twice changes
    nothing; ``json_line`` keeps a JSON text the same value."""
    assert one_line("a\nb\rc\td\x1b[2J\x7f\x85\x9b\u2028\u2029\u202e\ud800") == (
        "a\\nb\\rc\\td\\x1b[2J\\x7f\\x85\\x9b\\u2028\\u2029\\u202e\\ud800"
    )
    kept = "Grüße, 你好, 🙂, C:\\path\\n, \u200d"
    assert one_line(kept) == kept
    assert one_line(one_line(HOSTILE_TEXTS[0])) == one_line(HOSTILE_TEXTS[0])
    for text in HOSTILE_TEXTS:
        encoded = json_line(json.dumps(text, ensure_ascii=False))
        assert json.loads(encoded) == text and not RAW.search(encoded)


@pytest.mark.parametrize("content", [False, True], ids=["without_content", "with_content"])
def test_a_span_carries_the_users_words_only_with_otel_content_and_in_one_line(
    content: bool,
) -> None:
    """Finding 8: an upstream that quotes the prompt in its error: without ``--otel-content``
    the chat span's status says the error's code and no span holds the prompt; with it, the
    status is the upstream's message, one escaped line. Hostile ids are one line on every
    span."""
    pytest.importorskip("opentelemetry.sdk")
    done = subprocess.run(
        [sys.executable, "-c", f"import peers_cli; peers_cli.traced_runs({content})"],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spans = {span["name"]: span for span in json.loads(done.stdout)}
    chat, run = spans["chat m"], spans["invoke_agent agui-bridge"]
    texts = [str(span["status"]) for span in spans.values()]
    texts += [str(value) for span in spans.values() for value in span["attributes"].values()]
    assert not [text for text in texts if RAW.search(text)]
    assert (
        run["attributes"]["gen_ai.conversation.id"] == "cr\\rINFO:     FORGED by a carriage return"
    )
    assert run["attributes"]["agui.run.id"] == "lf\\nINFO:     FORGED by a line feed"
    if content:
        assert chat["status"].startswith("cannot answer my diary says quetzalcoatlite esc\\x1b[2J")
    else:
        assert chat["status"] == "upstream_http_400"
        assert not [text for text in texts if PROMPT in text]


# --- finding 10: durations, from_env, --workers' folders -----------------------------------


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--keepalive-interval", "nan"),
        ("--approval-timeout", "nan"),
        ("--tool-timeout", "inf"),
        ("--shutdown-grace", "nan"),
        ("--shutdown-grace", "-inf"),
        ("--connect-timeout", "1e12"),
        ("--idle-timeout", "-1"),
    ],
)
def test_a_duration_that_is_nan_infinite_or_absurd_stops_the_start_in_one_line(
    flag: str, value: str
) -> None:
    """Finding 10: NaN passed every ``<= 0`` check and then cut every run; infinity and 1e12
    overflow what they reach. Each is refused before anything listens: one line naming the
    flag, exit status 2."""
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "serve", "--upstream-url", "http://127.0.0.1:9/v1",
         "--model", "m", "--port", "0", f"{flag}={value}"],
        capture_output=True, text=True, timeout=60, check=False, env=_environment(),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.strip().split("\n")
    assert line.startswith("agui-bridge: ") and flag in line and "a week" in line


@pytest.mark.parametrize(
    "server",
    [
        ["uvicorn", "bridge.app:from_env", "--factory", "--port", "0"],
        ["uvicorn", "bridge.app:from_env", "--factory", "--port", "0", "--workers", "2"],
        ["gunicorn", "-k", "uvicorn_worker.UvicornWorker", "-b", "127.0.0.1:0",
         "bridge.app:from_env()"],
    ],
    ids=["uvicorn", "uvicorn_workers", "gunicorn"],
)  # fmt: skip
def test_from_env_refuses_a_bad_variable_in_one_line_and_the_server_stops(
    server: list[str],
) -> None:
    """Finding 10: ``AGUI_BRIDGE_TOOL_TIMEOUT=nan`` under another server: one line naming the
    variable (no traceback), and the worker's exit status (3) makes the server stop instead of
    starting it again and again."""
    env = _environment(
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        AGUI_BRIDGE_MODEL="m",
        AGUI_BRIDGE_TOOL_TIMEOUT="nan",
    )
    done = subprocess.run(
        [str(BIN / server[0]), *server[1:]],
        capture_output=True, text=True, timeout=90, check=False, env=env,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    ours = {line for line in output.split("\n") if line.startswith("agui-bridge:")}
    assert ours == {
        "agui-bridge: tool_timeout (AGUI_BRIDGE_TOOL_TIMEOUT) must be a number of seconds "
        "above 0 up to 604800 (a week), not nan"
    }


class _Writes:
    """An unbuffered stderr (``python -u``, a spawned worker's): each ``write`` a write of its own."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_refusal_is_one_write_so_workers_refusing_at_once_keep_their_lines_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workers that refused together ran their lines into one ("…not nanagui-bridge: …"):
    ``print`` writes the text, then its newline, and on an unbuffered stderr each is a write of
    its own. The refusal, escaped to one line, is one write."""
    stderr = _Writes()
    monkeypatch.setattr(sys, "stderr", stderr)
    say_refused(ValueError("tool_timeout must be above 0,\nnot nan"))
    assert stderr.writes == ["agui-bridge: tool_timeout must be above 0,\\nnot nan\n"]


def _gone(pids: Sequence[int]) -> bool:
    """Whether every one of ``pids`` has ended (a zombie no init reaps counts as ended)."""
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            return False
    return True


def _wait_gone(pids: Sequence[int]) -> None:
    deadline = time.monotonic() + 60
    while not _gone(pids):
        assert time.monotonic() < deadline, f"workers {pids} still run"
        time.sleep(0.2)


def _scratch(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("agui-bridge"))


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP", "SIGKILL"])
def test_workers_leave_no_folder_behind_however_the_parent_ends(sig: str, tmp_path: Path) -> None:
    """Finding 10: ``serve --workers 2 --metrics`` makes its approval store and its metrics
    folder in a scratch folder; whether the parent is told to stop (SIGTERM, Ctrl-C, a hang-up)
    or killed (SIGKILL: it runs nothing), the folder is gone once its workers are."""
    env = _environment(TMPDIR=str(tmp_path))
    flags = ("--workers", "2", "--metrics")
    with serve(create_scripted_upstream()) as upstream, bridge(upstream, *flags, env=env) as made:
        workers = worker_pids(made.process.pid)
        assert len(workers) == 2
        assert _scratch(tmp_path)  # the approval store's and the metrics' folders
        post(f"{made.url}/agent", run_input())
        made.process.send_signal(getattr(signal, sig))
        made.process.wait(timeout=60)
        _wait_gone(workers)
    assert _scratch(tmp_path) == []


def test_a_bridge_killed_whole_is_swept_by_the_next_start(tmp_path: Path) -> None:
    """Finding 10: every process of the bridge killed at once (``kill -9`` of its group, the
    OOM killer of its cgroup) leaves its scratch folder; the next ``serve --workers`` on the
    machine removes it, and not the folder of a bridge that still runs."""
    env = _environment(TMPDIR=str(tmp_path))
    with serve(create_scripted_upstream()) as upstream:
        with bridge(upstream, "--workers", "2", env=env, session=True) as killed:
            workers = worker_pids(killed.process.pid)
            [left] = _scratch(tmp_path)
            os.killpg(killed.process.pid, signal.SIGKILL)
            killed.process.wait(timeout=30)
            _wait_gone(workers)
        assert _scratch(tmp_path) == [left]
        with bridge(upstream, "--workers", "2", env=env) as running:
            [made] = _scratch(tmp_path)
            assert made != left
            with bridge(upstream, "--workers", "2", env=env) as second:
                assert made in _scratch(tmp_path)  # the running bridge's folder stays
                post(f"{second.url}/agent", run_input())
            post(f"{running.url}/agent", run_input())
    assert _scratch(tmp_path) == []


# --- finding 11: --api-key --------------------------------------------------------------


@pytest.fixture(scope="module")
def refusing_upstream() -> Iterator[str]:
    with serve(unauthorized_upstream()) as url:
        yield url


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--api-key", KEY], "there is no --api-key"),
        (["serve", f"--api-key={KEY}"], "there is no --api-key"),
        (["serve", "--api-key-env", KEY], "--api-key-env: wants the name of an environment"),
        (["serve", "--api-key-e", KEY], "arguments: --api-key-e (1 value(s) not shown)"),
        (["serve", "--api-kye", KEY], "arguments: --api-kye (1 value(s) not shown)"),
        (["serve", "--secret-env", KEY], "--secret-env: wants the name of an environment"),
        (["doctor", "--api-key", KEY], "there is no --api-key"),
        (["doctor", "--api-key-env", KEY], "--api-key-env: wants the name of an environment"),
    ],
    ids=["api-key", "api-key=", "api-key-env", "prefix", "typo", "secret-env", "doctor",
         "doctor-api-key-env"],
)  # fmt: skip
def test_a_key_on_the_command_line_is_refused_and_never_echoed(
    argv: list[str], says: str, refusing_upstream: str
) -> None:
    """Finding 11: argparse took ``--api-key`` for ``--api-key-env``: ``serve`` started and
    sent no key, ``doctor`` printed the key as a variable's name. Now no flag is read from a
    prefix, there is no ``--api-key`` (a command line is every local user's to read), and a
    value that is not a variable's name is refused; none of them shows the key."""
    command, *rest = argv
    where = ["--upstream-url", f"{refusing_upstream}/v1", "--model", "m"]
    if command == "serve":
        where += ["--port", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "bridge", command, *where, *rest],
        capture_output=True, text=True, timeout=30, check=False, env=_environment(),
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert not [piece for piece in _pieces(KEY) if piece in output], output
    assert done.stdout == ""
    assert says in done.stderr.strip().split("\n")[-1]


def test_a_key_in_agui_bridge_api_key_is_refused_by_from_env_without_echoing_it() -> None:
    """Finding 11: the variable that would stand for ``--api-key`` is refused as the flag is
    (the key's variable is ``OPENAI_API_KEY``, or the one ``AGUI_BRIDGE_API_KEY_ENV`` names)."""
    env = _environment(
        OPENAI_BASE_URL="http://127.0.0.1:9/v1", AGUI_BRIDGE_MODEL="m", AGUI_BRIDGE_API_KEY=KEY
    )
    done = subprocess.run(
        [sys.executable, "-c", "from bridge.app import from_env; from_env()"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    [line] = done.stderr.strip().split("\n")
    assert "AGUI_BRIDGE_API_KEY" in line and "OPENAI_API_KEY" in line
    assert not [piece for piece in _pieces(KEY) if piece in line]


def test_the_key_goes_upstream_from_the_variable_api_key_env_names() -> None:
    """Finding 11, the way that stays: ``--api-key-env MY_KEY`` sends ``$MY_KEY``."""
    seen: list[str] = []
    app = create_scripted_upstream()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            seen.extend(v.decode() for k, v in scope["headers"] if k == b"authorization")
        await app(scope, receive, send)

    env = _environment(MY_KEY=KEY)
    with serve(recording) as upstream, bridge(upstream, "--api-key-env", "MY_KEY", env=env) as made:
        assert post(f"{made.url}/agent", run_input())[-1]["type"] == "RUN_FINISHED"
    assert seen == [f"Bearer {KEY}"]
