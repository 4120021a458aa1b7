"""The handshake-era fast path answers tools/list and tools/call exactly as the SDK transport does."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Message

from codewell.core.tools import Endpoint, ToolSpec
from codewell.mcp import envelope, fastpath
from codewell.mcp.http import McpGate
from codewell.mcp.registry import ToolRegistry
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user
from tests.functional.mcp.tools import TEST_TOOLS

HEADERS = [
    (b"host", b"127.0.0.1:7080"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"user-agent", b"equivalence-test"),
]


def http_scope(body: bytes, actor: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/.api/mcp",
        "raw_path": b"/.api/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [*HEADERS, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 7080),
        "state": {"actor": actor},
    }


async def run_asgi(app: Any, scope: dict[str, Any], body: bytes) -> dict[str, Any]:
    sent: list[Message] = []
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()  # the client stays connected until the response is complete
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    data = next(line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
    return dict(json.loads(data))


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "é"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"times": 0}}},
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "missing_repo", "arguments": {"repo": "x"}},
        },
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "deepsearch"}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "whoami"}},
    ],
)
async def test_fast_path_matches_the_sdk(runtime: Runtime, message: dict[str, Any]) -> None:
    runtime.provide(ToolRegistry, ToolRegistry(TEST_TOOLS))
    actor = actor_of_user(runtime, make_user(runtime, "alice"))
    gate = McpGate(runtime)
    body = json.dumps(message).encode()
    scope = http_scope(body, actor)
    request = Request(scope)
    parsed = envelope.checked_message(request.headers, body)
    assert isinstance(parsed, dict)
    assert fastpath.eligible_request(request, parsed)
    fast = await run_asgi(lambda s, r, w: _fast(gate, request, parsed, s, r, w), scope, body)
    manager = StreamableHTTPSessionManager(gate.servers[Endpoint.CORE], stateless=True)
    async with manager.run():
        sdk = await run_asgi(manager.handle_request, http_scope(body, actor), body)
    assert fast == sdk


async def _fast(gate: McpGate, request: Request, message: dict[str, Any], scope: Any, receive: Any, send: Any) -> None:
    response = await fastpath.answer(gate.runtime, gate.caller, Endpoint.CORE, request.state.actor, request, message)
    await response(scope, receive, send)


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}', {}),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', {}),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}', {}),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {"mcp-protocol-version": "2026-07-28"}),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {"mcp-session-id": "abc"}),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {"accept": "application/json"}),
    ],
)
def test_everything_else_goes_to_the_sdk(body: bytes, headers: dict[str, str]) -> None:
    scope = http_scope(body, None)
    merged = {k.decode(): v.decode() for k, v in scope["headers"]} | headers
    scope["headers"] = [(k.encode(), v.encode()) for k, v in merged.items()]
    request = Request(scope)
    message = envelope.checked_message(request.headers, body)
    assert isinstance(message, dict)
    assert not fastpath.eligible_request(request, message)


@pytest.mark.parametrize(
    "body",
    [
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
        b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
        b"{broken",
    ],
)
def test_bodies_the_gate_refuses_never_reach_the_fast_path(body: bytes) -> None:
    assert not isinstance(envelope.checked_message(Request(http_scope(body, None)).headers, body), dict)


def test_spec_list_is_shared() -> None:
    assert {t.name for t in TEST_TOOLS} >= {"echo", "whoami"}
    assert all(isinstance(t, ToolSpec) for t in TEST_TOOLS)
