"""Predictive state updates (README "Shared state"): with ``--predict-state
document=write_document.document`` every run opens with ``CUSTOM PredictState``, and the
converter CopilotKit's runtime reads AG-UI streams with (``convertToLegacyEvents`` of
``@ag-ui/client``, the 1.0.0 line and 0.0.59, which CopilotKit pins) streams the frontend tool's
``document`` argument into the state while the model writes it. Real bridge, real client code
(``tests/node/predict_state.mjs``)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from node_tools import NODE_DIR, npm_install, require_node
from servers import run_input, scripted_stack

WRITE_DOCUMENT = {
    "name": "write_document",
    "description": "Write the document the user sees",
    "parameters": {
        "type": "object",
        "properties": {"document": {"type": "string", "description": "the whole document"}},
        "required": ["document"],
    },
}


def legacy_run(client: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    node = require_node("the predictive state test runs @ag-ui/client's converter")
    npm_install(
        NODE_DIR,
        NODE_DIR / "node_modules" / f"ag-ui-client-{client}" / "package.json",
        "the official AG-UI client",
    )
    done = subprocess.run(
        [node, "predict_state.mjs"],
        cwd=NODE_DIR,
        input=json.dumps({"client": client, "url": url, "input": body}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("client", ["1.0.0", "0.0.59"])
def test_a_tools_argument_streams_into_the_state_as_the_model_writes_it(client: str) -> None:
    predicted = (("document", "write_document", "document"),)
    with scripted_stack(shared_state=True, predict_state=predicted) as made:
        body = run_input(
            [{"id": "u", "role": "user", "content": "Please write_document about the cake"}],
            tools=[WRITE_DOCUMENT],
            state={"document": ""},
            # The 0.0.x lines send no protocol version (and get the events of their line).
            protocolVersion="1.0" if client == "1.0.0" else None,
        )
        result = legacy_run(client, made.bridge_url, body)
        [request] = made.upstream_requests
    assert result["logged"] == []
    events = result["events"]
    # In the model's step, as the converter wants it: it forgets it at each step's start.
    assert [e["type"] for e in events[:3]] == ["RUN_STARTED", "STEP_STARTED", "CUSTOM"]
    arguments = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    written = json.loads(arguments)["document"]
    documents = [state["document"] for state in result["states"] if "document" in state]
    assert documents and documents[-1] == written
    assert all(written.startswith(document) for document in documents)
    assert len(set(documents)) > 1, "the argument came in pieces, the state followed each"
    assert "update_state" in [t["function"]["name"] for t in request["tools"]]
