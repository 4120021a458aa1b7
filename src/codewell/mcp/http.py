"""HTTP side of the MCP server: one route catching /.api/mcp and every subpath, the gate in front of the
SDK transport, and RFC 9728 protected resource metadata at the host root.

Gate order (each answer is final): `mcp.enabled` false → 404 `no route`; unknown subpath → 404 `no route`;
bad Host → 421; bad Origin → 403; no credentials → 401 with a `WWW-Authenticate` challenge; an OAuth token
issued for another resource → 401 `invalid_token`; a token without an MCP-capable scope → 403
`insufficient_scope`; no `MCP#ACCESS` → 403 `forbidden`; the plan in force lacks the `mcp` feature → 403
with JSON-RPC error `-32003` naming the plan needed (codewell.licensing). The site config is read per
request, so changes apply without a restart. Then `codewell.mcp.envelope`: any method but POST → 405; a body over
the MCP family's cap (codewell.http.bodies, 4 MiB) → 413 `-32600`; an unsupported `MCP-Protocol-Version` → 400
listing the supported versions; a body the request-body policy refuses (not JSON, too deep, NaN) → 400
`-32700`; a batch, an `id` that is neither a string nor an integer, or a body that is no JSON-RPC message →
400 `-32600`. A storage fault met by the gate or by a tool call (a database locked past its busy timeout, a
read-only or full data directory) → 503 with `Retry-After` and JSON-RPC error `-32004`, its cause logged once
a minute, as REST routes answer it (docs/security.md, "Storage faults").

Transport: the SDK's Streamable HTTP session manager in stateless mode serves both protocol eras. A fresh
manager runs per request (its task group lives exactly as long as the request), so nothing depends on the
host application's lifespan and any replica can answer any request.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from codewell import authz
from codewell.authz import Action
from codewell.core.actors import Actor
from codewell.core.errors import PermissionDenied, StorageUnavailable, Unauthenticated
from codewell.core.storage import report
from codewell.core.tools import Endpoint
from codewell.http import threads
from codewell.http.bodies import BodyTooLarge, family_of, read_body
from codewell.http.errors import error_body
from codewell.http.requests import actor_of, authenticate_deferred, authentication_pending
from codewell.licensing.service import MCP_FEATURE, LicensingService
from codewell.mcp import envelope, fastpath
from codewell.mcp.endpoints import (
    MCP_PREFIX,
    MCP_SCOPE,
    PRM_PREFIX,
    challenge,
    endpoint_for_path,
    host_allowed,
    origin_allowed,
    resource_url,
)
from codewell.mcp.registry import ToolRegistry
from codewell.mcp.server import STORAGE_FAULT, ToolCaller, build_server
from codewell.oauth.service import OAuthService
from codewell.runtime import Runtime

log = logging.getLogger(__name__)

MAX_BODY_BYTES = family_of(MCP_PREFIX).limit or 0  # the body policy's cap of the MCP family (4 MiB)
# JSON-RPC error code (implementation-defined server error range) of a tool server outside the licensed plan.
FEATURE_NOT_LICENSED = -32003


def _json_error(status: int, code: str, message: str, hint: str | None = None, **headers: str) -> Response:
    error = (Unauthenticated if status == 401 else PermissionDenied)(message, hint=hint)
    body = error_body(error)
    body["error"]["code"] = code  # type: ignore[index]
    return JSONResponse(body, status_code=status, headers=headers)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive callable that yields the already-read body once, then defers to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _fault_answer(fault: StorageUnavailable, request_id: Any = None) -> Response:
    report(fault)  # once per cause and minute: an outage must not write a line per call
    return envelope.storage_unavailable(fault, request_id)


class _FaultAwareSend:
    """The SDK transport's `send`, holding the response's start until its first body bytes: by then a tool call
    that met a storage fault has left it in the request state (codewell.mcp.server), and the answer becomes 503
    with `Retry-After` instead of the SDK's JSON-RPC error inside 200. Once bytes went out (a response streamed
    for longer, e.g. after an SSE keep-alive) the status is sent and stays."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, request_id: Any) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.request_id = request_id
        self.start: Message | None = None
        self.decided = False
        self.replaced = False

    async def __call__(self, message: Message) -> None:
        if self.replaced:
            return  # the SDK's own answer to a call already answered 503
        if not self.decided and message["type"] == "http.response.start":
            self.start = message
            return
        if not self.decided:
            self.decided = True
            fault = (self.scope.get("state") or {}).get(STORAGE_FAULT)
            if isinstance(fault, StorageUnavailable) and self.start is not None:
                self.replaced = True
                await _fault_answer(fault, self.request_id)(self.scope, self.receive, self.send)
                return
            if self.start is not None:
                await self.send(self.start)
        await self.send(message)


def _bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class McpGate:
    """ASGI app for /.api/mcp and every subpath: gating, then the SDK transport of the endpoint's server."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.caller = ToolCaller(runtime, runtime.get(ToolRegistry))
        self.servers = {endpoint: build_server(runtime, self.caller, endpoint) for endpoint in Endpoint}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # One authorization scope per call: the gate's MCP#ACCESS decision and the tool's own decisions.
        with authz.scope(self.runtime):
            await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        endpoint: Endpoint | None = None
        if not authentication_pending(scope):
            # The caller is known already (no header credential, or the middleware resolved it): the gate's
            # refusals come before the body is read.
            admitted = self._admit(request)
            if isinstance(admitted, Response):
                await admitted(scope, receive, send)
                return
            endpoint = admitted
        # What the request asks is read before the gate's decision but answered only after it (a refusal comes
        # first, as it always did): the request's authentication (left to the gate by the middleware for a
        # header credential), the decision and a fast-path call then share one worker-thread hop.
        asked = await self._read_message(request)
        fast = asked[0] if isinstance(asked, tuple) and fastpath.eligible_request(request, asked[0]) else None
        try:
            refused, answered, endpoint = await threads.run_sync(self._decide, request, endpoint, fast)
        except StorageUnavailable as fault:  # the gate's own reads (roles, the plan, OAuth tokens)
            await _fault_answer(fault)(scope, receive, send)
            return
        if refused is not None:
            await refused(scope, receive, send)
            return
        if isinstance(asked, Response):
            await asked(scope, receive, send)
            return
        if answered is not None:
            await answered(scope, receive, send)
            return
        message, body = asked
        refusal = envelope.refusal(message)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        assert endpoint is not None  # admitted
        receive = _replay(body, receive)
        manager = StreamableHTTPSessionManager(
            self.servers[endpoint], stateless=True, max_request_body_size=MAX_BODY_BYTES
        )
        async with manager.run():
            await manager.handle_request(scope, receive, _FaultAwareSend(scope, receive, send, message.get("id")))

    async def _read_message(self, request: Request) -> Response | tuple[dict[str, Any], bytes]:
        """The JSON-RPC message of a POST and its body, or the transport's answer (405 for other methods, 413,
        400: codewell.mcp.envelope)."""
        method = request.scope["method"]
        if method != "POST":
            return envelope.method_not_allowed(method)
        try:
            body = await read_body(request, MAX_BODY_BYTES)
        except BodyTooLarge as exc:
            return envelope.error_response(413, INVALID_REQUEST, exc.message)
        # The body policy's parser and the JSON-RPC checks: anything refused gets a JSON-RPC error, never 202.
        message = envelope.checked_message(request.headers, body)
        if isinstance(message, Response):
            return message
        return message, body

    def _admit(self, request: Request) -> Response | Endpoint:
        """The gate's checks that read nothing (the config in memory, the headers, the authenticated caller): its
        answer, or where the caller asks."""
        runtime = self.runtime
        if not runtime.config.mcp_enabled:
            return PlainTextResponse("no route", status_code=404)
        endpoint = endpoint_for_path(request.scope["path"])  # not request.url: it builds the whole URL
        if endpoint is None:
            return PlainTextResponse("no route", status_code=404)
        host = request.headers.get("host")
        if not host_allowed(runtime, host):
            return PlainTextResponse("Invalid Host header", status_code=421)
        if not origin_allowed(runtime, request.headers.get("origin"), host):
            return PlainTextResponse("Invalid Origin header", status_code=403)
        actor = actor_of(request)
        if actor.is_anonymous or actor.is_internal:
            return _json_error(
                401,
                "unauthenticated",
                "authentication required",
                "send an access token (Authorization: token <token>) or sign in with OAuth (scope mcp)",
                **{"WWW-Authenticate": challenge(runtime, endpoint)},
            )
        return endpoint

    def _decide(
        self, request: Request, endpoint: Endpoint | None, fast: dict[str, Any] | None
    ) -> tuple[Response | None, Response | None, Endpoint | None]:
        """(the gate's refusal, None, _), else (None, the fast path's answer to `fast` or None without one, the
        endpoint): the request's authentication when it was left to the gate (`endpoint` is None then), the checks
        that may touch the database and the tool call in one worker-thread hop, since each hop costs ~0.05 ms of
        CPU and, on a loaded machine, a wake-up of its own (and two threads handing the GIL to each other). Raises
        StorageUnavailable when the gate's reads meet a storage fault; the tool call's fault is answered here
        (with the message's id)."""
        if endpoint is None:
            refused = authenticate_deferred(request.scope)
            admitted = refused if refused is not None else self._admit(request)
            if isinstance(admitted, Response):
                return admitted, None, None
            endpoint = admitted
        actor = actor_of(request)
        token = _bearer_token(request) if actor.via == "oauth" else None
        refused = self._refusal(actor, token, endpoint)
        if refused is not None or fast is None:
            return refused, None, endpoint
        try:
            client = fastpath.client_of(request)
            return None, fastpath.answer_now(self.runtime, self.caller, endpoint, actor, client, fast), endpoint
        except StorageUnavailable as fault:
            return None, _fault_answer(fault, fast.get("id")), endpoint

    def _refusal(self, actor: Actor, token: str | None, endpoint: Endpoint) -> Response | None:
        """The gate's answer to an authenticated caller it turns away, else None (in a worker thread)."""
        runtime = self.runtime
        if actor.via == "oauth":
            problem = self._oauth_problem(token, endpoint)
            if problem:
                return _json_error(
                    401,
                    "invalid_token",
                    problem,
                    "start the OAuth flow again for this endpoint URL",
                    **{"WWW-Authenticate": challenge(runtime, endpoint, "invalid_token", problem)},
                )
        if not authz.credential_allows(actor, Action.MCP_ACCESS):
            return _json_error(
                403,
                "insufficient_scope",
                "the token's scopes do not include mcp",
                "use a token with scope mcp or user:all",
                **{"WWW-Authenticate": challenge(runtime, endpoint, "insufficient_scope")},
            )
        return self._access_refusal(actor)

    def _access_refusal(self, actor: Actor) -> Response | None:
        """None when the actor may use the tool server, else the final answer (in a worker thread)."""
        # MCP#ACCESS through roles (authz remembers the answer per user for a few seconds).
        if not authz.allowed(actor, Action.MCP_ACCESS):
            return PlainTextResponse("forbidden", status_code=403)
        # The tool server is a licensed feature: outside the plan, a JSON-RPC error a client can show.
        unlicensed = self.runtime.get(LicensingService).feature_refusal(MCP_FEATURE)
        if unlicensed is not None:
            return envelope.error_response(403, FEATURE_NOT_LICENSED, unlicensed.message, data=unlicensed.data())
        return None

    def _oauth_problem(self, token: str | None, endpoint: Endpoint) -> str:
        """ "" when the OAuth token was issued for this endpoint (RFC 8707 audience), else why not."""
        if token is None:
            return "OAuth tokens must be sent in the Authorization header"
        return self.runtime.get(OAuthService).audience_problem(token, resource_url(self.runtime, endpoint))


def protected_resource_metadata(runtime: Runtime, endpoint: Endpoint | None) -> dict[str, Any]:
    """RFC 9728 metadata; `endpoint=None` describes the whole instance (the host-root document)."""
    resource = resource_url(runtime, endpoint) if endpoint else runtime.external_url
    return {
        "resource": resource,
        "authorization_servers": [runtime.external_url],
        "scopes_supported": [MCP_SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "codewell MCP server" + (f" ({endpoint.value})" if endpoint else ""),
    }


def _prm_route(runtime: Runtime, path: str, endpoint: Endpoint | None) -> Route:
    async def metadata(request: Request) -> Response:
        if not runtime.config.mcp_enabled:
            return PlainTextResponse("no route", status_code=404)
        return JSONResponse(
            protected_resource_metadata(runtime, endpoint),
            headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "max-age=300"},
        )

    return Route(path, metadata, methods=["GET"])


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The MCP routes: the gate for /.api/mcp and its subpaths, and the protected resource metadata."""
    gate = McpGate(runtime)
    endpoint_routes: list[BaseRoute] = [
        Route(MCP_PREFIX, gate, methods=None),
        Route(MCP_PREFIX + "/{rest:path}", gate, methods=None),
    ]
    prm: list[BaseRoute] = [_prm_route(runtime, PRM_PREFIX + e.value, e) for e in Endpoint]
    prm.append(_prm_route(runtime, PRM_PREFIX, None))
    return [*endpoint_routes, *prm]
