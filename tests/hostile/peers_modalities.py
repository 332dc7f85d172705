"""An upstream that refuses attachments as llama-server does, over real HTTP (uvicorn on
127.0.0.1): what its ``/props`` says and what it refuses are the test's to choose.

``takes``: the kinds it takes (``vision``, ``audio``, ``video``, as llama.cpp's ``/props``
``modalities`` names them). ``props``: what ``GET /props`` answers: ``modalities`` (llama.cpp's
answer with ``takes``, as the live bed's build gives it), ``silent`` (a ``/props`` without
``modalities``, as older builds' or another server's), ``raw`` (``raw_modalities`` as the
value of ``modalities``, whatever it is), ``none`` (HTTP 404: no ``/props``).
A chat request whose user messages hold a part it does not take is refused in the words and
status of llama-server (``refusal="llama"``: an image as the live bed's llama-server refused one,
``tests/fixtures/llamacpp/deepseek_error_image_unsupported_stream``: HTTP 500 "image input is
not supported - hint: if this is unexpected, you may need to provide the mmproj"; audio and
video in the same words; HTTP 400 "unsupported content[].type" for a ``file`` part, which it
never takes), or of OpenAI (``refusal="openai"``:
HTTP 400 "Invalid content type. image_url is only supported by certain models."). With
``call``, its first answer is a call to that tool, the next ones text. Every chat body and
``/props`` query is noted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from helpers import FIXTURES
from servers import serve

#: The content part types of Chat Completions and the ``/props`` modality each needs.
_NEEDS = {"image_url": "vision", "input_audio": "audio", "video_url": "video"}
_LLAMA_WORDS = {"vision": "image", "audio": "audio", "video": "video"}
#: llama-server's refusal of an image, as the live bed's answered it: its status and body.
RECORDED = FIXTURES / "deepseek_error_image_unsupported_stream"
REFUSAL_STATUS = int(RECORDED.with_suffix(".headers").read_text().split()[1])
REFUSAL = json.loads(RECORDED.with_suffix(".json").read_text())["error"]


@dataclass
class RefusingUpstream:
    takes: frozenset[str] = frozenset()
    props: str = "modalities"  # modalities | silent | raw | none
    raw_modalities: Any = None
    refusal: str = "llama"  # llama | openai
    call: str | None = None
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
        self.props_asked.append(dict(request.query_params))
        if self.props == "none":
            return JSONResponse({"error": {"message": "File Not Found", "code": 404}}, 404)
        answer: dict[str, Any] = {
            "build_info": "b1-0c1e570",
            "chat_template_caps": {"supports_preserve_reasoning": False},
        }
        if self.props == "modalities":
            answer["modalities"] = {key: key in self.takes for key in ("vision", "video", "audio")}
        elif self.props == "raw":
            answer["modalities"] = self.raw_modalities
        return JSONResponse(answer)

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.chats.append(body)
        refused = self._refused(body)
        if refused is not None:
            return refused
        delta: dict[str, Any] = {"role": "assistant", "content": "Seen."}
        finish = "stop"
        if self.call is not None and len(self.chats) == 1:
            function = {"name": self.call, "arguments": "{}"}
            delta = {
                "role": "assistant",
                "tool_calls": [{"index": 0, "id": "call_1", "function": function}],
            }
            finish = "tool_calls"
        chunks = [
            {"choices": [{"index": 0, "delta": delta}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        ]
        sse = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return Response(sse, media_type="text/event-stream")

    def _refused(self, body: dict[str, Any]) -> Response | None:
        for message in body.get("messages", []):
            content = message.get("content")
            for part in content if isinstance(content, list) else ():
                kind = part.get("type")
                if kind == "text":
                    continue
                if self.refusal == "openai":
                    if _NEEDS.get(kind) not in self.takes:
                        words = f"Invalid content type. {kind} is only supported by certain models."
                        return _error(400, words, "invalid_request_error")
                    continue
                if kind not in _NEEDS:  # llama-server reads no file part, whatever its mmproj
                    return _error(400, "unsupported content[].type", "invalid_request_error")
                if _NEEDS[kind] not in self.takes:
                    words = REFUSAL["message"].replace("image", _LLAMA_WORDS[_NEEDS[kind]], 1)
                    return _error(REFUSAL_STATUS, words, REFUSAL["type"])
        return None


def _error(status: int, message: str, kind: str) -> Response:
    return JSONResponse({"error": {"code": status, "message": message, "type": kind}}, status)


@contextmanager
def refusing_upstream(**settings: Any) -> Iterator[tuple[RefusingUpstream, str]]:
    """The upstream, served; its ``/v1`` base URL."""
    upstream = RefusingUpstream(**settings)
    with serve(upstream.app()) as url:
        yield upstream, f"{url}/v1"
