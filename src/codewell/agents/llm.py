"""Language models behind one small protocol: `ChatModel.complete(messages, tools) -> ModelReply`.

Two providers, each through its official SDK: `openai-compatible` (the chat-completions protocol: OpenAI, vLLM,
Ollama, llama.cpp server, LM Studio) and `anthropic` (the messages protocol). Both speak tool calling, give
each call its own timeout (never past the answer's deadline), retry 429 and 5xx answers, timeouts and refused
connections with exponential back-off (a `Retry-After` header wins), and report the tokens each call used.

Secrets: the API key is read from the environment variable the site config names (`apiKeyEnv`), handed to the
SDK and nowhere else: it is never logged, and no error carries it, the provider's error text (which may echo a
part of the key) or the endpoint's address. A provider that fails raises `ModelUnavailable`, whose message is
safe to show to anyone; a prompt too long for the model raises `ContextOverflow` so the loop can shorten it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from codewell.config.models import ModelEndpoint
from codewell.core.errors import Unavailable

__all__ = [
    "ChatModel",
    "ContextOverflow",
    "Message",
    "ModelReply",
    "ModelUnavailable",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "build_model",
]

log = logging.getLogger(__name__)

# An API key for endpoints that need none (a local vLLM or Ollama): the SDK insists on some value.
NO_KEY = "no-key"

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model asked for: its call id, the tool name and the arguments as the raw JSON text it wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, provider-neutral.

    `assistant` messages may carry `tool_calls`; `tool` messages answer one call (`tool_call_id`), with
    `is_error` when the call failed (unknown tool, bad arguments, not found).
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What one model turn produced: text, tool calls (possibly several, to run in parallel) and the tokens used."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    # "stop" (finished), "tool_calls", "length" (cut at maxOutputTokens) or the provider's own word.
    stop_reason: str = "stop"
    retries: int = 0


class ModelUnavailable(Unavailable):
    """The model could not answer (down, too slow, refusing, rate limited past the budget).

    The message says why in words safe for any reader: no key, no endpoint address, no provider error text.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message, hint="the answer falls back to the retrieval pipeline")
        self.reason = reason  # a short machine word: "timeout", "rate_limited", "server_error", "refused", ...


class ContextOverflow(Exception):
    """The prompt is longer than the model's context window (the provider said so); shorten it and retry."""


class ChatModel(Protocol):
    """One configured model. `name` is the configured model name (shown in stats, never a secret)."""

    name: str

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> ModelReply:
        """One model turn; `deadline` (time.monotonic()) bounds every attempt and the waits between them."""
        ...


def build_model(endpoint: ModelEndpoint, environ: dict[str, str] | None = None) -> ChatModel:
    """The ChatModel of a `models` entry; the API key comes from the variable `apiKeyEnv` names.

    Raises ModelUnavailable when that variable is not set (the message names the variable, never a value).
    """
    env = os.environ if environ is None else environ
    key = NO_KEY
    if endpoint.api_key_env is not None:
        value = env.get(endpoint.api_key_env, "").strip()
        if not value:
            raise ModelUnavailable(
                f"the model's API key is missing: the environment variable {endpoint.api_key_env} is not set",
                reason="no_key",
            )
        key = value
    elif endpoint.provider == "anthropic":
        raise ModelUnavailable(
            "the anthropic model needs apiKeyEnv (the variable holding its API key)", reason="no_key"
        )
    # The SDKs cost 1-3 s of import time, paid by every `codewell` command and by `serve`: only a configured
    # model needs them, so they are imported here, on first use.
    from codewell.agents import providers  # noqa: PLC0415

    if endpoint.provider == "anthropic":
        return providers.AnthropicModel(endpoint, key)
    return providers.OpenAICompatibleModel(endpoint, key)
