"""A fast path for the two hot requests of the handshake era: a bare, session-less `tools/list` or
`tools/call` POST (what the reference system's own client and most agents send after connecting).

The SDK serves every request correctly but spends several milliseconds of CPU per request on per-request
task groups, memory streams and re-validating results against the protocol surface models. This path
answers those two methods directly with the same wire form (one SSE `message` event carrying the JSON-RPC
response) and the same semantics (tool lookup, validation, errors, usage events). Anything else (initialize,
notifications, batches, modern-era requests, sessions, malformed bodies, other methods) returns None and
goes to the SDK unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import orjson
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response

from codewell.core.actors import Actor
from codewell.core.tools import Endpoint
from codewell.mcp.server import ToolCaller, UnknownTool, run_call
from codewell.runtime import Runtime

_SSE_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
_METHODS = frozenset({"tools/list", "tools/call"})


def eligible_request(request: Request, message: dict[str, Any]) -> bool:
    """Whether this path may answer the parsed JSON-RPC message (else the SDK answers). The gate has parsed it
    under the body policy and checked its id (codewell.mcp.envelope.checked_message)."""
    headers = request.headers
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    if "mcp-session-id" in headers or not headers.get("content-type", "").startswith("application/json"):
        return False
    accept = headers.get("accept", "")
    if "application/json" not in accept or "text/event-stream" not in accept:
        return False
    if message.get("jsonrpc") != "2.0" or message.get("method") not in _METHODS:
        return False
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return False
    params = message.get("params", {})
    if not isinstance(params, dict):
        return False
    if message["method"] == "tools/call":
        arguments = params.get("arguments")
        if not isinstance(params.get("name"), str) or not (arguments is None or isinstance(arguments, dict)):
            return False
    elif "cursor" in params:
        return False  # pagination is not used by our lists; let the SDK answer whatever a cursor means
    return True


def encode(payload: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON; orjson is several times faster than json on tool results, json covers what it
    refuses (integers beyond 64 bits, non-string keys, lone surrogates: escaped, so the bytes stay valid)."""
    try:
        return orjson.dumps(payload)
    except TypeError:  # orjson.JSONEncodeError subclasses TypeError
        return json.dumps(payload, separators=(",", ":")).encode()


def sse(payload: dict[str, Any]) -> Response:
    body = b"event: message\r\ndata: " + encode(payload) + b"\r\n\r\n"
    return Response(body, media_type="text/event-stream", headers=_SSE_HEADERS)


def tool_entries(caller: ToolCaller, endpoint: Endpoint) -> list[dict[str, Any]]:
    """The tools/list entries as plain dicts (the same fields the SDK path emits)."""
    entries = []
    for tool in caller.registry.tools_for(endpoint, caller.runtime.config, caller.runtime):
        entry: dict[str, Any] = {
            "name": tool.spec.name,
            "description": tool.spec.description,
            "inputSchema": tool.spec.input_schema,
        }
        if tool.spec.output_schema:
            entry["outputSchema"] = tool.spec.output_schema
        entries.append(entry)
    return entries


def answer_now(
    runtime: Runtime, caller: ToolCaller, endpoint: Endpoint, actor: Actor, client: str, message: dict[str, Any]
) -> Response:
    """The SSE response for an eligible request, computed in the calling thread (a worker thread: the gate runs
    it in the same hop as its own access checks). Raises StorageUnavailable as `ToolCaller.call`."""
    request_id = message["id"]
    if message["method"] == "tools/list":
        return sse({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tool_entries(caller, endpoint)}})
    params = message.get("params", {})
    try:
        wire = run_call(runtime, caller, endpoint, actor, client, params["name"], params.get("arguments"))
    except UnknownTool as exc:
        return sse({"jsonrpc": "2.0", "id": request_id, "error": {"code": INVALID_PARAMS, "message": exc.message}})
    return sse({"jsonrpc": "2.0", "id": request_id, "result": wire.wire()})


def client_of(request: Request) -> str:
    """The client a usage event names (the User-Agent: this era's requests carry no client info)."""
    return request.headers.get("user-agent", "")[:200]


async def answer(
    runtime: Runtime, caller: ToolCaller, endpoint: Endpoint, actor: Actor, request: Request, message: dict[str, Any]
) -> Response:
    """The SSE response for an eligible request, computed in a worker thread."""
    client = client_of(request)
    return await anyio.to_thread.run_sync(answer_now, runtime, caller, endpoint, actor, client, message)
