"""Several agents in one process (issue 43, point 2): ``[agents.NAME]`` tables in the file,
each served at ``/NAME`` with its own upstream, model, instructions, tools and approvals over
the settings they share, the agents with one upstream sharing one pool of its connections.
A real ``agui-bridge serve --config`` process, two scripted upstreams behind taps, and the
official ``@ag-ui/client`` 1.0.0 and 0.0.59."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bridge.cli.demo import DEFAULT_SCRIPTED_MODEL
from node_tools import official
from peers_config import TOOLS_MODULE, command, environment, serving
from peers_instructions import TappedUpstream
from servers import post, run_input, serve


def _file(folder: Path, first: str, second: str) -> Path:
    path = folder / "bridge.toml"
    path.write_text(
        f'model = "{DEFAULT_SCRIPTED_MODEL}"\n'
        "max-tool-rounds = 4\n"
        "\n"
        "[agents.sales]\n"
        f'upstream-url = "{first}/v1"\n'
        'instructions = "You are the sales agent."\n'
        "\n"
        "[agents.support]\n"
        f'upstream-url = "{second}/v1"\n'
        'instructions = "You are the support agent."\n'
        'tools = ["my_tools"]\n'
        "\n"
        "[agents.billing]\n"
        f'upstream-url = "{first}/v1"\n'
        'instructions = "You are the billing agent."\n'
    )
    (folder / "my_tools.py").write_text(TOOLS_MODULE)
    return path


@pytest.mark.parametrize("client", ["1.0.0", "0.0.59"])
def test_two_agents_on_two_upstreams_answer_each_with_its_own_instructions_and_tools(
    tmp_path: Path, client: str
) -> None:
    """Finding: one agent per process, configured by flags. Promise: each ``[agents.NAME]``
    is served at ``/NAME``, its requests go to its own upstream with its own instructions
    first and its own tools offered, and the official clients of both lines take its runs."""
    sales_upstream, support_upstream = TappedUpstream(), TappedUpstream()
    with serve(sales_upstream) as first, serve(support_upstream) as second:
        path = _file(tmp_path, first, second)
        with serving("--config", str(path), cwd=tmp_path, env=environment()) as bridge:
            ask = [{"id": "u1", "role": "user", "content": "Please get_weather"}]
            sales, support = official(
                [
                    {"url": f"{bridge.url}/sales", "messages": ask, "threadId": "t-sales"},
                    {"url": f"{bridge.url}/support/", "messages": ask, "threadId": "t-sup"},
                ],
                client=client,
            )
    for report in (sales, support):
        assert report["rejected"] is None and not report["failed"], report
        assert report["events"][-1]["type"] == "RUN_FINISHED"
    (sold,) = [json.loads(body) for body in sales_upstream.bodies]
    assert sold["messages"][0] == {"role": "system", "content": "You are the sales agent."}
    assert "tools" not in sold  # the sales agent has no server tools
    helped = [json.loads(body) for body in support_upstream.bodies]
    assert len(helped) == 2  # the tool's round, then the answer
    for body in helped:
        assert body["messages"][0] == {"role": "system", "content": "You are the support agent."}
        assert {t["function"]["name"] for t in body["tools"]} == {"get_weather", "delete_file"}
    results = [e for e in support["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1 and "says the module" in results[0]["content"]


def test_agents_with_one_upstream_share_its_connections(tmp_path: Path) -> None:
    """Promise: agents that share an upstream share one pool of its connections: a run of one
    agent goes on a connection a run of the other opened, which apps of their own never do.
    (Not every run: a connection goes back to the pool only when its body's end comes within
    ``Body.settle``'s wait, which a loaded machine may pass once.)"""
    agents = ("sales", "billing") * 3
    sales_upstream, support_upstream = TappedUpstream(), TappedUpstream()
    with serve(sales_upstream) as first, serve(support_upstream) as second:
        path = _file(tmp_path, first, second)
        with serving("--config", str(path), cwd=tmp_path, env=environment()) as bridge:
            for agent in agents:
                frames = post(f"{bridge.url}/{agent}", run_input())
                assert frames[-1]["type"] == "RUN_FINISHED"
    firsts = [json.loads(body)["messages"][0]["content"] for body in sales_upstream.bodies]
    assert firsts == [f"You are the {agent} agent." for agent in agents]
    opened_by: dict[tuple[str, int], str] = {}  # a connection → the agent whose run opened it
    crossed = 0  # runs on a connection the other agent's run opened
    for agent, peer in zip(agents, sales_upstream.peers, strict=True):
        crossed += opened_by.setdefault(peer, agent) != agent
    assert crossed >= 1, sales_upstream.peers
    assert len(set(sales_upstream.peers)) < len(agents), sales_upstream.peers
    assert support_upstream.bodies == []


def test_serve_workers_serve_the_agents(tmp_path: Path) -> None:
    """Promise: with ``--workers 2`` the worker processes serve the file's agents as one
    process does, and the line that says where names each agent's path."""
    sales_upstream, support_upstream = TappedUpstream(), TappedUpstream()
    with serve(sales_upstream) as first, serve(support_upstream) as second:
        path = _file(tmp_path, first, second)
        args = ("--config", str(path), "--workers", "2")
        with serving(*args, cwd=tmp_path, env=environment()) as bridge:
            for _ in range(4):
                for agent in ("sales", "support"):
                    frames = post(f"{bridge.url}/{agent}", run_input())
                    assert frames[-1]["type"] == "RUN_FINISHED"
    assert f"{bridge.url}/sales, {bridge.url}/support, {bridge.url}/billing" in bridge.opened
    sold = [json.loads(body)["messages"][0]["content"] for body in sales_upstream.bodies]
    helped = [json.loads(body)["messages"][0]["content"] for body in support_upstream.bodies]
    assert sold == ["You are the sales agent."] * 4
    assert helped == ["You are the support agent."] * 4


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("[agents.x]\nport = 1\n", ":2: port is the process's: set it outside [agents.*]"),
        ("[agents.x]\nmodle = 'm'\n", ":2: unknown key 'modle' (did you mean model?)"),
        ("[agents.'a b']\nmodel = 'm'\n", ":1: an agent's name is 1-64 letters"),
        ("agents = 3\n", ":1: agents wants tables: [agents.NAME]"),
        ("[agents.x]\nmodel = 'm'\n", "agent x: give --upstream-url"),
        (
            "upstream-url = 'http://h/v1'\n[agents.x]\nmodel = 'm'\nidle-timeout = 0\n",
            "agent x: idle_timeout (idle-timeout at ",
        ),
    ],
)
def test_a_wrong_agent_table_stops_the_start_naming_it(
    tmp_path: Path, table: str, says: str
) -> None:
    """Promise: an agent's table is checked as the file is: a key of the process's, an
    unknown key, a name that cannot be a path, a wrong value stop the start in one line with
    the line, before anything listens; so does an agent its settings cannot serve."""
    path = tmp_path / "bridge.toml"
    path.write_text(table)
    done = command("serve", "--config", str(path), cwd=tmp_path, env=environment())
    assert done.returncode == 2 and done.stdout == ""
    [said] = done.stderr.strip().split("\n")
    assert says in said, said


def test_agents_are_listed_to_those_each_lets_in(tmp_path: Path) -> None:
    """Promise: ``GET /agents`` (what the demo page reads to show a picker) lists, in the
    file's order, the agents the caller may talk to: one behind its own ``auth-token`` only to
    a caller with it, and none to a wrong one."""
    with serve(TappedUpstream()) as first, serve(TappedUpstream()) as second:
        path = _file(tmp_path, first, second)
        path.write_text(
            path.read_text().replace(
                "[agents.support]\n", '[agents.support]\nauth-token = "Sup9Tq4Lm7Zx2Wv8"\n'
            )
        )
        with serving("--config", str(path), cwd=tmp_path, env=environment()) as bridge:
            anyone = httpx.get(f"{bridge.url}/agents").json()
            wrong = httpx.get(f"{bridge.url}/agents", headers={"Authorization": "Bearer nope"})
            let_in = httpx.get(
                f"{bridge.url}/agents", headers={"Authorization": "Bearer Sup9Tq4Lm7Zx2Wv8"}
            ).json()
    assert [a["name"] for a in anyone["agents"]] == ["sales", "billing"]
    assert [a["name"] for a in wrong.json()["agents"]] == ["sales", "billing"]
    assert let_in["agents"] == [
        {"name": "sales", "path": "/sales"},
        {"name": "support", "path": "/support"},
        {"name": "billing", "path": "/billing"},
    ]
    assert "Sup9Tq4Lm7Zx2Wv8" not in wrong.text
