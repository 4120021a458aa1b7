"""Loopback model servers speaking the real wire protocols, replaying scripted turns and recording requests.

`FakeOpenAI` serves `POST /v1/chat/completions` (the OpenAI chat-completions protocol: `choices[0].message`
with `tool_calls[].function.{name,arguments}` where `arguments` is a JSON *string*, `usage.prompt_tokens` /
`completion_tokens`, errors as `{"error": {"message", "type", "param", "code"}}`, `Authorization: Bearer`).
`FakeAnthropic` serves `POST /v1/messages` (Anthropic's messages protocol: `content` blocks `text` /
`tool_use{id,name,input}`, `stop_reason`, `usage.input_tokens` / `output_tokens`, errors as
`{"type": "error", "error": {"type", "message"}}`, `x-api-key` or a bearer token). Both answer 429 with
`Retry-After` when scripted, and echo a part of a wrong key in the 401 message as real providers do (so tests
can prove that text never reaches logs or answers).

    with FakeOpenAI([Turn(calls=[Call("read_file", {...})]), Turn(text="Done: ...")], api_key="sk-x") as fake:
        endpoint = {"provider": "openai-compatible", "baseURL": fake.base_url, ...}
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server import LoopbackServer


@dataclass(frozen=True)
class Call:
    """A tool call the model makes; `raw` (OpenAI only) sends these exact argument characters (malformed JSON)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None


@dataclass(frozen=True)
class Turn:
    """One scripted model reply: text and/or tool calls, with the usage reported."""

    text: str = ""
    calls: tuple[Call, ...] | list[Call] = ()
    input_tokens: int = 100
    output_tokens: int = 20
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    stop: str | None = None  # finish/stop reason override


@dataclass(frozen=True)
class Fail:
    """A scripted error answer: status, optional Retry-After, and an error code (e.g. context_length_exceeded)."""

    status: int
    retry_after: str | None = None
    code: str | None = None
    message: str = "scripted failure"


Step = Turn | Fail


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


class FakeModel:
    """The shared part of both fakes: the script, the recorded requests, the loopback server."""

    protocol = ""

    def __init__(self, script: Sequence[Step], *, api_key: str | None = None) -> None:
        self.script = list(script)
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._ids = 0
        self._server = LoopbackServer(Starlette(routes=self._routes()))

    # --- lifecycle ---

    def __enter__(self) -> Self:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def base_url(self) -> str:
        raise NotImplementedError

    def _routes(self) -> list[Route]:
        raise NotImplementedError

    def _next(self) -> Step | None:
        with self._lock:
            return self.script.pop(0) if self.script else None

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:04d}"

    async def _record(self, request: Request) -> dict[str, Any]:
        body = await request.json()
        self.requests.append(Recorded(request.url.path, dict(request.headers), body, time.monotonic()))
        return dict(body)


class FakeOpenAI(FakeModel):
    protocol = "openai"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _routes(self) -> list[Route]:
        return [Route("/v1/chat/completions", self._completions, methods=["POST"])]

    @staticmethod
    def _error(
        status: int, message: str, kind: str, code: str | None, headers: dict[str, str] | None = None
    ) -> JSONResponse:
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        return JSONResponse(body, status_code=status, headers=headers)

    async def _completions(self, request: Request) -> JSONResponse:
        body = await self._record(request)
        if self.api_key is not None:
            given = request.headers.get("authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                shown = f"{given[:3]}***{given[-4:]}" if len(given) > 8 else "***"
                return self._error(
                    401, f"Incorrect API key provided: {shown}.", "invalid_request_error", "invalid_api_key"
                )
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            return self._error(400, "messages and model are required", "invalid_request_error", None)
        step = self._next()
        if step is None:
            return self._error(500, "the fake's script is exhausted", "server_error", None)
        if isinstance(step, Fail):
            kinds = {429: "rate_limit_error", 400: "invalid_request_error"}
            headers = {"retry-after": step.retry_after} if step.retry_after is not None else None
            return self._error(step.status, step.message, kinds.get(step.status, "server_error"), step.code, headers)
        if step.delay:
            await asyncio.sleep(step.delay)
        calls = [
            {
                "id": self._id("call_"),
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw if c.raw is not None else json.dumps(c.arguments)},
            }
            for c in step.calls
        ]
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        reply = {
            "id": self._id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": step.stop or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": step.input_tokens,
                "completion_tokens": step.output_tokens,
                "total_tokens": step.input_tokens + step.output_tokens,
            },
        }
        return JSONResponse(reply)


class FakeAnthropic(FakeModel):
    protocol = "anthropic"

    @property
    def base_url(self) -> str:
        return self.url

    def _routes(self) -> list[Route]:
        return [Route("/v1/messages", self._messages, methods=["POST"])]

    @staticmethod
    def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(
            {"type": "error", "error": {"type": kind, "message": message}}, status_code=status, headers=headers
        )

    async def _messages(self, request: Request) -> JSONResponse:
        body = await self._record(request)
        # The key comes as `x-api-key` or, from recent SDKs, as `Authorization: Bearer`.
        given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        if self.api_key is not None and given != self.api_key:
            return self._error(401, "authentication_error", f"invalid x-api-key {given[:6]}...")
        if not request.headers.get("anthropic-version"):
            return self._error(400, "invalid_request_error", "anthropic-version header is required")
        if not isinstance(body.get("messages"), list) or not body.get("max_tokens") or not body.get("model"):
            return self._error(400, "invalid_request_error", "model, messages and max_tokens are required")
        roles = [m.get("role") for m in body["messages"]]
        if (roles and roles[0] != "user") or any(a == b for a, b in itertools.pairwise(roles)):
            return self._error(400, "invalid_request_error", "messages: roles must alternate, starting with user")
        step = self._next()
        if step is None:
            return self._error(500, "api_error", "the fake's script is exhausted")
        if isinstance(step, Fail):
            kinds = {429: "rate_limit_error", 400: "invalid_request_error", 529: "overloaded_error"}
            headers = {"retry-after": step.retry_after} if step.retry_after is not None else None
            message = "prompt is too long: 250000 tokens > 200000 maximum" if step.code else step.message
            return self._error(step.status, kinds.get(step.status, "api_error"), message, headers)
        if step.delay:
            await asyncio.sleep(step.delay)
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
        content += [
            {"type": "tool_use", "id": self._id("toolu_"), "name": c.name, "input": c.arguments} for c in step.calls
        ]
        reply = {
            "id": self._id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": step.stop or ("tool_use" if step.calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens},
        }
        return JSONResponse(reply)
