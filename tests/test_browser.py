"""The demo page in a real browser: ``tests/browser/demo.test.mjs`` drives Debian's Chromium.

This test builds the page when needed, starts five ``agui-bridge`` processes (a fast demo for
every scripted model, a slow one for live streaming and Stop, one between them for a plan whose
steps tick off about a second apart, ``serve --web-demo`` whose upstream is down and which wants
a token, for the error banners, and a fast demo with ``--metrics`` for the double-clicked
approvals, whose emails it counts, and ``--approve update_state`` for state edits that wait for a
person), runs the Node test against them and stops them. Node and Chromium are required, not optional: ``make test`` must
prove the page works.

A second test (``tests/browser/mcp_apps.test.mjs``) runs ``demo --mcp ui=<tests/mcp_ui_server.py>``:
the ``mcp-apps`` activity's card, and its widget opened in a sandboxed iframe through a proxied
run (the page's preview; full MCP App hosting is CopilotKit's, tests/test_copilotkit.py).

``AGUI_UPDATE_SCREENSHOT=1`` also copies the screenshots the test took to ``docs/demo.png`` and
``docs/demo-approval.png`` (an approval card), the ones the README shows.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest

from bridge.cli.demo.dialects import DEFAULT_SCRIPTED_MODEL
from bridge.cli.demo.server import create_scripted_upstream
from helpers import tool_call_counts
from node_tools import check_tap, npm_install, require, require_chromium, require_node, run, stop
from servers import free_port, serve

WHY = "the browser tests need Node.js 20 or newer with npm, and Chromium (`.ci/run` installs Chromium)"


ROOT = Path(__file__).resolve().parent.parent
WEB_DEMO = ROOT / "web-demo"
BROWSER_TESTS = ROOT / "tests" / "browser"
ARTIFACTS = ROOT / "tests" / "artifacts"
#: The screenshots the README shows, each from ARTIFACTS (with AGUI_UPDATE_SCREENSHOT=1).
DOCS_SCREENSHOTS = ("demo.png", "demo-approval.png")
#: What the browser test saves in ARTIFACTS: a finished conversation, on a laptop and a phone,
#: an approval card waiting for a person, and a plan and to-dos (the shared state's cards).
SCREENSHOTS = ("demo.png", "demo-phone.png", "demo-approval.png", "demo-state.png")
#: What the page is built from: when one is newer than the build, it is rebuilt.
WEB_DEMO_SOURCES = ("src", "index.html", "styles.css", "build.mjs", "package-lock.json")
#: Seconds between the scripted model's tokens: quick runs, and runs slow enough to stop.
FAST_PACE, SLOW_PACE = 0.002, 0.15
#: A pace at which the scripted plan ticks a step off about every second: each look of the steps
#: card stays long enough to be seen, and the whole plan takes some 5 s (35 s at SLOW_PACE).
STATE_PACE = 0.02
#: The approvals demo.test.mjs clicks twice (a double click, two fast clicks): one email each.
DOUBLE_CLICKED_APPROVALS = 2
#: What ``agui-bridge`` reads its --auth-token from.
AUTH_TOKEN_VARIABLE = "AGUI_BRIDGE_AUTH_TOKEN"


def test_demo_page_in_chromium() -> None:
    node = require_node(WHY)
    require_chromium()
    _build_web_demo()
    _npm_install(BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json")
    for name in SCREENSHOTS:
        (ARTIFACTS / name).unlink(missing_ok=True)

    with ExitStack() as stack:
        demo = stack.enter_context(_bridge("demo", "demo", "--pace", str(FAST_PACE)))
        slow = stack.enter_context(_bridge("slow-demo", "demo", "--pace", str(SLOW_PACE)))
        paced = stack.enter_context(_bridge("state-demo", "demo", "--pace", str(STATE_PACE)))
        # Nothing listens on a port that was free a moment ago.
        down_upstream = f"http://127.0.0.1:{free_port()}/v1"
        down_token = secrets.token_urlsafe(16)
        down = stack.enter_context(
            _bridge(
                "down",
                *("serve", "--web-demo", "--upstream-url", down_upstream, "--model", "x"),
                auth_token=down_token,
            )
        )
        once = stack.enter_context(
            _bridge(
                "once-demo",
                *("demo", "--pace", str(FAST_PACE), "--metrics", "--approve", "update_state"),
            )
        )
        env = {
            **os.environ,
            "DEMO_URL": demo,
            "SLOW_DEMO_URL": slow,
            "STATE_DEMO_URL": paced,
            "DOWN_URL": down,
            "DOWN_TOKEN": down_token,
            "ONCE_DEMO_URL": once,
            "ARTIFACTS_DIR": str(ARTIFACTS),
        }
        output = run(
            [node, "--test", "--test-reporter=tap", "demo.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=300,
            what="the browser test",
        )
        emails = _emails(once)

    check_tap(output, "the browser test")
    # Two approvals clicked twice each (a double click, two fast clicks): two emails in all;
    # whatever the page sent beyond one resume each was answered as already run.
    assert emails.get("ok") == DOUBLE_CLICKED_APPROVALS, emails
    resumes = [int(n) for n in re.findall(r"^# the page sent (\d+) resume", output, re.MULTILINE)]
    assert len(resumes) == DOUBLE_CLICKED_APPROVALS, output
    assert emails.get("already_run", 0) == sum(resumes) - DOUBLE_CLICKED_APPROVALS, emails

    for name in SCREENSHOTS:
        assert (ARTIFACTS / name).stat().st_size > 10_000, f"no screenshot {name}"
    if os.environ.get("AGUI_UPDATE_SCREENSHOT") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        for name in DOCS_SCREENSHOTS:
            shutil.copyfile(ARTIFACTS / name, ROOT / "docs" / name)


#: The card of an MCP App, its widget open (tests/browser/mcp_apps.test.mjs).
MCP_APP_SCREENSHOT = "demo-mcp-app.png"


def test_demo_page_shows_an_mcp_app_in_chromium() -> None:
    """The page shows the ``mcp-apps`` activity of tests/mcp_ui_server.py's ``board`` as a card
    (server, resource, the tool's input and result) whose "Open widget" reads the ui://
    resource through a proxied run and shows it in a sandboxed iframe."""
    pytest.importorskip("mcp")
    from mcp_ui_server import HTML

    node = require_node(WHY)
    require_chromium()
    _build_web_demo()
    _npm_install(BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json")
    (ARTIFACTS / MCP_APP_SCREENSHOT).unlink(missing_ok=True)

    server = f"ui={sys.executable} {ROOT / 'tests' / 'mcp_ui_server.py'}"
    with _bridge("mcp-apps", "demo", "--mcp", server) as url:
        env = {**os.environ, "DEMO_URL": url, "WIDGET_HTML": HTML, "ARTIFACTS_DIR": str(ARTIFACTS)}
        output = run(
            [node, "--test", "--test-reporter=tap", "mcp_apps.test.mjs"],
            cwd=BROWSER_TESTS,
            env=env,
            timeout=180,
            what="the browser test",
        )

    check_tap(output, "the browser test")
    assert (ARTIFACTS / MCP_APP_SCREENSHOT).stat().st_size > 10_000, "no screenshot"


#: The bridge's --max-attachment-bytes in the attachments test's second demo: over the test
#: image, under the test PDF (tests/browser/attachments.mjs).
ATTACHMENT_LIMIT = 8 * 1024


def test_demo_page_attachments_in_chromium() -> None:
    """Issue 41, point 6: the paperclip attaches an image, a PDF, a text file and an audio clip
    (``tests/browser/demo-attachments.test.mjs``): chips before sending and in the sent message,
    the page's size limit said, the files sent as AG-UI 1.0 parts, and the scripted model's
    answer names each as its server received it; a file the bridge refuses
    (``--max-attachment-bytes``) shows the bridge's reason and code in the banner."""
    node = require_node(WHY)
    require_chromium()
    _build_web_demo()
    _npm_install(BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json")
    limit = str(ATTACHMENT_LIMIT)
    with (
        _bridge("attachments", "demo", "--pace", str(FAST_PACE)) as url,
        _bridge("small-attachments", "demo", "--max-attachment-bytes", limit) as small,
    ):
        output = run(
            [node, "--test", "--test-reporter=tap", "demo-attachments.test.mjs"],
            cwd=BROWSER_TESTS,
            env={**os.environ, "DEMO_URL": url, "SMALL_URL": small, "SMALL_LIMIT": limit},
            timeout=180,
            what="the attachments browser test",
        )
    check_tap(output, "the attachments browser test", 3)


#: The threads test's slow pace: an answer (reasoning, then text) takes some 8 s, time to reload
#: the page or press Stop in the middle of it.
THREADS_PACE = 0.1


def test_demo_page_asks_the_user_in_chromium() -> None:
    """Issue 43, point 4: the scripted model's ``ask_user`` call shows a form made from its
    schema (a date, a choice, a bounded number) that sends nothing incomplete; the answer
    resumes the run once, and the model quotes it; an answer the bridge refuses
    (``answer_invalid``, the request altered on its way) shows its reason on the form, which asks
    again for the same interrupt (``tests/browser/demo-ask.test.mjs``)."""
    node = require_node(WHY)
    require_chromium()
    _build_web_demo()
    _npm_install(BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json")
    with _bridge("ask", "demo", "--pace", str(FAST_PACE)) as demo:
        output = run(
            [node, "--test", "--test-reporter=tap", "demo-ask.test.mjs"],
            cwd=BROWSER_TESTS,
            env={**os.environ, "DEMO_URL": demo, "ARTIFACTS_DIR": str(ARTIFACTS)},
            timeout=300,
            what="the browser test",
        )
    check_tap(output, "the browser test")


def test_demo_page_threads_in_chromium() -> None:
    """Issue 42, point 7: the demo page keeps its threads (``tests/browser/demo-threads.test.mjs``).
    Two threads listed with their titles, newest first, each shown again when switched to (by
    click and by keyboard) and one forgotten; a reload in the middle of an answer hydrates the
    thread and follows the run to its end, the answer equal to one with no reload, once; Stop
    cancels the run in the bridge (``RUN_FINISHED`` outcome cancelled, ``running`` null), the
    partial answer kept by the page and the thread alike; and ``serve --web-demo`` without
    ``--threads`` shows no list and makes no thread request."""
    node = require_node(WHY)
    require_chromium()
    _build_web_demo()
    _npm_install(BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json")
    with (
        _bridge("threads", "demo", "--pace", str(FAST_PACE)) as fast,
        _bridge("slow-threads", "demo", "--pace", str(THREADS_PACE)) as slow,
        serve(create_scripted_upstream(pace=FAST_PACE)) as upstream,
        _bridge(
            "no-threads",
            *(
                "serve",
                "--web-demo",
                "--upstream-url",
                f"{upstream}/v1",
                "--model",
                DEFAULT_SCRIPTED_MODEL,
            ),
        ) as plain,
    ):
        output = run(
            [node, "--test", "--test-reporter=tap", "demo-threads.test.mjs"],
            cwd=BROWSER_TESTS,
            env={**os.environ, "DEMO_URL": fast, "SLOW_DEMO_URL": slow, "PLAIN_URL": plain},
            timeout=240,
            what="the threads browser test",
        )
    check_tap(output, "the threads browser test", 4)


def test_demo_page_talks_to_either_agent_in_chromium(tmp_path: Path) -> None:
    """Issue 43, "done when": one ``bridge.toml`` with two agents, their instructions and (for
    one) ``ask_user``, served by ``agui-bridge serve --config bridge.toml --web-demo``: the page
    lists both (``GET /agents``), talks to the first, then to the one picked, whose question it
    shows as a form and answers (``tests/browser/demo-agents.test.mjs``); each agent's requests
    upstream begin with its own instructions."""
    node = require_node(WHY)
    require_chromium()
    _build_web_demo()
    _npm_install(BROWSER_TESTS, BROWSER_TESTS / "node_modules" / "playwright-core" / "package.json")
    upstream_app = create_scripted_upstream(pace=FAST_PACE)
    with serve(upstream_app) as upstream:
        config = tmp_path / "bridge.toml"
        config.write_text(
            f'upstream-url = "{upstream}/v1"\n'
            f'model = "{DEFAULT_SCRIPTED_MODEL}"\n'
            "[agents.sales]\n"
            'instructions = "You are the sales desk."\n'
            "[agents.support]\n"
            'instructions = "You are the support desk."\n'
            "ask-user = true\n"
        )
        with _bridge(
            "agents", "serve", "--config", str(config), "--web-demo", health="sales/health"
        ) as url:
            listed = httpx.get(f"{url}agents").json()
            output = run(
                [node, "--test", "--test-reporter=tap", "demo-agents.test.mjs"],
                cwd=BROWSER_TESTS,
                env={**os.environ, "AGENTS_URL": url},
                timeout=240,
                what="the agents browser test",
            )
    check_tap(output, "the agents browser test")
    assert listed == {
        "agents": [{"name": "sales", "path": "/sales"}, {"name": "support", "path": "/support"}]
    }
    firsts = [request["messages"][0] for request in upstream_app.state.requests]
    assert firsts[0] == {"role": "system", "content": "You are the sales desk."}
    assert firsts[1:] == [{"role": "system", "content": "You are the support desk."}] * 2


@contextmanager
def _bridge(
    name: str, *args: str, auth_token: str | None = None, health: str = "agent/health"
) -> Iterator[str]:
    """``python -m bridge <args>`` on a free port until the block ends; yields its base URL.

    It requires ``auth_token`` when one is given, and only then, whatever the environment says.
    Its output goes to ``tests/artifacts/bridge-<name>.log``.
    """
    port = free_port()
    command = [sys.executable, "-m", "bridge", *args, "--port", str(port), "--log-level", "warning"]
    env = {key: value for key, value in os.environ.items() if key != AUTH_TOKEN_VARIABLE}
    if auth_token is not None:
        env[AUTH_TOKEN_VARIABLE] = auth_token
    with _log_file(f"bridge-{name}.log") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}/"
            _wait_until_serving(process, url, log, health)
            yield url
        finally:
            stop(process)


@contextmanager
def _log_file(name: str) -> Iterator[IO[bytes]]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / name).open("w+b") as log:
        yield log


def _wait_until_serving(
    process: subprocess.Popen[bytes], url: str, log: IO[bytes], health: str
) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            output = log.read().decode(errors="replace")
            pytest.fail(
                f"{process.args} exited with {process.returncode}:\n{output}", pytrace=False
            )
        try:
            if httpx.get(f"{url}{health}", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{process.args} did not answer at {url} within 30 s", pytrace=False)


def _build_web_demo() -> None:
    """Builds the page (into bridge/web/) when it is missing or older than what it is built from."""
    built = ROOT / "bridge" / "web" / "index.html"
    if built.is_file() and _newest(WEB_DEMO / name for name in WEB_DEMO_SOURCES) <= (
        built.stat().st_mtime
    ):
        return
    _npm_install(WEB_DEMO, WEB_DEMO / "node_modules" / "esbuild" / "package.json")
    run(
        [_require("npm"), "run", "build"], cwd=WEB_DEMO, env=None, timeout=300, what="npm run build"
    )


def _newest(paths: Iterator[Path]) -> float:
    return max(
        file.stat().st_mtime
        for path in paths
        for file in ([path] if path.is_file() else path.rglob("*"))
        if file.is_file()
    )


def _npm_install(directory: Path, marker: Path) -> None:
    npm_install(directory, marker, WHY)


def _require(program: str) -> str:
    return require(
        program,
        "the browser tests need Node.js 20 or newer with npm, and Chromium (`.ci/run` installs Chromium)",
    )


def _emails(url: str) -> dict[str, float]:
    """send_email's calls by outcome, from the demo's GET /metrics."""
    return tool_call_counts(
        httpx.get(f"{url}metrics", timeout=5).raise_for_status().text, "send_email"
    )
