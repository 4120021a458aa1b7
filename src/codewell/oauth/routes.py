"""HTTP adapters of the OAuth authorization server (under /.auth/idp/oauth/) and its admin REST API.

Every handler is thin: parse the form/JSON, call ClientService or GrantService, shape the RFC-defined response.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell import authz
from codewell.authz import Action
from codewell.core.errors import InvalidInput
from codewell.http.bodies import BodyTooLarge, InvalidJson, parse_json, read_body
from codewell.http.csrf import verify_form
from codewell.http.errors import error_page
from codewell.http.requests import actor_of, json_body
from codewell.http.templates import render
from codewell.oauth.clients import AUTH_METHODS, SCOPE, ClientService
from codewell.oauth.errors import OAuthError
from codewell.oauth.grants import AuthorizationRequest, GrantService
from codewell.runtime import Runtime

log = logging.getLogger(__name__)

PREFIX = "/.auth/idp/oauth"
# The endpoints where a client authenticates itself, with HTTP Basic among others (`_client_credentials`).
CLIENT_AUTH_PATHS = (PREFIX + "/token", PREFIX + "/revoke", PREFIX + "/introspect")
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
}
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}

Handler = Callable[[Request], Awaitable[Response]]


def metadata(runtime: Runtime) -> dict[str, Any]:
    """RFC 8414 authorization server metadata."""
    issuer = runtime.get(GrantService).issuer
    base = issuer + PREFIX
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": base + "/authorize",
        "token_endpoint": base + "/token",
        "revocation_endpoint": base + "/revoke",
        "introspection_endpoint": base + "/introspect",
        "userinfo_endpoint": base + "/userinfo",
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "introspection_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": True,
    }
    if runtime.config.mcp_dynamic_client_registration_enabled:
        document["registration_endpoint"] = base + "/register"
    return document


def _oauth_error(exc: OAuthError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    extra = dict(headers or {})
    if exc.status == 401:
        extra["WWW-Authenticate"] = 'Basic realm="codewell"'
    return JSONResponse(exc.as_json(), status_code=exc.status, headers={**NO_STORE, **CORS, **extra})


async def _body(request: Request, error: str) -> bytes:
    """The body under the OAuth family's cap (codewell.http.bodies); over it, the OAuth error `error` with 413."""
    try:
        return await read_body(request)
    except BodyTooLarge as exc:
        raise OAuthError(error, exc.message, status=413) from None


async def _form(request: Request) -> tuple[dict[str, str], list[str]]:
    """The urlencoded body (single values; a repeated parameter is an error per RFC 6749 §3.1), and the
    `resource` values, the one parameter that may repeat (RFC 8707)."""
    body = await _body(request, "invalid_request")
    pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    form: dict[str, str] = {}
    for key, value in pairs:
        if key in form and key != "resource":
            raise OAuthError("invalid_request", f"parameter {key} given more than once")
        form[key] = value
    return form, [value for key, value in pairs if key == "resource"]


def _client_credentials(request: Request, form: Mapping[str, str]) -> tuple[str, str | None]:
    """client_id and secret from HTTP Basic (client_secret_basic) or the form (client_secret_post / none)."""
    header = request.headers.get("authorization", "")
    if header[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(header[6:].strip()).decode()
            user, _, password = decoded.partition(":")
        except ValueError:
            raise OAuthError("invalid_client", "malformed Basic credentials", status=401) from None
        return unquote(user), unquote(password)
    return form.get("client_id", ""), form.get("client_secret")


def _with_query(uri: str, params: Mapping[str, str | None]) -> str:
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query.extend((k, v) for k, v in params.items() if v is not None)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _consent_mac(runtime: Runtime, user_id: int, req: AuthorizationRequest) -> str:
    """Ties the consent form to the signed-in user and the exact request (CSRF protection)."""
    message = "|".join(
        [str(user_id), req.client.client_id, req.redirect_uri, req.code_challenge, req.resource, req.state or ""]
    )
    return hmac.new(runtime.secret_key(), b"oauth-consent|" + message.encode(), hashlib.sha256).hexdigest()


def _consent_page(
    request: Request, req: AuthorizationRequest, username: str, mac: str, params: Mapping[str, str]
) -> Response:
    """The consent page in the site's layout (oauth/consent.html): who asks, for what, where the answer goes.
    `render` gives it the policy of every page: nothing inline runs, and it is never framed (a framed consent page
    could be clicked through)."""
    kind = {
        "dynamic": "self-registered",
        "static": "pre-registered by an administrator",
        "metadata": "identified by its metadata document",
    }
    response = render(
        request,
        "oauth/consent.html",
        client_name=req.client.client_name or req.client.client_id,
        client_kind=kind.get(req.client.kind, req.client.kind),
        username=username,
        resource=req.resource,
        return_host=urlsplit(req.redirect_uri).netloc or req.redirect_uri,
        action=f"{PREFIX}/authorize",
        params=params,
        mac=mac,
    )
    response.headers.update(NO_STORE)
    return response


def _error_page(request: Request, exc: OAuthError) -> Response:
    """An authorization error a browser lands on, in the site's layout (http/errors.py), worded for people with
    the protocol's code beside it. A page answers 400 for every protocol error (a browser shows it, no client reads
    a 401 here); a body over the cap keeps its 413."""
    status = 413 if exc.status == 413 else 400
    response = error_page(
        request,
        status,
        f"{exc.description} ({exc.error})",
        title="The application's sign-in request did not work",
        hint="Go back to the application and connect it to codewell again.",
    )
    response.headers.update(NO_STORE)
    return response


def _session_user_id(request: Request) -> int | None:
    """The signed-in browser user (consent needs a session; tokens cannot approve clients), else None."""
    actor = actor_of(request)
    return actor.user_id if actor.is_user and actor.via == "session" else None


class OAuthRoutes:
    """The authorization server's endpoints and the admin client API, bound to one self.runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.clients = self.runtime.get(ClientService)
        self.grants = self.runtime.get(GrantService)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    async def as_metadata(self, request: Request) -> Response:
        return JSONResponse(await self.run(metadata, self.runtime), headers={**CORS, "Cache-Control": "max-age=300"})

    def _authorization_params(
        self, request: Request, form: Mapping[str, str] | None
    ) -> tuple[dict[str, str], list[str]]:
        items = list(request.query_params.multi_items()) if form is None else list(form.items())
        params = {k: v for k, v in items if k != "resource"}
        resources = [v for k, v in items if k == "resource" and v]
        return params, resources

    def _redirect_error(self, req_uri: str, state: str | None, exc: OAuthError) -> Response:
        target = _with_query(
            req_uri,
            {"error": exc.error, "error_description": exc.description, "state": state, "iss": self.grants.issuer},
        )
        return RedirectResponse(target, status_code=302, headers=NO_STORE)

    async def _validated(
        self, request: Request, params: dict[str, str], resources: list[str]
    ) -> AuthorizationRequest | Response:
        try:
            validated: AuthorizationRequest = await self.run(
                self.grants.validate_authorization_request, params, resources
            )
            return validated
        except OAuthError as exc:
            if not exc.redirectable:
                return _error_page(request, exc)
            # Errors go back to the client only where the service trusts its redirect URI (RFC 9700 §4.11.2).
            target = await self.run(self.grants.error_redirect_uri, params, _session_user_id(request))
            if target is None:
                return _error_page(request, exc)
            return self._redirect_error(target, params.get("state"), exc)

    async def authorize(self, request: Request) -> Response:
        if request.method == "POST":
            return await self.authorize_decision(request)
        params, resources = self._authorization_params(request, None)
        validated = await self._validated(request, params, resources)
        if isinstance(validated, Response):
            return validated
        actor = actor_of(request)
        if not actor.is_user or actor.via != "session" or actor.user_id is None:
            target = request.url.path + ("?" + request.url.query if request.url.query else "")
            return RedirectResponse("/sign-in?returnTo=" + quote(target, safe=""), status_code=302)
        all_params = dict(params)
        if resources:
            all_params["resource"] = resources[0]
        mac = _consent_mac(self.runtime, actor.user_id, validated)
        return _consent_page(request, validated, actor.username, mac, all_params)

    async def authorize_decision(self, request: Request) -> Response:
        try:
            form, _ = await _form(request)
        except OAuthError as exc:
            return _error_page(request, exc)
        params, resources = self._authorization_params(request, form)
        decision = params.pop("decision", "")
        mac = params.pop("consent", "")
        validated = await self._validated(request, params, resources)
        if isinstance(validated, Response):
            return validated
        actor = actor_of(request)
        if not actor.is_user or actor.via != "session" or actor.user_id is None:
            return _error_page(request, OAuthError("access_denied", "sign in first, then approve the request again"))
        if not hmac.compare_digest(mac, _consent_mac(self.runtime, actor.user_id, validated)):
            return _error_page(
                request, OAuthError("access_denied", "the consent form expired or was tampered with; start again")
            )
        if decision != "approve":
            return self._redirect_error(
                validated.redirect_uri, validated.state, OAuthError("access_denied", "the user denied the request")
            )
        code = await self.run(self.grants.issue_code, actor.user_id, validated)
        target = _with_query(
            validated.redirect_uri, {"code": code, "state": validated.state, "iss": self.grants.issuer}
        )
        return RedirectResponse(target, status_code=302, headers=NO_STORE)

    async def token(self, request: Request) -> Response:
        try:
            form, resources = await _form(request)
            client_id, secret = _client_credentials(request, form)
            client = await self.run(self.clients.authenticate_client, client_id, secret)
            grant = form.get("grant_type", "")
            if len(resources) > 1:
                raise OAuthError("invalid_target", "request one resource per token")
            resource = resources[0] if resources else None
            if grant == "authorization_code":
                result = await self.run(
                    self.grants.exchange_code,
                    client,
                    form.get("code", ""),
                    form.get("redirect_uri"),
                    form.get("code_verifier", ""),
                    resource,
                )
            elif grant == "refresh_token":
                result = await self.run(
                    self.grants.refresh, client, form.get("refresh_token", ""), form.get("scope"), resource
                )
            else:
                raise OAuthError("unsupported_grant_type", f"grant_type {grant!r} is not supported")
        except OAuthError as exc:
            return _oauth_error(exc)
        return JSONResponse(result.as_json(), headers={**NO_STORE, **CORS})

    async def register(self, request: Request) -> Response:
        if not self.runtime.config.mcp_dynamic_client_registration_enabled:
            return PlainTextResponse("no route", status_code=404)
        try:
            body = await _body(request, "invalid_client_metadata")
            try:
                document = parse_json(body) if body.strip() else None
            except InvalidJson as exc:
                raise OAuthError("invalid_client_metadata", exc.message) from None
            client, secret = await self.run(self.clients.register_dynamic, document)
        except OAuthError as exc:
            if exc.status == 404:
                return PlainTextResponse("no route", status_code=404)
            return _oauth_error(exc)
        response = client.as_json()
        response.pop("kind")
        response.pop("created_at")
        response = {k: v for k, v in response.items() if v not in (None, "")}  # RFC 7591: omit absent fields
        response["client_id_issued_at"] = int(client.created_at.timestamp())
        if secret:
            response["client_secret"] = secret
            response["client_secret_expires_at"] = 0
        return JSONResponse(response, status_code=201, headers={**NO_STORE, **CORS})

    async def revoke(self, request: Request) -> Response:
        try:
            form, _ = await _form(request)
            client_id, secret = _client_credentials(request, form)
            client = await self.run(self.clients.authenticate_client, client_id, secret) if client_id else None
            await self.run(self.grants.revoke, client, form.get("token", ""))
        except OAuthError as exc:
            return _oauth_error(exc)
        return Response(status_code=200, headers={**NO_STORE, **CORS})

    async def introspect(self, request: Request) -> Response:
        try:
            form, _ = await _form(request)
            client_id, secret = _client_credentials(request, form)
            result: dict[str, Any] = await self.run(
                self.grants.introspect_for, actor_of(request), client_id, secret, form.get("token", "")
            )
        except OAuthError as exc:
            return _oauth_error(exc)
        return JSONResponse(result, headers=NO_STORE)

    async def userinfo(self, request: Request) -> Response:
        actor = actor_of(request)
        if actor.via != "oauth" or actor.user_id is None:
            return JSONResponse(
                {"error": "invalid_token", "error_description": "send an OAuth access token"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"', **CORS},
            )
        return JSONResponse(
            {"sub": str(actor.user_id), "preferred_username": actor.username}, headers={**NO_STORE, **CORS}
        )

    async def preflight(self, request: Request) -> Response:
        return Response(status_code=204, headers={**CORS, "Access-Control-Allow-Methods": "GET, POST, OPTIONS"})

    # -- admin REST: /.api/oauth/clients ------------------------------------------------------------------------
    async def clients_api(self, request: Request) -> Response:
        actor = actor_of(request)
        authz.ensure(actor, Action.OAUTH_CLIENTS_MANAGE)
        if request.method == "GET":
            clients = await self.run(self.clients.list_clients, actor, request.query_params.get("kind"))
            return JSONResponse({"clients": [c.as_json() for c in clients]})
        data = await json_body(request)
        if not isinstance(data.get("redirect_uris"), list):
            raise InvalidInput("redirect_uris (array) is required", hint='{"name": "...", "redirect_uris": ["..."]}')
        client, secret = await self.run(
            lambda: self.clients.create_static_client(
                actor, str(data.get("name", "")), data["redirect_uris"], confidential=bool(data.get("confidential"))
            )
        )
        body = client.as_json()
        if secret:
            body["client_secret"] = secret
        return JSONResponse(body, status_code=201)

    async def client_api(self, request: Request) -> Response:
        actor = actor_of(request)
        authz.ensure(actor, Action.OAUTH_CLIENTS_MANAGE)
        await self.run(self.clients.delete_client, actor, request.path_params["client_id"])
        return Response(status_code=204)

    # -- admin page: /site-admin/oauth-clients ---------------------------------------------------------------
    async def admin_page(self, request: Request) -> Response:
        actor = actor_of(request)
        authz.ensure(actor, Action.OAUTH_CLIENTS_MANAGE)
        created, secret, error = None, None, ""
        if request.method == "POST":
            form = await request.form()
            verify_form(request, form)
            try:
                if form.get("action") == "delete":
                    await self.run(self.clients.delete_client, actor, str(form.get("client_id", "")))
                else:
                    uris = [u.strip() for u in str(form.get("redirect_uris", "")).splitlines() if u.strip()]
                    created, secret = await self.run(
                        lambda: self.clients.create_static_client(
                            actor, str(form.get("name", "")), uris, confidential=bool(form.get("confidential"))
                        )
                    )
            except InvalidInput as exc:
                error = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        clients = await self.run(self.clients.list_clients, actor, None)
        return render(
            request,
            "oauth/admin_clients.html",
            status_code=400 if error else 200,
            clients=clients,
            created=created,
            secret=secret,
            error=error,
            dcr_enabled=self.runtime.config.mcp_dynamic_client_registration_enabled,
        )

    def cors(self, handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            if request.method == "OPTIONS":
                return await self.preflight(request)
            return await handler(request)

        return endpoint

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/.well-known/oauth-authorization-server", self.as_metadata, methods=["GET"]),
            Route(PREFIX + "/authorize", self.authorize, methods=["GET", "POST"]),
            Route(PREFIX + "/token", self.cors(self.token), methods=["POST", "OPTIONS"]),
            Route(PREFIX + "/register", self.cors(self.register), methods=["POST", "OPTIONS"]),
            Route(PREFIX + "/revoke", self.cors(self.revoke), methods=["POST", "OPTIONS"]),
            Route(PREFIX + "/introspect", self.introspect, methods=["POST"]),
            Route(PREFIX + "/userinfo", self.cors(self.userinfo), methods=["GET", "OPTIONS"]),
            Route("/.api/oauth/clients", self.clients_api, methods=["GET", "POST"]),
            Route("/.api/oauth/clients/{client_id:path}", self.client_api, methods=["DELETE"]),
            Route("/site-admin/oauth-clients", self.admin_page, methods=["GET", "POST"]),
        ]


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The authorization server's routes and the admin client API."""
    return OAuthRoutes(runtime).routes()
