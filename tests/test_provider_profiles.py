"""Provider profiles (issue 57, point 2; README "Provider profiles"): ``--provider`` (and
``auto`` by the upstream's host) says what reasoning goes back and in which field, what is left
out, and the signature stand-in. The request each profile makes from one history, and three
turns of a server tool's loop against strict Groq and DeepSeek stand-ins over real sockets,
refused with the generic profile and accepted with theirs."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import RunAgentInput
from provider_emulators import Emulator

from bridge.config import PROVIDERS, BridgeConfig
from bridge.serve.http.app import create_app
from bridge.serve.run.profiles import PROFILES, SKIP_SIGNATURE, profile_of
from bridge.serve.run.request import build_chat_request
from servers import post, run_input, serve

SIGNED = '{"extra_content":{"google":{"thought_signature":"c2ln"}}}'
TOOL = {"name": "get_weather", "description": "The weather.", "parameters": {"type": "object"}}


def _call(call_id: str, encrypted: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"},
    }
    if encrypted is not None:
        call["encryptedValue"] = encrypted
    return call


#: An earlier turn that called a tool with no reasoning, then the turn going on: reasoning, a
#: step of two calls (the first signed), their results.
HISTORY: list[dict[str, Any]] = [
    {"id": "u1", "role": "user", "content": "Weather in Paris?"},
    {"id": "a1", "role": "assistant", "toolCalls": [_call("old")]},
    {"id": "t1", "role": "tool", "toolCallId": "old", "content": "sunny"},
    {"id": "a2", "role": "assistant", "content": "Sunny."},
    {"id": "u2", "role": "user", "content": "And Lyon and Nice?"},
    {"id": "r3", "role": "reasoning", "content": "Two calls."},
    {"id": "a3", "role": "assistant", "toolCalls": [_call("c1", SIGNED), _call("c2")]},
    {"id": "t2", "role": "tool", "toolCallId": "c1", "content": "rain"},
    {"id": "t3", "role": "tool", "toolCallId": "c2", "content": "wind"},
]


def _request(provider: str, **forwarded: Any) -> dict[str, Any]:
    config = BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model="m", provider=provider)
    given = RunAgentInput.model_validate(
        {
            "threadId": "t",
            "runId": "r",
            "state": {},
            "messages": HISTORY,
            "tools": [TOOL],
            "context": [],
            "forwardedProps": forwarded,
        }
    )
    return build_chat_request(given, config)


def _assistants(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]


def test_every_provider_named_has_a_profile() -> None:
    assert set(PROVIDERS) - {"auto"} == set(PROFILES)
    assert all(profile.source for profile in PROFILES.values())


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://generativelanguage.googleapis.com/v1beta/openai", "gemini"),
        ("https://us-central1-aiplatform.googleapis.com/v1/projects/p/endpoints/openapi", "gemini"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://api.cerebras.ai/v1", "cerebras"),
        ("https://api.mistral.ai/v1", "mistral"),
        ("https://api.deepseek.com", "deepseek"),
        ("https://api.moonshot.ai/v1", "kimi"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("https://api.perplexity.ai", "perplexity"),
        ("http://127.0.0.1:8080/v1", "generic"),
        ("https://groq.example.com/v1", "generic"),
    ],
)
def test_auto_picks_the_profile_by_the_upstreams_host(url: str, name: str) -> None:
    profile, why = profile_of(BridgeConfig(upstream_url=url, model="m"))
    assert profile.name == name
    assert ("host (" in why) == (name != "generic")
    named, why = profile_of(BridgeConfig(upstream_url=url, model="m", provider="groq"))
    assert (named.name, why) == ("groq", "--provider")


def test_generic_sends_the_current_turns_reasoning_and_the_providers_fields() -> None:
    old, current = _assistants(_request("generic"))
    assert "reasoning_content" not in old
    assert current["reasoning_content"] == "Two calls."
    assert current["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "c2ln"}}
    assert current["content"] is None


@pytest.mark.parametrize("provider", ["groq", "mistral", "perplexity"])
def test_strict_providers_get_no_reasoning_and_the_calls_own_keys_only(provider: str) -> None:
    body = _request(provider)
    for message in body["messages"]:
        assert not {"reasoning_content", "reasoning"} & set(message)
        for call in message.get("tool_calls") or []:
            assert set(call) == {"id", "type", "function"}


def test_cerebras_vllm_ollama_and_openrouter_take_reasoning() -> None:
    for provider in ("cerebras", "vllm", "ollama", "openrouter"):
        _, current = _assistants(_request(provider))
        assert current["reasoning"] == "Two calls." and "reasoning_content" not in current


@pytest.mark.parametrize("provider", ["deepseek", "kimi"])
def test_deepseek_and_kimi_get_reasoning_on_every_turn_that_called_tools_even_empty(
    provider: str,
) -> None:
    old, current = _assistants(_request(provider))
    assert old["reasoning_content"] == ""  # an earlier turn, and none was produced
    assert current["reasoning_content"] == "Two calls."
    answer = next(m for m in _request(provider)["messages"] if m.get("content") == "Sunny.")
    assert "reasoning_content" not in answer  # no tool calls: not required


def test_mistral_never_gets_stream_options_or_max_completion_tokens() -> None:
    body = _request("mistral", max_completion_tokens=50)
    assert "stream_options" not in body and "max_completion_tokens" not in body
    assert body["max_tokens"] == 50
    assert "stream_options" in _request("generic")


def test_gemini_gets_the_stand_in_only_where_the_current_turn_has_no_signature() -> None:
    old, current = _assistants(_request("gemini"))
    assert "extra_content" not in old["tool_calls"][0]  # an earlier turn: not validated
    first, second = current["tool_calls"]
    assert first["extra_content"] == {"google": {"thought_signature": "c2ln"}}  # its own
    assert "extra_content" not in second  # a parallel step's other call: unsigned
    assert "reasoning_content" not in current
    unsigned = [dict(m) for m in HISTORY]
    unsigned[6] = {**unsigned[6], "toolCalls": [_call("c1"), _call("c2")]}
    config = BridgeConfig(upstream_url="http://127.0.0.1:9/v1", model="m", provider="gemini")
    given = RunAgentInput.model_validate(
        {"threadId": "t", "runId": "r", "state": {}, "messages": unsigned, "tools": [TOOL],
         "context": [], "forwardedProps": {}}
    )  # fmt: skip
    _, stood_in = _assistants(build_chat_request(given, config))
    assert stood_in["tool_calls"][0]["extra_content"] == {
        "google": {"thought_signature": SKIP_SIGNATURE}
    }
    assert "extra_content" not in stood_in["tool_calls"][1]


def test_llama_cpp_pythons_server_gets_an_empty_content_beside_calls() -> None:
    _, current = _assistants(_request("llama-cpp-python"))
    assert current["content"] == ""


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


@pytest.mark.parametrize("kind", ["groq", "deepseek"])
def test_three_turns_of_a_tool_loop_pass_a_strict_provider_with_its_profile(kind: str) -> None:
    for provider, accepted in (("generic", False), (kind, True)):
        emulator = Emulator(kind)
        messages: list[dict[str, Any]] = []
        with serve(emulator.app()) as upstream:
            config = BridgeConfig(upstream_url=f"{upstream}/v1", model="m", provider=provider)
            with serve(create_app(config, tools=[get_weather])) as bridge:
                for turn in range(1, 4):
                    messages.append({"id": f"u{turn}", "role": "user", "content": f"{turn}?"})
                    frames = post(f"{bridge}/", run_input(messages))
                    if frames[-1]["type"] == "RUN_ERROR":
                        break
                    messages += _held(frames)
        if accepted:
            assert emulator.refused == [], emulator.refused
            assert frames[-1]["type"] == "RUN_FINISHED"
            text = "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")
            assert text == "Turn 3: sunny in Paris"
            assert len(emulator.requests) == 6
        else:  # the stand-in is strict: the generic profile's request is refused, in its words
            assert emulator.refused, provider
            assert frames[-1]["type"] == "RUN_ERROR"
            assert emulator.refused[0] in frames[-1]["message"]


def _held(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from servers import messages_from

    return messages_from(frames)


def test_the_doctor_names_the_profile_a_refused_tool_loop_wants() -> None:
    """The doctor's second request of a tool loop, refused by a strict Groq: its advice names
    the way out (a profile that sends no reasoning back); its report, the profile it chose."""
    import asyncio

    from bridge.cli.doctor.probes import diagnose

    emulator = Emulator("groq")
    with serve(emulator.app()) as upstream:
        report = asyncio.run(diagnose(f"{upstream}/v1", model="m"))
    assert (report["provider"], report["provider_reason"]) == (
        "generic",
        "no provider known by the upstream's host",
    )
    assert report["reasoning_round_trip"] == "rejected"
    [advice] = [w for w in report["warnings"] if "refuses reasoning sent back" in w]
    assert "property 'reasoning_content' is unsupported" in advice
    assert "--provider whose profile sends none back (groq" in advice
