"""The model providers through their official SDKs, against loopback servers speaking the real protocols."""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

import pytest

from codewell.agents.llm import (
    ChatModel,
    ContextOverflow,
    Message,
    ModelUnavailable,
    ToolCall,
    ToolSchema,
    build_model,
)
from codewell.config.models import ModelEndpoint
from codewell.config.store import parse_site_config
from codewell.core.errors import ConfigError
from tests.fakes.llm import Call, Fail, FakeAnthropic, FakeModel, FakeOpenAI, Step, Turn

KEY = "sk-test-Zq8v7Xw2Lm4Np6Rt"
ENV = {"CW_TEST_MODEL_KEY": KEY}
TOOLS = [
    ToolSchema(
        "read_file",
        "Read a file",
        {"type": "object", "properties": {"repo": {"type": "string"}, "path": {"type": "string"}}},
    )
]
FAKES = {"openai-compatible": FakeOpenAI, "anthropic": FakeAnthropic}


def endpoint(fake: FakeModel, **extra: Any) -> ModelEndpoint:
    provider = "anthropic" if fake.protocol == "anthropic" else "openai-compatible"
    entry = {"provider": provider, "baseURL": fake.base_url, "model": "test-model", "apiKeyEnv": "CW_TEST_MODEL_KEY"}
    return ModelEndpoint.model_validate({**entry, **extra})


def model_of(fake: FakeModel, **extra: Any) -> ChatModel:
    return build_model(endpoint(fake, **extra), ENV)


def conversation(call: ToolCall) -> list[Message]:
    return [
        Message("system", "You answer questions about code."),
        Message("user", "Where is main?"),
        Message("assistant", "Let me look.", (call,)),
        Message("tool", "1: def main():", tool_call_id=call.id),
    ]


def test_openai_protocol_tool_calls_and_usage() -> None:
    script = [Turn(calls=[Call("read_file", {"repo": "a/b", "path": "x.py"})], input_tokens=321, output_tokens=12)]
    with FakeOpenAI([*script, Turn(text="It is in x.py.", input_tokens=400, output_tokens=30)], api_key=KEY) as fake:
        model = model_of(fake, maxOutputTokens=777)
        first = model.complete([Message("system", "sys"), Message("user", "Where is main?")], TOOLS)
        assert first.tool_calls == [ToolCall("call_0001", "read_file", '{"repo": "a/b", "path": "x.py"}')]
        assert (first.usage.input_tokens, first.usage.output_tokens, first.stop_reason) == (321, 12, "tool_calls")
        second = model.complete(conversation(first.tool_calls[0]), TOOLS)
        assert (second.text, second.tool_calls, second.usage.input_tokens) == ("It is in x.py.", [], 400)

    request = fake.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "test-model"
    assert request.body["max_tokens"] == 777
    assert request.body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Where is main?"},
    ]
    assert request.body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file", "parameters": TOOLS[0].parameters},
        }
    ]
    replay = fake.requests[1].body["messages"]
    assert replay[2]["tool_calls"] == [
        {
            "id": "call_0001",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"repo": "a/b", "path": "x.py"}'},
        }
    ]
    assert replay[3] == {"role": "tool", "tool_call_id": "call_0001", "content": "1: def main():"}


def test_anthropic_protocol_tool_use_and_usage() -> None:
    script = [Turn(text="Looking.", calls=[Call("read_file", {"repo": "a/b", "path": "x.py"})], input_tokens=50)]
    with FakeAnthropic([*script, Turn(text="In x.py.", output_tokens=9)], api_key=KEY) as fake:
        model = model_of(fake)
        first = model.complete([Message("system", "sys"), Message("user", "Where is main?")], TOOLS)
        assert first.text == "Looking."
        assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
            ("read_file", {"repo": "a/b", "path": "x.py"})
        ]
        assert (first.usage.input_tokens, first.stop_reason) == (50, "tool_calls")
        second = model.complete(conversation(first.tool_calls[0]), TOOLS)
        assert (second.text, second.usage.output_tokens, second.stop_reason) == ("In x.py.", 9, "stop")

    request = fake.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers.get("x-api-key") == KEY or request.headers.get("authorization") == f"Bearer {KEY}"
    assert request.headers["anthropic-version"]
    assert request.body["system"] == "sys"
    assert request.body["messages"] == [{"role": "user", "content": "Where is main?"}]
    assert request.body["tools"] == [
        {"name": "read_file", "description": "Read a file", "input_schema": TOOLS[0].parameters}
    ]
    replay = fake.requests[1].body["messages"]
    call_id = first.tool_calls[0].id
    assert replay[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"repo": "a/b", "path": "x.py"}},
        ],
    }
    assert replay[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "1: def main():"}],
    }


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_429_is_retried_after_retry_after(provider: str) -> None:
    with FAKES[provider]([Fail(429, retry_after="1"), Turn(text="ok")]) as fake:
        started = time.monotonic()
        reply = model_of(fake).complete([Message("user", "hi")], [])
    assert reply.text == "ok"
    assert reply.retries == 1
    gap = fake.requests[1].at - fake.requests[0].at
    assert 0.95 <= gap < 3, gap  # the header's 1 s, not the 0.5 s default back-off
    assert time.monotonic() - started >= 1


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_5xx_retried_with_backoff_then_given_up_safely(provider: str) -> None:
    script: list[Step] = [Fail(500), Fail(503), Fail(502), Turn(text="never")]
    with FAKES[provider](script) as fake, pytest.raises(ModelUnavailable) as caught:
        model_of(fake, maxRetries=2).complete([Message("user", "hi")], [])
    assert len(fake.requests) == 3
    gaps = [b.at - a.at for a, b in zip(fake.requests, fake.requests[1:], strict=False)]
    assert gaps[0] >= 0.5
    assert gaps[1] >= 1.0
    assert caught.value.reason == "server_error"
    assert caught.value.message == "the model endpoint failed (HTTP 502) after 2 retries"
    assert "127.0.0.1" not in str(caught.value)


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_slow_model_times_out(provider: str) -> None:
    with FAKES[provider]([Turn(text="late", delay=3), Turn(text="late again", delay=3)]) as fake:
        started = time.monotonic()
        with pytest.raises(ModelUnavailable) as caught:
            model_of(fake, timeoutSeconds=0.5, maxRetries=1).complete([Message("user", "hi")], [])
        elapsed = time.monotonic() - started
    assert caught.value.reason == "timeout"
    assert len(fake.requests) == 2
    assert elapsed < 2.8  # two 0.5 s attempts and one back-off, not the model's 3 s


def test_deadline_bounds_attempts_and_waits() -> None:
    with FakeOpenAI([Fail(429, retry_after="5"), Turn(text="ok")]) as fake:
        started = time.monotonic()
        with pytest.raises(ModelUnavailable, match="time budget ends before a retry"):
            model_of(fake).complete([Message("user", "hi")], [], deadline=time.monotonic() + 2)
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_context_overflow_is_recognised(provider: str) -> None:
    script: list[Step] = [Fail(400, code="context_length_exceeded", message="maximum context length is 8192")]
    with FAKES[provider](script) as fake, pytest.raises(ContextOverflow):
        model_of(fake).complete([Message("user", "hi")], [])
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", sorted(FAKES))
def test_wrong_key_never_reaches_errors_or_logs(provider: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with (
        FAKES[provider]([Turn(text="unused")], api_key="sk-the-right-one") as fake,
        pytest.raises(ModelUnavailable) as caught,
    ):
        model_of(fake).complete([Message("user", "hi")], [])
    assert caught.value.reason == "refused"
    assert str(caught.value).startswith("the model endpoint rejected the API key (HTTP 401)")
    assert len(fake.requests) == 1  # a refused key is not retried
    for fragment in (KEY, KEY[:6], KEY[-4:]):
        assert fragment not in str(caught.value)
        assert fragment not in caplog.text


def test_missing_key_variable_is_named_not_valued() -> None:
    with FakeOpenAI([]) as fake, pytest.raises(ModelUnavailable) as caught:
        build_model(endpoint(fake), {})
    assert caught.value.reason == "no_key"
    assert "CW_TEST_MODEL_KEY is not set" in caught.value.message


def test_unreachable_endpoint_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        entry = {
            "provider": "openai-compatible",
            "baseURL": f"http://127.0.0.1:{port}/v1",
            "model": "m",
            "maxRetries": 1,
        }
        with pytest.raises(ModelUnavailable) as caught:
            build_model(ModelEndpoint.model_validate(entry), {}).complete([Message("user", "hi")], [])
    assert caught.value.reason == "unreachable"
    assert caught.value.message == "the model endpoint could not be reached after 1 retries"


def test_models_config_errors_name_the_key_path() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_site_config(
            '{"models": {"default": {"provider": "gpt", "model": "m"},'
            ' "codeFinder": {"provider": "anthropic", "model": "m", "baseURL": "https://user:pw@llm.example/v1",'
            ' "apiKeyEnv": "not a name", "timeoutSeconds": 0}}}'
        )
    message = str(caught.value)
    assert "models.default.provider: Input should be 'openai-compatible' or 'anthropic'" in message
    assert "models.codeFinder.baseURL: must not hold credentials" in message
    assert "models.codeFinder.apiKeyEnv:" in message
    assert "models.codeFinder.timeoutSeconds:" in message
    assert "pw@" not in message
    config = parse_site_config(
        '{"models": {"default": {"provider": "anthropic", "model": "claude", "apiKeyEnv": "K"}}}'
    )
    assert config.models.default is not None
    assert config.models.default.max_retries == 3
    assert config.models.code_finder is None
