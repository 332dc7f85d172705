"""AG-UI conversation → OpenAI messages and tools (bridge/serve/run/history.py)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any, cast

import pytest
from ag_ui.core import (
    BinaryInputContent,
    ContentPart,
    Context,
    ImageInputContent,
    ImageInputPart,
    InputContentDataSource,
    InputContentUrlSource,
    Message,
    RunAgentInput,
    TextInputContent,
    Tool,
    UserMessage,
)

from bridge.serve.run.history import (
    ReasoningHistory,
    ReasoningScope,
    to_openai_messages,
    to_openai_tools,
)
from bridge.serve.run.parts import UnmappablePartError
from helpers import FIXTURES


def run_input(*messages: dict[str, Any], **extra: Any) -> RunAgentInput:
    """Validate camelCase JSON the way the app does with a frontend's request body."""
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": list(messages),
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **extra,
    }
    return RunAgentInput.model_validate(body)


def msgs(*messages: dict[str, Any]) -> list[Message]:
    return run_input(*messages).messages


def user(text: str, id: str = "u") -> dict[str, Any]:
    return {"id": id, "role": "user", "content": text}


def reasoning(text: str, id: str = "r", **extra: Any) -> dict[str, Any]:
    return {"id": id, "role": "reasoning", "content": text, **extra}


def assistant(
    content: str | None = None, *calls: tuple[str, str, str], id: str = "a"
) -> dict[str, Any]:
    message: dict[str, Any] = {"id": id, "role": "assistant"}
    if content is not None:
        message["content"] = content
    if calls:
        message["toolCalls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
    return message


def tool(call_id: str, content: Any, id: str = "t", **extra: Any) -> dict[str, Any]:
    return {"id": id, "role": "tool", "toolCallId": call_id, "content": content, **extra}


def openai_call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


# --- system, developer, user -------------------------------------------------------------


def test_system_and_developer_keep_their_roles() -> None:
    out = to_openai_messages(
        msgs(
            {"id": "s", "role": "system", "content": "Be brief."},
            {"id": "d", "role": "developer", "content": "Use metric units."},
            user("Hi"),
        )
    )
    assert out == [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use metric units."},
        {"role": "user", "content": "Hi"},
    ]


def test_user_string_content_stays_a_string() -> None:
    assert to_openai_messages(msgs(user("Hello"))) == [{"role": "user", "content": "Hello"}]


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        pytest.param(
            {"type": "text", "text": "What is this?"},
            {"type": "text", "text": "What is this?"},
            id="text",
        ),
        pytest.param(
            {"type": "image", "source": {"type": "url", "value": "https://x.test/cat.png"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}},
            id="image-url",
        ),
        pytest.param(
            {
                "type": "image",
                "source": {"type": "url", "value": "https://x.test/c", "mimeType": "image/png"},
            },
            {"type": "image_url", "image_url": {"url": "https://x.test/c"}},
            id="image-url-with-mime",
        ),
        pytest.param(
            {
                "type": "image",
                "source": {"type": "data", "value": "iVBORw0K", "mimeType": "image/png"},
            },
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
            id="image-data",
        ),
    ],
)
def test_user_parts(part: dict[str, Any], expected: dict[str, Any]) -> None:
    out = to_openai_messages(msgs({"id": "u", "role": "user", "content": [part]}))
    assert out == [{"role": "user", "content": [expected]}]


def test_user_parts_keep_their_order() -> None:
    content = [
        {"type": "text", "text": "Compare"},
        {"type": "image", "source": {"type": "url", "value": "https://x.test/a.png"}},
        {"type": "text", "text": "and"},
        {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/jpeg"}},
    ]
    [out] = to_openai_messages(msgs({"id": "u", "role": "user", "content": content}))
    assert [p["type"] for p in out["content"]] == ["text", "image_url", "text", "image_url"]


@pytest.mark.parametrize(
    ("part", "described"),
    [
        pytest.param(
            {"type": "audio", "source": {"type": "url", "value": "https://x.test/a.wav"}},
            "an audio part given by URL",
            id="audio-url",
        ),
        pytest.param(
            {
                "type": "document",
                "source": {"type": "url", "value": "https://x.test/d.pdf"},
                "metadata": {"filename": "d.pdf"},
            },
            "a document part (d.pdf, application/pdf) given by URL",
            id="document-url",
        ),
    ],
)
def test_a_part_chat_completions_cannot_take_raises_naming_it(
    part: dict[str, Any], described: str
) -> None:
    messages = msgs({"id": "u", "role": "user", "content": [{"type": "text", "text": "x"}, part]})
    with pytest.raises(UnmappablePartError, match=re.escape(f"content.1: {described} cannot go")):
        to_openai_messages(messages)


def test_pre_1_0_part_names_convert_the_same() -> None:
    """The 0.x spellings (``TextInputContent``, ``ImageInputContent``, ``ImageInputPart``,
    ``InputContentDataSource``, ...) are aliases of the 1.0 parts, constructed in Python."""
    content: list[ContentPart] = [
        TextInputContent(text="Look"),
        ImageInputContent(source=InputContentUrlSource(value="https://x.test/a.png")),
        ImageInputPart(source=InputContentDataSource(value="AAAA", mime_type="image/gif")),
    ]
    out = to_openai_messages([UserMessage(id="u", content=content)])
    assert out[0]["content"] == [
        {"type": "text", "text": "Look"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/gif;base64,AAAA"}},
    ]


def test_legacy_binary_part_raises_value_error() -> None:
    """1.0 validation rejects ``{"type": "binary"}``; one built unvalidated still fails cleanly."""
    binary = BinaryInputContent(mime_type="image/png", url="https://x.test/a.png")
    message = UserMessage.model_construct(id="u", role="user", content=[binary])
    with pytest.raises(ValueError, match="'binary' has no place upstream"):
        to_openai_messages([message])


def test_unknown_message_raises_value_error() -> None:
    with pytest.raises(ValueError, match="unsupported message role 'narrator'"):
        to_openai_messages([cast(Message, SimpleNamespace(role="narrator"))])


# --- assistant and tool calls ------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param('{"city":  "Paris" }', id="odd-spacing"),
        pytest.param('{\n  "city": "Paris"\n}', id="newlines"),
        pytest.param('{"city":"Paris","unit":"celsius"}', id="compact"),
        pytest.param('{"b": 1, "a": 2}', id="key-order"),
        pytest.param('{"city": "S\\u00e3o Paulo"}', id="escaped-unicode"),
        pytest.param("", id="empty"),
        pytest.param('{"city": "Par', id="truncated"),
    ],
)
def test_tool_call_arguments_are_sent_byte_for_byte(arguments: str) -> None:
    out = to_openai_messages(msgs(user("?"), assistant(None, ("c1", "get_weather", arguments))))
    assert out[1]["tool_calls"][0]["function"]["arguments"] == arguments


def test_parallel_calls_stay_in_one_assistant_message() -> None:
    out = to_openai_messages(
        msgs(
            user("Weather and time in Paris?"),
            assistant(
                "Checking both.",
                ("c1", "get_weather", '{"city": "Paris"}'),
                ("c2", "get_time", '{"tz": "Europe/Paris"}'),
            ),
            tool("c1", "18C", id="t1"),
            tool("c2", "14:00", id="t2"),
        )
    )
    assert out[1:] == [
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                openai_call("c1", "get_weather", '{"city": "Paris"}'),
                openai_call("c2", "get_time", '{"tz": "Europe/Paris"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
        {"role": "tool", "tool_call_id": "c2", "content": "14:00"},
    ]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(
            assistant("Hello"),
            {"role": "assistant", "content": "Hello"},
            id="text-only",
        ),
        pytest.param(assistant(None), {"role": "assistant", "content": ""}, id="nothing"),
        pytest.param(assistant(""), {"role": "assistant", "content": ""}, id="empty-text"),
        pytest.param(
            assistant(None, ("c1", "f", "{}")),
            {"role": "assistant", "content": None, "tool_calls": [openai_call("c1", "f", "{}")]},
            id="calls-only",
        ),
        pytest.param(
            assistant("", ("c1", "f", "{}")),
            {"role": "assistant", "content": None, "tool_calls": [openai_call("c1", "f", "{}")]},
            id="calls-and-empty-text",
        ),
    ],
)
def test_assistant_content_and_tool_calls(
    message: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert to_openai_messages(msgs(user("?"), message))[1] == expected


@pytest.mark.parametrize(
    ("content", "error", "expected"),
    [
        pytest.param("18C", None, "18C", id="no-error"),
        pytest.param("", "timeout", "Error: timeout", id="error-only"),
        pytest.param("partial", "timeout", "Error: timeout\n\npartial", id="both"),
    ],
)
def test_tool_result_and_error(content: str, error: str | None, expected: str) -> None:
    extra = {} if error is None else {"error": error}
    out = to_openai_messages(
        msgs(user("?"), assistant(None, ("c1", "f", "{}")), tool("c1", content, **extra))
    )
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": expected}


def test_tool_text_parts_are_flattened_to_a_string() -> None:
    parts = [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]
    out = to_openai_messages(msgs(user("?"), assistant(None, ("c1", "f", "{}")), tool("c1", parts)))
    assert out[2]["content"] == "line 1\nline 2"


TIME = "Monday 23 November 2026, 18:41:06 UTC"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(TIME, TIME, id="a-string-as-sent"),
        pytest.param(json.dumps(TIME), TIME, id="a-string-json-encoded"),
        pytest.param(json.dumps(json.dumps(TIME)), TIME, id="encoded-twice"),
        pytest.param(json.dumps('say "hi"'), 'say "hi"', id="escapes-decoded"),
        pytest.param(json.dumps("l\u00e9t\u00e9"), "l\u00e9t\u00e9", id="escaped-non-ascii"),
        pytest.param('{"order":1}', '{"order":1}', id="an-object-stays-json"),
        pytest.param(json.dumps('{"order":1}'), '{"order":1}', id="an-object-json-encoded"),
        pytest.param("[1,2]", "[1,2]", id="a-list"),
        pytest.param("42", "42", id="a-number"),
        pytest.param("null", "null", id="null"),
        pytest.param('""', "", id="the-empty-string"),
        pytest.param('"', '"', id="one-quote"),
        pytest.param('"a" and "b"', '"a" and "b"', id="quotes-not-one-json-string"),
        pytest.param(' "padded" ', ' "padded" ', id="padding-is-not-json-text"),
        pytest.param('"\\ud800"', '"\\ud800"', id="a-lone-surrogate-stays-encoded"),
    ],
)
def test_a_json_encoded_string_result_goes_upstream_as_the_string(
    content: str, expected: str
) -> None:
    """Clients send a string result back as it came or JSON-encoded: the model reads the
    same bytes either way (see test_server_tools for the next run, byte for byte)."""
    out = to_openai_messages(
        msgs(user("?"), assistant(None, ("c1", "f", "{}")), tool("c1", content))
    )
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": expected}


def test_an_encoded_result_is_decoded_a_bounded_number_of_times() -> None:
    deep = "x"
    for _ in range(10):
        deep = json.dumps(deep)
    out = to_openai_messages(msgs(user("?"), assistant(None, ("c1", "f", "{}")), tool("c1", deep)))
    left = out[2]["content"]
    for _ in range(6):
        left = json.loads(left)
    assert left == "x"  # four layers off, no more


def test_an_encoded_result_in_text_parts_and_with_an_error() -> None:
    parts = [{"type": "text", "text": json.dumps(TIME)}]
    messages = msgs(
        user("?"), assistant(None, ("c1", "f", "{}")), tool("c1", parts, error="partial")
    )
    assert to_openai_messages(messages)[2]["content"] == f"Error: partial\n\n{TIME}"


_CHART = {"type": "image", "source": {"type": "url", "value": "https://x.test/a.png"}}
_LOGO = {
    "type": "image",
    "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"},
    "metadata": {"filename": "logo.png"},
}


def test_a_tool_results_media_follow_the_turns_results_in_a_user_message() -> None:
    """Chat Completions tool messages carry text: each image is named in its place and sent,
    labelled, in one user message after all the turn's results (before what comes next)."""
    messages = msgs(
        user("?"),
        assistant(None, ("c1", "f", "{}"), ("c2", "g", "{}")),
        tool("c1", [{"type": "text", "text": "a chart"}, _CHART], id="t1", error="partial"),
        tool("c2", [_LOGO], id="t2"),
        reasoning("Two images."),
        assistant("Done."),
    )
    out = to_openai_messages(messages)
    assert out[2:] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Error: partial\n\n"
            "a chart\n[attachment 1: image, sent after the tool results]",
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "[attachment 2: logo.png, image/png, sent after the tool results]",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[attachment 1, from the call c1: image]"},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                {"type": "text", "text": "[attachment 2, from the call c2: logo.png, image/png]"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {"role": "assistant", "content": "Done.", "reasoning_content": "Two images."},
    ]


def test_a_tool_message_keeps_the_media_its_api_takes() -> None:
    """The Responses API's function_call_output takes images: the tool message keeps its
    parts, in their order, and nothing follows it (the request maps them to input parts)."""
    messages = msgs(
        user("?"),
        assistant(None, ("c1", "f", "{}")),
        tool("c1", [{"type": "text", "text": "a chart"}, _CHART]),
    )
    out = to_openai_messages(messages, tool_media={"image"})
    assert out[2:] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [
                {"type": "text", "text": "a chart"},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            ],
        }
    ]


def test_activity_messages_are_skipped() -> None:
    activity = {"id": "x", "role": "activity", "activityType": "PLAN", "content": {"steps": []}}
    out = to_openai_messages(msgs(user("Hi"), activity, assistant("Hello")))
    assert out == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]


# --- reasoning ---------------------------------------------------------------------------

# Two turns; the second is a tool loop in progress (reasoning before each assistant message,
# as @ag-ui/client sends it back).
CONVERSATION = (
    user("Weather in Paris?", id="u1"),
    reasoning("R1", id="r1"),
    assistant(None, ("c1", "get_weather", '{"city": "Paris"}'), id="a1"),
    tool("c1", "18C", id="t1"),
    reasoning("R2", id="r2"),
    assistant("It is 18C.", id="a2"),
    user("And Tokyo?", id="u2"),
    reasoning("R3", id="r3"),
    assistant(None, ("c2", "get_weather", '{"city": "Tokyo"}'), id="a3"),
    tool("c2", "22C", id="t2"),
    reasoning("R4", id="r4"),
    assistant("It is 22C.", id="a4"),
)
ASSISTANT_POSITIONS = (1, 3, 5, 7)  # of a1..a4 in the output (reasoning messages vanish)


@pytest.mark.parametrize(
    ("scope", "carried"),
    [
        pytest.param("current-turn", {"R3", "R4"}, id="current-turn"),
        pytest.param("all", {"R1", "R2", "R3", "R4"}, id="all"),
        pytest.param("last", {"R4"}, id="last"),
    ],
)
@pytest.mark.parametrize("policy", ["field", "tags", "drop"])
def test_reasoning_scope_and_policy(
    scope: ReasoningScope, carried: set[str], policy: ReasoningHistory
) -> None:
    out = to_openai_messages(msgs(*CONVERSATION), reasoning=policy, scope=scope)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "assistant"] * 2
    for position, text in zip(ASSISTANT_POSITIONS, ("R1", "R2", "R3", "R4"), strict=True):
        message = out[position]
        sent = text in carried and policy != "drop"
        assert (message.get("reasoning_content") == text) is (sent and policy == "field")
        assert ("<think>" in (message["content"] or "")) is (sent and policy == "tags")
        if sent and policy == "tags":
            assert message["content"].startswith(f"<think>\n{text}\n</think>\n\n")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param(
            "field",
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Call the tool.",
                "tool_calls": [openai_call("c1", "f", "{}")],
            },
            id="field",
        ),
        pytest.param(
            "tags",
            {
                "role": "assistant",
                "content": "<think>\nCall the tool.\n</think>\n\n",
                "tool_calls": [openai_call("c1", "f", "{}")],
            },
            id="tags",
        ),
        pytest.param(
            "drop",
            {"role": "assistant", "content": None, "tool_calls": [openai_call("c1", "f", "{}")]},
            id="drop",
        ),
    ],
)
def test_reasoning_on_a_tools_only_message(
    policy: ReasoningHistory, expected: dict[str, Any]
) -> None:
    messages = msgs(user("?"), reasoning("Call the tool."), assistant(None, ("c1", "f", "{}")))
    assert to_openai_messages(messages, reasoning=policy)[1] == expected


def test_reasoning_tags_go_before_text_content() -> None:
    out = to_openai_messages(
        msgs(user("?"), reasoning("Think."), assistant("Answer.")), reasoning="tags"
    )
    assert out[1] == {"role": "assistant", "content": "<think>\nThink.\n</think>\n\nAnswer."}


def test_reasoning_field_name_is_configurable() -> None:
    messages = msgs(user("?"), reasoning("Think."), assistant("Answer."))
    out = to_openai_messages(messages, reasoning_field="reasoning")
    assert out[1] == {"role": "assistant", "content": "Answer.", "reasoning": "Think."}


def test_several_reasoning_messages_are_joined() -> None:
    messages = msgs(
        user("?"), reasoning("First.", id="r1"), reasoning("Second.", id="r2"), assistant("A")
    )
    assert to_openai_messages(messages)[1]["reasoning_content"] == "First.\n\nSecond."


def test_a_turn_split_where_reasoning_resumed_goes_back_as_one_message() -> None:
    # What the client holds after "one" Text. "two" More.+call: the emitter opened a new
    # assistant message where reasoning resumed; upstream it is one turn, as generated.
    messages = msgs(
        user("?"),
        reasoning("one", id="r1"),
        assistant("Text.", id="a1"),
        reasoning("two", id="r2"),
        assistant(" More.", ("c1", "get_time", "{}"), id="a2"),
        tool("c1", "12:00"),
    )
    assert to_openai_messages(messages) == [
        {"role": "user", "content": "?"},
        {
            "role": "assistant",
            "content": "Text. More.",
            "reasoning_content": "one\n\ntwo",
            "tool_calls": [openai_call("c1", "get_time", "{}")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
    ]
    tags = to_openai_messages(messages, reasoning="tags")[1]["content"]
    assert tags == "<think>\none\n</think>\n\nText.<think>\ntwo\n</think>\n\n More."


def test_assistant_messages_apart_are_not_joined() -> None:
    messages = msgs(user("?"), assistant("A", id="a1"), user("!", id="u2"), assistant("B"))
    assert [m["role"] for m in to_openai_messages(messages)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


@pytest.mark.parametrize(
    "conversation",
    [
        pytest.param(
            (user("?", id="u1"), reasoning("Orphan."), user("!", id="u2")), id="before-user"
        ),
        pytest.param((user("?"), assistant("A"), reasoning("Orphan.")), id="at-end"),
    ],
)
def test_reasoning_without_a_following_assistant_is_dropped(
    conversation: tuple[dict[str, Any], ...],
) -> None:
    out = to_openai_messages(msgs(*conversation), scope="all")
    assert all("reasoning_content" not in m for m in out)
    assert "Orphan." not in json.dumps(out)


def test_orphan_reasoning_does_not_reach_the_next_turns_assistant() -> None:
    messages = msgs(user("?", id="u1"), reasoning("Old."), user("!", id="u2"), assistant("A"))
    assert "reasoning_content" not in to_openai_messages(messages, scope="all")[2]


def test_encrypted_reasoning_values_are_not_sent() -> None:
    messages = msgs(user("?"), reasoning("Think.", encryptedValue="opaque-blob"), assistant("A"))
    out = to_openai_messages(messages)
    assert out[1] == {"role": "assistant", "content": "A", "reasoning_content": "Think."}
    assert "opaque-blob" not in json.dumps(out)


def test_openrouter_signed_and_encrypted_details_go_back_as_they_came() -> None:
    signed = '{"type":"reasoning.text","signature":"sig","format":"anthropic-claude-v1","index":0}'
    encrypted = '{"type":"reasoning.encrypted","data":"blob","format":"openai-responses-v1"}'
    messages = msgs(
        user("?"),
        reasoning("Think.", encryptedValue=signed),
        reasoning("More.", encryptedValue=encrypted),
        assistant("A"),
    )
    out = to_openai_messages(messages)[1]
    assert out["reasoning_content"] == "Think.\n\nMore."
    assert out["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "text": "Think.",
            "signature": "sig",
            "format": "anthropic-claude-v1",
            "index": 0,
        },
        {"type": "reasoning.text", "text": "More."},
        {"type": "reasoning.encrypted", "data": "blob", "format": "openai-responses-v1"},
    ]
    assert "reasoning_details" not in to_openai_messages(messages, reasoning="tags")[1]


def test_empty_reasoning_adds_nothing() -> None:
    messages = msgs(user("?"), reasoning("", encryptedValue="opaque"), assistant("A"))
    assert to_openai_messages(messages, reasoning="tags")[1] == {
        "role": "assistant",
        "content": "A",
    }


@pytest.mark.parametrize(
    ("option", "value"),
    [pytest.param("reasoning", "auto", id="reasoning"), pytest.param("scope", "turn", id="scope")],
)
def test_unknown_policy_raises_value_error(option: str, value: str) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(ValueError, match=option):
        to_openai_messages(msgs(user("?")), **options)


def test_history_llama_cpp_accepted() -> None:
    """The recorded request llama.cpp rendered with the reasoning in the assistant turn."""
    recorded = json.loads(
        (FIXTURES / "deepseek_history_reasoning_apply_template.request.json").read_text("utf-8")
    )
    messages = msgs(
        user("What is the weather in Paris?", id="u1"),
        reasoning("The user wants the weather in Paris. I should call get_weather."),
        assistant(None, ("call_abc123", "get_weather", '{"location": "Paris", "unit": "celsius"}')),
        tool("call_abc123", '{"temperature": 18, "sky": "sunny"}'),
    )
    expected = recorded["messages"]
    expected[1]["content"] = None  # llama.cpp's own replies use null beside tool calls
    assert to_openai_messages(messages) == expected


# --- context and state -------------------------------------------------------------------

CONTEXT = [
    Context(description="User timezone", value="Europe/Paris"),
    Context(description="Plan", value="pro"),
]
CONTEXT_TEXT = "Context:\n- User timezone: Europe/Paris\n- Plan: pro"


@pytest.mark.parametrize(
    ("leading", "at"),
    [
        pytest.param((), 0, id="no-system"),
        pytest.param(({"id": "s", "role": "system", "content": "S"},), 1, id="after-system"),
        pytest.param(
            (
                {"id": "s", "role": "system", "content": "S"},
                {"id": "d", "role": "developer", "content": "D"},
            ),
            2,
            id="after-system-and-developer",
        ),
    ],
)
def test_context_and_state_follow_the_leading_system_messages(
    leading: tuple[dict[str, Any], ...], at: int
) -> None:
    late_system = {"id": "s2", "role": "system", "content": "late"}
    out = to_openai_messages(
        msgs(*leading, user("Hi"), late_system), context=CONTEXT, state={"b": 1, "a": "é"}
    )
    assert out[at] == {"role": "system", "content": CONTEXT_TEXT}
    assert out[at + 1] == {"role": "system", "content": 'Current state (JSON):\n{"a": "é", "b": 1}'}
    assert out[at + 2] == {"role": "user", "content": "Hi"}
    assert out[-1] == {"role": "system", "content": "late"}


@pytest.mark.parametrize(
    ("context", "state", "contents"),
    [
        pytest.param((), None, [], id="neither"),
        pytest.param(CONTEXT, None, [CONTEXT_TEXT], id="context-only"),
        pytest.param((), {}, ["Current state (JSON):\n{}"], id="empty-state-is-sent"),
        pytest.param((), [1, None], ["Current state (JSON):\n[1, null]"], id="list-state"),
    ],
)
def test_context_and_state_are_optional(
    context: list[Context], state: Any, contents: list[str]
) -> None:
    out = to_openai_messages(msgs(user("Hi")), context=context, state=state)
    assert out == [
        *({"role": "system", "content": c} for c in contents),
        {"role": "user", "content": "Hi"},
    ]


def test_context_and_state_from_run_agent_input() -> None:
    body = run_input(user("Hi"), context=[{"description": "d", "value": "v"}], state={"n": 1})
    out = to_openai_messages(body.messages, context=body.context or (), state=body.state)
    assert [m["content"] for m in out] == [
        "Context:\n- d: v",
        'Current state (JSON):\n{"n": 1}',
        "Hi",
    ]


# --- tools -------------------------------------------------------------------------------


def test_tools() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [
        Tool(name="get_weather", description="Weather for a city", parameters=schema),
        Tool(name="now", description="The time"),
    ]
    assert to_openai_tools(tools) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": schema,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "now",
                "description": "The time",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


def test_tools_from_run_agent_input() -> None:
    body = run_input(tools=[{"name": "f", "description": "d", "parameters": {"type": "object"}}])
    assert to_openai_tools(body.tools or ()) == [
        {
            "type": "function",
            "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
        }
    ]
