"""Transport answers the gate gives before the SDK sees a request (issue #22): HTTP methods a stateless server
does not serve, protocol versions it does not speak, and bodies that are not one JSON-RPC message.

- `GET` (the server-to-client SSE stream), `DELETE` (ending a session) and every other method but `POST`:
  `405` with `Allow: POST`. The server is stateless, so a GET stream could never carry anything: the SDK
  kept it open forever with a ping every 15 s, one descriptor per caller. The MCP transport spec allows 405.
- An `MCP-Protocol-Version` header naming a version we do not serve: `400` with JSON-RPC error `-32022`,
  the supported versions in the message and in `data.supported` (the 2026-07-28 shape).
- A JSON array (a JSON-RPC batch, removed from MCP in 2025-06-18), a JSON value that is not an object, or an
  object that is not a JSON-RPC request, notification or response: `400` with `-32600` Invalid Request and a
  short message (the SDK answered `-32602` with a pydantic dump). Bodies that are not JSON at all still go
  to the SDK, which answers `-32700`.
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from mcp_types import INVALID_REQUEST, jsonrpc_message_adapter
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
SUPPORTED_VERSIONS_TEXT = ", ".join(SUPPORTED_PROTOCOL_VERSIONS)


def error_response(status: int, code: int, message: str, request_id: Any = None, data: Any = None) -> JSONResponse:
    """A JSON-RPC error object as the whole HTTP answer (as the SDK transport writes its own refusals)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    headers = {"Allow": "POST"} if status == 405 else None
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status, headers=headers)


def method_not_allowed(method: str) -> Response:
    return error_response(
        405,
        INVALID_REQUEST,
        f"Method Not Allowed: {method[:20]}. This MCP server is stateless: send each JSON-RPC message with POST; "
        "it opens no server-to-client stream (GET) and has no session to end (DELETE)",
    )


def _request_id(message: Any) -> Any:
    """The id to answer with: the message's own when it has a valid one, else null (JSON-RPC 2.0 §5)."""
    if isinstance(message, dict):
        request_id = message.get("id")
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            return request_id
    return None


def refusal(headers: Headers, body: bytes) -> Response | None:
    """The answer for a POST the SDK must not see, or None to let it through."""
    try:
        message: Any = pydantic_core.from_json(body)
        parsed = True
    except ValueError:
        message, parsed = None, False
    version = headers.get(PROTOCOL_VERSION_HEADER)
    if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS:
        return error_response(
            400,
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {version[:40]!r} (MCP-Protocol-Version header); "
            f"supported versions: {SUPPORTED_VERSIONS_TEXT}",
            _request_id(message),
            {"supported": list(SUPPORTED_PROTOCOL_VERSIONS), "requested": version[:40]},
        )
    if not parsed:
        return None  # the SDK answers -32700 Parse error
    if isinstance(message, list):
        return error_response(
            400,
            INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18); "
            "send one JSON-RPC message per POST",
        )
    if not isinstance(message, dict):
        return error_response(400, INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC message object")
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return error_response(400, INVALID_REQUEST, _invalid_message(message), _request_id(message))
    return None


def _invalid_message(message: dict[str, Any]) -> str:
    """What is wrong with an object that is no JSON-RPC message, in one line (no validator dump)."""
    if message.get("jsonrpc") != "2.0":
        return 'Invalid Request: "jsonrpc" must be "2.0"'
    if "method" in message and not isinstance(message["method"], str):
        return 'Invalid Request: "method" must be a string'
    if "method" not in message and "result" not in message and "error" not in message:
        return 'Invalid Request: a request needs a "method" (and an "id" unless it is a notification)'
    if "params" in message and not isinstance(message["params"], dict):
        return 'Invalid Request: "params" must be an object'
    return (
        'Invalid Request: not a JSON-RPC 2.0 request ("jsonrpc", "method", "id" a string or integer, '
        '"params" an object), notification or response'
    )
