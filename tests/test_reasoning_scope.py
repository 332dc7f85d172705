"""``--reasoning-scope auto`` (the default) over real HTTP: llama.cpp's ``/props`` says whether
its chat template keeps earlier turns' reasoning, and the history sent upstream follows it;
read per model, cached, read again after the TTL and after the upstream failed or restarted;
explicit scopes never read it. Against a small llama.cpp-like upstream whose ``/props`` the
tests change (``bridge/serve/run/props.py``)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agui_rules import check_frames, parse_body
from bridge.cli.doctor import diagnose, render_table
from bridge.cli.parser import build_parser
from bridge.cli.replay import create_replay_app, load_recording, serve_command
from bridge.cli.settings import config_from_env, serve_config
from bridge.config import BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.http.bridge import Bridge
from bridge.serve.run.props import PROPS_RETRY, PROPS_TTL
from servers import free_port, post, run_input, serve

#: A finished turn (its reasoning, its answer), then a tool loop in progress: its reasoning
#: goes back under every scope but ``last``'s other turns; the first turn's only under ``all``.
HISTORY: list[dict[str, Any]] = [
    {"id": "u1", "role": "user", "content": "Hi"},
    {"id": "r1", "role": "reasoning", "content": "A greeting: greet back."},
    {"id": "a1", "role": "assistant", "content": "Hello!"},
    {"id": "u2", "role": "user", "content": "Weather in Paris?"},
    {"id": "r2", "role": "reasoning", "content": "I call get_weather."},
    {
        "id": "a2",
        "role": "assistant",
        "toolCalls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"id": "t1", "role": "tool", "toolCallId": "call_1", "content": "18 C"},
]
FIRST_TURN = "A greeting: greet back."
IN_PROGRESS = "I call get_weather."


@dataclass
class LlamaLike:
    """What the upstream's ``/props`` says, by the ``model`` asked (``*``: any, as a
    single-model llama-server, which ignores the query): ``True``/``False`` for
    ``supports_preserve_reasoning``, ``None`` for caps without it, an ``int`` for that HTTP
    status, a ``str`` for that page (not JSON). It notes every chat body and ``/props`` query."""

    props: dict[str, bool | int | str | None] = field(default_factory=lambda: {"*": True})
    props_delay: float = 0.0
    props_gate: threading.Event | None = None  # /props answers once the test sets it
    props_answered: int = 0
    chat_failures: int = 0  # chat requests answered 503 "Loading model" before answering
    chats: list[dict[str, Any]] = field(default_factory=list)
    props_asked: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/props", self._props),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )

    async def _props(self, request: Request) -> Response:
        query = dict(request.query_params)
        self.props_asked.append(query)
        await asyncio.sleep(self.props_delay)
        if self.props_gate is not None:
            await asyncio.to_thread(self.props_gate.wait, 30)
        self.props_answered += 1
        said = self.props.get(query.get("model", ""), self.props.get("*"))
        if isinstance(said, str):
            return Response(said, media_type="text/html")
        if isinstance(said, int) and not isinstance(said, bool):
            return JSONResponse({"error": {"message": "Loading model", "code": said}}, said)
        caps: dict[str, Any] = {"supports_tools": True}
        if said is not None:
            caps["supports_preserve_reasoning"] = said
        return JSONResponse({"build_info": "b0-test", "chat_template_caps": caps})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        if self.chat_failures:
            self.chat_failures -= 1
            return JSONResponse({"error": {"message": "Loading model", "code": 503}}, 503)
        self.chats.append(body)
        chunks = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Sunny."}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        sse = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return Response(sse, media_type="text/event-stream")


class Clock:
    """The props cache's clock, moved by the test instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    upstream: LlamaLike
    bridge_url: str
    bridge: Bridge
    clock: Clock

    def run(self, model: str | None = None) -> list[str | None]:
        """One run of ``HISTORY``: the reasoning each assistant message carried upstream."""
        props = {"model": model} if model else {}
        frames = post(f"{self.bridge_url}/", run_input(HISTORY, forwardedProps=props))
        assert frames[-1]["type"] == "RUN_FINISHED", frames[-1]
        sent = self.upstream.chats[-1]["messages"]
        return [m.get("reasoning_content") for m in sent if m["role"] == "assistant"]


def _config(upstream_url: str, **overrides: Any) -> BridgeConfig:
    config = BridgeConfig(upstream_url=f"{upstream_url}/v1", model="m", idle_timeout=30)
    return replace(config, **overrides)


@contextmanager
def llama_stack(upstream: LlamaLike | None = None, **overrides: Any) -> Iterator[Setup]:
    """The llama.cpp-like upstream and a bridge in front of it (``overrides``: its config),
    whose props cache runs on a ``Clock`` of the test's."""
    upstream = upstream or LlamaLike()
    with serve(upstream.app()) as upstream_url:
        app = create_app(_config(upstream_url, **overrides))
        bridge: Bridge = app.state.bridge
        clock = Clock()
        bridge.upstream_props.clock = clock
        with serve(app) as bridge_url:
            yield Setup(upstream, bridge_url, bridge, clock)


# --- what auto sends ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "carried"),
    [
        pytest.param(True, [FIRST_TURN, IN_PROGRESS], id="preserves"),
        pytest.param(False, [None, IN_PROGRESS], id="drops"),
        pytest.param(None, [None, IN_PROGRESS], id="caps-without-the-field"),
        pytest.param(404, [None, IN_PROGRESS], id="no-props"),
        pytest.param("<html>a page</html>", [None, IN_PROGRESS], id="not-json"),
        pytest.param(503, [None, IN_PROGRESS], id="props-failing"),
    ],
)
def test_auto_sends_earlier_turns_reasoning_only_when_the_template_keeps_it(
    said: bool | int | str | None, carried: list[str | None]
) -> None:
    with llama_stack(LlamaLike(props={"*": said})) as setup:
        assert setup.bridge.config.reasoning_scope == "auto"  # the default
        assert setup.run() == carried
        assert setup.upstream.props_asked == [{"model": "m", "autoload": "false"}]


def test_nothing_listening_is_the_runs_own_error_only() -> None:
    """The GET fails and the run goes on to say why: its POST fails the same way."""
    config = _config(f"http://127.0.0.1:{free_port()}", retries=0)
    with serve(create_app(config)) as bridge_url:
        frames = _frames(bridge_url)
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "upstream_unreachable"


def _frames(bridge_url: str) -> list[dict[str, Any]]:
    """One run of ``HISTORY``, whatever its end."""
    response = httpx.post(f"{bridge_url}/", json=run_input(HISTORY), timeout=30)
    return check_frames(parse_body(response.text))


@pytest.mark.parametrize(
    ("scope", "said", "carried"),
    [
        ("all", False, [FIRST_TURN, IN_PROGRESS]),
        ("current-turn", True, [None, IN_PROGRESS]),
        ("last", True, [None, IN_PROGRESS]),
    ],
)
def test_an_explicit_scope_never_reads_props(
    scope: str, said: bool, carried: list[str | None]
) -> None:
    with llama_stack(LlamaLike(props={"*": said}), reasoning_scope=scope) as setup:
        assert setup.run() == carried
        assert setup.upstream.props_asked == []


def test_the_responses_api_reads_no_props() -> None:
    """Its reasoning goes back as encrypted items whatever the scope: nothing to resolve."""
    with llama_stack(upstream_api="responses") as setup:
        assert _frames(setup.bridge_url)[-1]["type"] == "RUN_ERROR"  # no /v1/responses here
        assert setup.upstream.props_asked == []


# --- the cache --------------------------------------------------------------------------------


def test_many_runs_make_one_get_and_the_ttl_reads_it_again() -> None:
    upstream = LlamaLike(props={"*": True}, props_delay=0.3)
    with llama_stack(upstream) as setup:
        with ThreadPoolExecutor(20) as pool:  # together: they share the one GET in flight
            carried = list(pool.map(lambda _: setup.run(), range(20)))
        assert carried == [[FIRST_TURN, IN_PROGRESS]] * 20
        assert len(upstream.props_asked) == 1
        upstream.props = {"*": False}  # restarted with another model, say
        setup.clock.now += PROPS_TTL - 1
        assert setup.run() == [FIRST_TURN, IN_PROGRESS]  # still fresh: no GET
        assert len(upstream.props_asked) == 1
        setup.clock.now += 2
        assert setup.run() == [None, IN_PROGRESS]
        assert len(upstream.props_asked) == 2


def test_a_failed_read_is_current_turn_for_a_few_seconds_then_tried_again() -> None:
    upstream = LlamaLike(props={"*": 503})  # llama.cpp loading its model
    with llama_stack(upstream) as setup:
        assert setup.run() == [None, IN_PROGRESS]
        upstream.props = {"*": True}
        setup.clock.now += PROPS_RETRY - 1
        assert setup.run() == [None, IN_PROGRESS]
        assert len(upstream.props_asked) == 1
        setup.clock.now += 2
        assert setup.run() == [FIRST_TURN, IN_PROGRESS]
        assert len(upstream.props_asked) == 2


def test_a_restart_on_the_same_port_is_read_again_at_once() -> None:
    """The upstream stops: a run fails to reach it, which drops the cache; it comes back on the
    same port with a template that drops reasoning: the next run reads /props again."""
    port = free_port()
    upstream = LlamaLike(props={"*": True})
    config = _config(f"http://127.0.0.1:{port}", retries=0)
    app = create_app(config)
    bridge: Bridge = app.state.bridge
    bridge.upstream_props.clock = Clock()  # never moves: only the failure can make it read again
    with serve(app) as bridge_url:
        setup = Setup(upstream, bridge_url, bridge, bridge.upstream_props.clock)
        with serve(upstream.app(), port=port):
            assert setup.run() == [FIRST_TURN, IN_PROGRESS]
        assert _frames(bridge_url)[-1]["code"] == "upstream_unreachable"
        upstream.props = {"*": False}
        with serve(upstream.app(), port=port):
            assert setup.run() == [None, IN_PROGRESS]
    assert len(upstream.props_asked) == 2


def test_a_run_that_had_to_retry_drops_the_cache() -> None:
    """llama.cpp restarting answers 503 "Loading model": the run retries and gets its answer,
    and the next run reads /props again (the server may have come back with another model)."""
    upstream = LlamaLike(props={"*": True})
    with llama_stack(upstream, retries=1, retry_backoff=0.01) as setup:
        assert setup.run() == [FIRST_TURN, IN_PROGRESS]
        upstream.chat_failures = 1
        upstream.props = {"*": False}
        assert setup.run() == [FIRST_TURN, IN_PROGRESS]  # resolved before the 503
        assert setup.run() == [None, IN_PROGRESS]
        assert len(upstream.props_asked) == 2


def test_each_model_is_read_apart_as_llama_cpp_router_serves_them() -> None:
    """The router answers /props?model=NAME for that model, and bare /props for itself (no
    template caps)."""
    upstream = LlamaLike(props={"glm": True, "qwq": False, "": None})
    with llama_stack(upstream, model="glm", models=("qwq",)) as setup:
        assert setup.run("glm") == [FIRST_TURN, IN_PROGRESS]
        assert setup.run("qwq") == [None, IN_PROGRESS]
        assert setup.run("glm") == [FIRST_TURN, IN_PROGRESS]
        assert setup.run() == [FIRST_TURN, IN_PROGRESS]  # the default model: glm
    assert upstream.props_asked == [
        {"model": "glm", "autoload": "false"},
        {"model": "qwq", "autoload": "false"},
    ]


# --- what it shows --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "said", "shown"),
    [
        ("auto", True, {"reasoningScope": "auto", "reasoningScopeResolved": "all"}),
        ("auto", False, {"reasoningScope": "auto", "reasoningScopeResolved": "current-turn"}),
        ("auto", 404, {"reasoningScope": "auto", "reasoningScopeResolved": "current-turn"}),
        ("all", False, {"reasoningScope": "all"}),
    ],
)
def test_capabilities_show_the_setting_and_what_auto_resolves_to(
    scope: str, said: bool | int, shown: dict[str, str]
) -> None:
    with llama_stack(LlamaLike(props={"*": said}), reasoning_scope=scope) as setup:
        custom = httpx.get(f"{setup.bridge_url}/capabilities").json()["custom"]
    assert {k: v for k, v in custom.items() if k.startswith("reasoningScope")} == shown
    if said == 404:
        assert "llamaCpp" not in custom
    else:
        assert custom["llamaCpp"] == {"supportsPreserveReasoning": said}


@pytest.mark.parametrize(
    ("said", "scope", "line"),
    [
        (True, "all", "all turns: llama.cpp's template preserves reasoning"),
        (False, "current-turn", "the turn in progress: the template drops earlier reasoning"),
        (404, "current-turn", "the turn in progress (no /props)"),
    ],
)
def test_the_doctor_says_what_auto_does_with_this_server(
    said: bool | int, scope: str, line: str
) -> None:
    upstream = LlamaLike(props={"*": said})
    with serve(upstream.app()) as url:
        report = asyncio.run(diagnose(f"{url}/v1", model="m"))
    assert (report["reasoning_scope"], report["reasoning_scope_reason"]) == (scope, line)
    assert re.search(rf"^reasoning_scope +{re.escape(line)}$", render_table(report), re.M)
    assert "--reasoning-scope" not in report["serve_command"]  # auto is the default
    assert upstream.props_asked == [{"model": "m", "autoload": "false"}]


# --- the settings -----------------------------------------------------------------------------


def test_the_flag_and_the_variable_take_auto_which_is_the_default() -> None:
    parser = build_parser()
    base = ["serve", "--upstream-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert serve_config(parser.parse_args(base), {}).reasoning_scope == "auto"
    for scope in ("auto", "current-turn", "all", "last"):
        args = parser.parse_args([*base, "--reasoning-scope", scope])
        assert serve_config(args, {}).reasoning_scope == scope
    environ = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "AGUI_BRIDGE_MODEL": "m"}
    assert config_from_env(environ).reasoning_scope == "auto"
    for scope in ("auto", "all"):
        environ["AGUI_BRIDGE_REASONING_SCOPE"] = scope
        assert config_from_env(environ).reasoning_scope == scope
    environ["AGUI_BRIDGE_REASONING_SCOPE"] = "everything"
    with pytest.raises(ValueError, match=r"AGUI_BRIDGE_REASONING_SCOPE.*'auto'"):
        config_from_env(environ)


def test_the_config_names_auto_among_the_scopes() -> None:
    with pytest.raises(ValueError, match="must be auto, current-turn, all or last, not 'x'"):
        BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model="m", reasoning_scope="x")  # type: ignore[arg-type]


def test_a_recording_made_with_auto_replays(tmp_path: Path) -> None:
    """The GET /props is shared by the runs waiting for it, no run's exchange, so the record
    does not hold it: the replay has no /props, the bridge in front of it resolves auto to
    current-turn, and the answers replay."""
    upstream = LlamaLike(props={"*": True})
    with serve(upstream.app()) as url:
        config = _config(url, record_dir=str(tmp_path))
        with serve(create_app(config)) as bridge_url:
            before = post(f"{bridge_url}/", run_input(HISTORY))
    recording = load_recording(tmp_path)
    assert recording.configs[0]["reasoning_scope"] == "auto"
    assert [e.endpoint for e in recording.exchanges] == ["/chat/completions"]
    assert "--reasoning-scope" not in serve_command(recording, "http://127.0.0.1:9/v1")
    old = {**recording.configs[0], "reasoning_scope": "current-turn"}  # before auto existed
    assert serve_command(replace(recording, configs=[old]), "http://127.0.0.1:9/v1")[-2:] == [
        "--reasoning-scope",
        "current-turn",
    ]
    with serve(create_replay_app(recording, speed=10)) as replay_url:
        again = replace(config, upstream_url=f"{replay_url}/v1", record_dir=None)
        with serve(create_app(again)) as bridge_url:
            after = post(f"{bridge_url}/", run_input(HISTORY))
    deltas = [f.get("delta") for f in before if f["type"] == "TEXT_MESSAGE_CONTENT"]
    assert [f.get("delta") for f in after if f["type"] == "TEXT_MESSAGE_CONTENT"] == deltas


def test_run_started_goes_before_props_is_read() -> None:
    """RUN_STARTED is sent before the upstream is asked anything, /props included: the first
    frame comes while /props has not answered yet."""
    gate = threading.Event()
    upstream = LlamaLike(props={"*": True}, props_gate=gate)
    with (
        serve(upstream.app()) as url,
        serve(create_app(_config(url))) as bridge_url,
        httpx.stream("POST", f"{bridge_url}/", json=run_input(HISTORY), timeout=30) as got,
    ):
        lines = got.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first.removeprefix("data: "))["type"] == "RUN_STARTED"
        assert upstream.props_answered == 0
        gate.set()
        rest = list(lines)
    assert upstream.props_answered == 1
    assert any('"RUN_FINISHED"' in line for line in rest)
    (sent,) = upstream.chats  # built again with the scope /props gave: the first turn's too
    assert FIRST_TURN in json.dumps(sent["messages"])
