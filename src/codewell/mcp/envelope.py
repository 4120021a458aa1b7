"""Transport answers the gate gives before the SDK sees a request (issue #22): HTTP methods a stateless server
does not serve, protocol versions it does not speak, and bodies that are not one JSON-RPC message.

- `GET` (the server-to-client SSE stream), `DELETE` (ending a session) and every other method but `POST`:
  `405` with `Allow: POST`. The server is stateless, so a GET stream could never carry anything: the SDK
  kept it open forever with a ping every 15 s, one descriptor per caller. The MCP transport spec allows 405.
- An `MCP-Protocol-Version` header naming a version we do not serve: `400` with JSON-RPC error `-32022`,
  the supported versions in the message and in `data.supported` (the 2026-07-28 shape).
- A body the request-body policy refuses (codewell.http.bodies: not JSON, nested more than 64 levels, `NaN`
  or `Infinity`): `400` with `-32700` Parse error naming the rule (the SDK's own parser took `NaN`, and the
  message then read as a notification: `202` and no answer).
- A JSON array (a JSON-RPC batch, removed from MCP in 2025-06-18), a JSON value that is not an object, an
  `id` that is neither a string nor an integer (an object, array, bool, float or null: such a message used to
  read as a notification, `202` with no answer), or an object that is not a JSON-RPC request, notification or
  response: `400` with `-32600` Invalid Request and a short message (the SDK answered `-32602` with a
  pydantic dump).
- A call that meets a storage fault (`StorageUnavailable`, or an `OSError` that means a read-only, full or
  unwritable data directory): `503` with `Retry-After` and `-32004` (`storage_unavailable`), never a tool
  error inside `200`; the cause is logged once a minute (docs/security.md, "Storage faults").
"""

from __future__ import annotations

from typing import Any

from mcp_types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

from codewell.core.errors import StorageUnavailable
from codewell.http.bodies import InvalidJson, parse_json

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
# JSON-RPC error code (implementation-defined server error range) of a call that met a storage fault: retry later.
STORAGE_UNAVAILABLE = -32004
SUPPORTED_VERSIONS_TEXT = ", ".join(SUPPORTED_PROTOCOL_VERSIONS)


def error_response(
    status: int,
    code: int,
    message: str,
    request_id: Any = None,
    data: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON-RPC error object as the whole HTTP answer (as the SDK transport writes its own refusals)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    headers = {"Allow": "POST", **(headers or {})} if status == 405 else headers
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status, headers=headers)


def storage_unavailable(fault: StorageUnavailable, request_id: Any = None) -> JSONResponse:
    """`503` with `Retry-After` and JSON-RPC error `-32004` for a call that met a storage fault (a database locked
    past its busy timeout, a read-only or full data directory), as REST routes answer it (http/errors.py): the
    fault is outside the call and clears by itself or by an operator's hand, so the client is told to retry
    instead of being handed a tool error it would read as the tool's answer. `data` repeats the REST envelope's
    code and hint and the seconds to wait."""
    data: dict[str, Any] = {"code": fault.code, "retryAfter": fault.retry_after}
    if fault.hint:
        data["hint"] = fault.hint
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else None
    return error_response(503, STORAGE_UNAVAILABLE, fault.message, request_id, data=data, headers=headers)


def method_not_allowed(method: str) -> Response:
    return error_response(
        405,
        INVALID_REQUEST,
        f"Method Not Allowed: {method[:20]}. This MCP server is stateless: send each JSON-RPC message with POST; "
        "it opens no server-to-client stream (GET) and has no session to end (DELETE)",
    )


def _valid_id(request_id: Any) -> bool:
    """A JSON-RPC id MCP accepts: a string or an integer (MCP forbids null; a bool is no integer here)."""
    return isinstance(request_id, str | int) and not isinstance(request_id, bool)


def _request_id(message: Any) -> Any:
    """The id to answer with: the message's own when it has a valid one, else null (JSON-RPC 2.0 §5)."""
    if isinstance(message, dict) and _valid_id(message.get("id")):
        return message.get("id")
    return None


def checked_message(headers: Headers, body: bytes) -> dict[str, Any] | Response:
    """The POST's JSON-RPC message object, or the answer refusing it: the protocol version, the body policy's
    parser (codewell.http.bodies: not JSON, too deep, NaN → -32700 Parse error), a batch, a value that is not
    an object, or an `id` that is neither a string nor an integer (→ -32600 Invalid Request). Every refusal is a
    400 with a JSON-RPC error whose id is null unless the message had a valid one (the transport spec: "an
    HTTP error status code ... MAY comprise a JSON-RPC error response that has no id")."""
    try:
        message: Any = parse_json(body)
        problem: InvalidJson | None = None
    except InvalidJson as exc:
        message, problem = None, exc
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
    if problem is not None:
        return error_response(400, PARSE_ERROR, f"Parse error: {problem.message}")
    if isinstance(message, list):
        return error_response(
            400,
            INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18); "
            "send one JSON-RPC message per POST",
        )
    if not isinstance(message, dict):
        return error_response(400, INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC message object")
    if "id" in message and not _valid_id(message["id"]) and not _is_error_response(message):
        # Without this an object or array id made the message read as a notification: 202 and no answer.
        return error_response(400, INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    return message


def _is_error_response(message: dict[str, Any]) -> bool:
    """A JSON-RPC error response, whose id may be null (the peer could not read the request's)."""
    return "error" in message and "method" not in message and message["id"] is None


def refusal(message: dict[str, Any]) -> Response | None:
    """The answer for a message object that is no JSON-RPC request, notification or response, or None to let
    it through to the SDK."""
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
