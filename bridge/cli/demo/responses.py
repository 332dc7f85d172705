"""The scripted model behind the Responses API (``POST /v1/responses``). Pure: a request in,
the events of a streamed response (or the whole ``response`` object) out.

The request's input items are read back into a chat conversation for ``script.py``, so both APIs
say the same things. The reasoning goes out as summary parts (one per sentence), or, for
``scripted-reasoning``, as raw reasoning text (as gpt-oss servers send it); with it a reasoning
item's ``encrypted_content`` (a reversible stand-in: ``enc1:`` + base64 of the reasoning), which
a stateless client must send back next turn.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bridge.cli.demo.dialects import PLAIN, REASONING
from bridge.cli.demo.script import Script, count_prompt_tokens, write_script

_TEXT_PARTS = ("input_text", "output_text")
_SENTENCE = re.compile(r"(?<=\.)\s+(?=[A-Z])")  # "…lightblue). The calls…" (not in quotes)


def chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses request read as the Chat Completions request it stands for."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role"), "content": _content(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
    tools = [
        {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
        for tool in body.get("tools") or []
        if isinstance(tool, Mapping) and tool.get("type") == "function"
    ]
    return {"messages": messages, "tools": tools, "seed": body.get("seed")}


def encrypt(reasoning: str) -> str:
    return "enc1:" + base64.b64encode(reasoning.encode()).decode()


def response_events(
    body: Mapping[str, Any], model: str, response_id: str, created: int
) -> list[dict[str, Any]]:
    """The events of the streamed response, ``response.created`` to ``.completed``."""
    request = chat_request(body)
    script = write_script(request)
    limit = body.get("max_output_tokens")
    layout = _Layout(script, model, response_id, limit if isinstance(limit, int) else None)
    shell = _shell(response_id, created, model, "in_progress")
    events: list[dict[str, Any]] = [{"type": "response.created", "response": shell}]
    events += layout.events()
    final = _shell(response_id, created, model, "incomplete" if layout.cut else "completed")
    final["output"] = layout.output
    final["usage"] = layout.usage(count_prompt_tokens(request["messages"]))
    if layout.cut:
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    events.append({"type": f"response.{final['status']}", "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def response_object(
    body: Mapping[str, Any], model: str, response_id: str, created: int
) -> dict[str, Any]:
    """The whole ``response`` of a non-streamed request: the streamed one's last event's."""
    response: dict[str, Any] = response_events(body, model, response_id, created)[-1]["response"]
    return response


class _Layout:
    """The script as output items, in order, cut after ``limit`` generated tokens."""

    def __init__(self, script: Script, model: str, response_id: str, limit: int | None) -> None:
        self._script = script
        self._model = model
        self._id = response_id[-12:]
        self._left = limit
        self.cut = False
        self.generated = self.reasoning_tokens = 0
        self.output: list[dict[str, Any]] = []
        self._events: list[dict[str, Any]] = []

    def events(self) -> list[dict[str, Any]]:
        script = self._script
        for kind, tokens in script.segments:  # reasoning may resume after text (interleaved)
            if self.cut or not tokens:
                continue
            if kind == "text":
                self._message(tokens)
            elif self._model != PLAIN:
                self._reasoning(tokens)
        for call in script.tool_calls:
            if self.cut:
                break
            self._call(call.id, call.name, call.fragments)
        return self._events

    def usage(self, prompt_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.generated,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": prompt_tokens + self.generated,
        }

    def _take(self, tokens: Sequence[str]) -> list[str]:
        if self._left is not None and len(tokens) > self._left:
            tokens, self.cut = tokens[: self._left], True
        if self._left is not None:
            self._left -= len(tokens)
        self.generated += len(tokens)
        return list(tokens)

    def _emit(self, kind: str, index: int, **fields: Any) -> None:
        self._events.append({"type": kind, "output_index": index, **fields})

    def _reasoning(self, tokens: Sequence[str]) -> None:
        index, item_id = len(self.output), f"rs_{self._id}{len(self.output)}"
        raw = self._model == REASONING
        taken = self._take(tokens)
        self.reasoning_tokens += len(taken)
        text = "".join(taken)
        self._emit("response.output_item.added", index, item=_reasoning_item(item_id, [], None))
        parts = [text] if raw else [p for p in _SENTENCE.split(text) if p]
        done: list[str] = []
        for number, part in enumerate(parts):
            where = {"item_id": item_id, "output_index": index}
            kind = "response.reasoning_text" if raw else "response.reasoning_summary_text"
            key = {"content_index": number} if raw else {"summary_index": number}
            if not raw:
                self._emit("response.reasoning_summary_part.added", index, item_id=item_id, **key)
            for piece in re.findall(r"\s*\S+", part):
                self._events.append({"type": f"{kind}.delta", **where, **key, "delta": piece})
            self._events.append({"type": f"{kind}.done", **where, **key, "text": part})
            done.append(part)
        item = _reasoning_item(item_id, done, encrypt(text), raw=raw)
        self._emit("response.output_item.done", index, item=item)
        self.output.append(item)

    def _message(self, tokens: Sequence[str]) -> None:
        index, item_id = len(self.output), f"msg_{self._id}{len(self.output)}"
        taken = self._take(tokens)
        item: dict[str, Any] = {"type": "message", "id": item_id, "status": "in_progress"}
        item |= {"role": "assistant", "content": []}
        self._emit("response.output_item.added", index, item=item)
        where = {"item_id": item_id, "content_index": 0}
        for token in taken:
            self._emit("response.output_text.delta", index, **where, delta=token)
        text = "".join(taken)
        self._emit("response.output_text.done", index, **where, text=text)
        content = [{"type": "output_text", "text": text, "annotations": []}]
        item = {**item, "status": "completed", "content": content}
        self._emit("response.output_item.done", index, item=item)
        self.output.append(item)

    def _call(self, call_id: str, name: str, fragments: Sequence[str]) -> None:
        index, item_id = len(self.output), f"fc_{self._id}{len(self.output)}"
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name}
        item |= {"arguments": "", "status": "in_progress"}
        self._emit("response.output_item.added", index, item=item)
        taken = self._take(fragments)
        for fragment in taken:
            self._emit(
                "response.function_call_arguments.delta", index, item_id=item_id, delta=fragment
            )
        arguments = "".join(taken)
        self._emit(
            "response.function_call_arguments.done", index, item_id=item_id, arguments=arguments
        )
        item = {**item, "arguments": arguments, "status": "completed"}
        self._emit("response.output_item.done", index, item=item)
        self.output.append(item)


def _reasoning_item(
    item_id: str, parts: list[str], secret: str | None, *, raw: bool = False
) -> dict[str, Any]:
    kind = "reasoning_text" if raw else "summary_text"
    texts = [{"type": kind, "text": part} for part in parts]
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": [] if raw else texts}
    if raw:
        item["content"] = texts
    if secret is not None:
        item["encrypted_content"] = secret
    return item


def _shell(response_id: str, created: int, model: str, status: str) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": [],
        "store": False,
    }


def _content(content: Any) -> Any:
    """A message's content for ``script.py``: its text alone, or, when it carries more
    (``input_image``, ``input_file``, ``input_audio``), its parts in order, the text ones as
    Chat Completions text parts."""
    if not isinstance(content, list):
        return content
    parts = [p for p in content if isinstance(p, Mapping)]
    if all(p.get("type") in _TEXT_PARTS for p in parts):
        return _text(content)
    return [
        {"type": "text", "text": str(p.get("text", ""))} if p.get("type") in _TEXT_PARTS else p
        for p in parts
    ]


def _text(content: Any) -> Any:
    if isinstance(content, list):  # input_text / output_text parts
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        ) or json.dumps(content)
    return content
