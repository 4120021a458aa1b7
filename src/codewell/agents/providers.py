"""The two providers behind `llm.ChatModel`, each through its official SDK: retries with back-off (429, 5xx,
timeouts, refused connections; `Retry-After` honoured), error classification into ModelUnavailable /
ContextOverflow with messages that never carry the key, the endpoint or the provider's text, and the wire
formats of the chat-completions and messages protocols.

Imported only by `llm.build_model`, on first use: the SDKs are heavy to import.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import openai

from codewell.agents.llm import (
    ContextOverflow,
    Message,
    ModelReply,
    ModelUnavailable,
    ToolCall,
    ToolSchema,
    Usage,
)
from codewell.config.models import ModelEndpoint

log = logging.getLogger(__name__)

# Back-off between retries: BASE * 2**attempt seconds (with up to 25 % jitter), at most MAX; a Retry-After
# header is honoured up to RETRY_AFTER_MAX seconds (a longer wait fails the call rather than hang an answer).
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 8.0
RETRY_AFTER_MAX_SECONDS = 60.0
# --- retries ---------------------------------------------------------------------------------------------


def _retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` / `Retry-After` (delta seconds or an HTTP date), None when absent or bad."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _backoff(attempt: int) -> float:
    wait: float = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt)
    return wait * (1 + random.random() / 4)


@dataclass(frozen=True, slots=True)
class _Failure:
    """A failed attempt, classified: retry it (after `wait` when the server said), or give up with `error`."""

    retry: bool
    error: ModelUnavailable
    wait: float | None = None


def _classify(exc: Exception, status: int | None, headers: Any) -> _Failure:
    if isinstance(exc, openai.APITimeoutError | anthropic.APITimeoutError):
        return _Failure(True, ModelUnavailable("the model did not answer in time", reason="timeout"))
    if isinstance(exc, openai.APIConnectionError | anthropic.APIConnectionError):
        return _Failure(True, ModelUnavailable("the model endpoint could not be reached", reason="unreachable"))
    if status == 429:
        return _Failure(
            True,
            ModelUnavailable("the model endpoint is rate limiting requests (HTTP 429)", reason="rate_limited"),
            _retry_after(headers),
        )
    if status is not None and (status >= 500 or status in (408, 409)):
        return _Failure(
            True,
            ModelUnavailable(f"the model endpoint failed (HTTP {status})", reason="server_error"),
            _retry_after(headers),
        )
    if status in (401, 403):
        why = "rejected the API key" if status == 401 else "refused access"
        return _Failure(False, ModelUnavailable(f"the model endpoint {why} (HTTP {status})", reason="refused"))
    if status is not None:
        return _Failure(
            False, ModelUnavailable(f"the model endpoint refused the request (HTTP {status})", reason="refused")
        )
    return _Failure(False, ModelUnavailable("the model's reply could not be read", reason="malformed"))


def _overflow(body: Any, text: str) -> bool:
    """Whether a 400/413 answer says the prompt is too long (OpenAI's code, Anthropic's and vLLM's wording)."""
    code = ""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            code = str(inner.get("code") or inner.get("type") or "")
    lowered = f"{code} {text}".lower()
    return any(
        marker in lowered
        for marker in ("context_length_exceeded", "prompt is too long", "maximum context length", "context window")
    )


class _Base:
    """Shared by both providers: the retry loop around one SDK call, and the accounting log line."""

    provider = ""

    def __init__(self, endpoint: ModelEndpoint) -> None:
        self.endpoint = endpoint
        self.name = endpoint.model

    def _call(self, attempt: Callable[[float], ModelReply], deadline: float | None) -> ModelReply:
        retries = 0
        started = time.monotonic()
        while True:
            now = time.monotonic()
            timeout = self.endpoint.timeout_seconds
            if deadline is not None:
                timeout = min(timeout, deadline - now)
                if timeout <= 0.05:
                    raise ModelUnavailable("the answer's time budget ran out waiting for the model", reason="timeout")
            try:
                reply = attempt(timeout)
            except (openai.APIStatusError, anthropic.APIStatusError) as exc:
                status = exc.status_code
                if status in (400, 413) and _overflow(exc.body, _safe_text(exc)):
                    raise ContextOverflow("the prompt is longer than the model's context window") from None
                failure = _classify(exc, status, exc.response.headers)
            except (openai.APIError, anthropic.APIError) as exc:
                failure = _classify(exc, None, None)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError):
                # The SDK parsed the body but its shape is not a chat reply (a broken proxy, a wrong URL).
                failure = _Failure(False, ModelUnavailable("the model's reply could not be read", reason="malformed"))
            else:
                log.debug(
                    "model %s/%s answered in %.2f s (%d retries): %d input, %d output tokens, %d tool calls",
                    self.provider,
                    self.name,
                    time.monotonic() - started,
                    retries,
                    reply.usage.input_tokens,
                    reply.usage.output_tokens,
                    len(reply.tool_calls),
                )
                return ModelReply(reply.text, reply.tool_calls, reply.usage, reply.stop_reason, retries)
            if not failure.retry or retries >= self.endpoint.max_retries:
                log.warning(
                    "model %s/%s failed after %d retries: %s", self.provider, self.name, retries, failure.error.reason
                )
                if failure.retry and retries:
                    raise ModelUnavailable(
                        f"{failure.error.message} after {retries} retries", reason=failure.error.reason
                    ) from None
                raise failure.error from None
            wait = failure.wait if failure.wait is not None else _backoff(retries)
            if failure.wait is not None and wait > RETRY_AFTER_MAX_SECONDS:
                raise ModelUnavailable(
                    f"{failure.error.message}; it asks to retry after {wait:.0f} s", reason=failure.error.reason
                ) from None
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise ModelUnavailable(
                    f"{failure.error.message}; the answer's time budget ends before a retry",
                    reason=failure.error.reason,
                ) from None
            retries += 1
            log.info(
                "model %s/%s: %s, retry %d in %.2f s", self.provider, self.name, failure.error.reason, retries, wait
            )
            time.sleep(wait)


def _safe_text(exc: Exception) -> str:
    """The provider's error text, only to recognise a context overflow (never shown or logged)."""
    try:
        return str(exc)
    except Exception:
        return ""


# --- OpenAI chat completions -------------------------------------------------------------------------------


class OpenAICompatibleModel(_Base):
    """The chat-completions protocol (`POST {baseURL}/chat/completions`) through the `openai` SDK."""

    provider = "openai-compatible"

    def __init__(self, endpoint: ModelEndpoint, key: str) -> None:
        super().__init__(endpoint)
        self._client = openai.OpenAI(
            api_key=key, base_url=endpoint.base_url, timeout=endpoint.timeout_seconds, max_retries=0
        )

    def close(self) -> None:
        """Close the SDK client's pooled connections to the provider (answering.ModelClients.close)."""
        self._client.close()

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> ModelReply:
        wire = [_openai_message(m) for m in messages]
        tool_specs = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools
        ]

        def attempt(timeout: float) -> ModelReply:
            extra: dict[str, Any] = {"tools": tool_specs} if tool_specs else {}
            completion = self._client.chat.completions.create(
                model=self.endpoint.model,
                messages=wire,  # type: ignore[arg-type]
                max_tokens=self.endpoint.max_output_tokens,
                timeout=timeout,
                **extra,
            )
            choice = completion.choices[0]
            message = choice.message
            calls = [
                ToolCall(c.id or f"call_{i}", c.function.name, c.function.arguments or "")
                for i, c in enumerate(message.tool_calls or [])
                if c.type == "function"
            ]
            usage = completion.usage
            return ModelReply(
                text=message.content or "",
                tool_calls=calls,
                usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
                stop_reason=str(choice.finish_reason),
            )

        return self._call(attempt, deadline)


def _openai_message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
        if not m.content:
            out["content"] = None
    return out


# --- Anthropic messages ------------------------------------------------------------------------------------


class AnthropicModel(_Base):
    """The messages protocol (`POST {baseURL}/v1/messages`) through the `anthropic` SDK."""

    provider = "anthropic"

    def __init__(self, endpoint: ModelEndpoint, key: str) -> None:
        super().__init__(endpoint)
        self._client = anthropic.Anthropic(
            api_key=key, base_url=endpoint.base_url, timeout=endpoint.timeout_seconds, max_retries=0
        )

    def close(self) -> None:
        """Close the SDK client's pooled connections to the provider (answering.ModelClients.close)."""
        self._client.close()

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema], *, deadline: float | None = None
    ) -> ModelReply:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        wire = _anthropic_messages([m for m in messages if m.role != "system"])
        tool_specs = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]

        def attempt(timeout: float) -> ModelReply:
            extra: dict[str, Any] = {"tools": tool_specs} if tool_specs else {}
            if system:
                extra["system"] = system
            reply = self._client.messages.create(
                model=self.endpoint.model,
                max_tokens=self.endpoint.max_output_tokens,
                messages=wire,  # type: ignore[arg-type]
                timeout=timeout,
                **extra,
            )
            texts: list[str] = []
            calls: list[ToolCall] = []
            for block in reply.content:
                if block.type == "text":
                    texts.append(block.text)
                elif block.type == "tool_use":
                    calls.append(ToolCall(block.id, block.name, json.dumps(block.input)))
            stop = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}.get(
                str(reply.stop_reason), str(reply.stop_reason)
            )
            return ModelReply(
                text="".join(texts),
                tool_calls=calls,
                usage=Usage(reply.usage.input_tokens, reply.usage.output_tokens),
                stop_reason=stop,
            )

        return self._call(attempt, deadline)


def _anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Alternating user/assistant messages; tool results (one user message per turn) as `tool_result` blocks."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if m.is_error:
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        if m.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _as_object(c.arguments)})
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "(no text)"}]})
            continue
        if out and out[-1]["role"] == "user":
            previous = out[-1]["content"]
            if isinstance(previous, list):
                previous.append({"type": "text", "text": m.content})
            else:
                out[-1]["content"] = f"{previous}\n\n{m.content}"
            continue
        out.append({"role": "user", "content": m.content})
    return out


def _as_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
