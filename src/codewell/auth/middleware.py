"""AuthenticationMiddleware: sets `request.state.actor` for every HTTP request and applies the
anonymous-access policy (`auth.public`) and the credential-scope limits before any route runs."""

from __future__ import annotations

import logging
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from codewell.accounts.audit import AuditService
from codewell.accounts.credentials import SessionInfo
from codewell.accounts.tokens import TOKEN_PREFIX
from codewell.auth.service import AuthService, ClientInfo
from codewell.core.actors import ANONYMOUS, Actor
from codewell.core.errors import CodewellError, InvalidInput, PermissionDenied, Unauthenticated, Unavailable
from codewell.http import ops, threads
from codewell.http.errors import error_body, error_response
from codewell.http.requests import DEFERRED_AUTHENTICATION
from codewell.http.sessions import CSRF_HEADER, SESSION_COOKIE, same
from codewell.runtime import Runtime

log = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SIGN_IN_HINT = "sign in, or send an access token: Authorization: token <token>"


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookie(headers: dict[str, str], name: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header must not break the request
        return ""
    morsel = jar.get(name)
    return morsel.value if morsel else ""


URL_TOKEN_REFUSED = InvalidInput(
    "Access tokens are not accepted in URLs.",
    hint="send it as `Authorization: token <token>`, and revoke this one: URLs end up in logs and browser history",
)


DUPLICATE_HEADER_REFUSED = InvalidInput(
    "More than one Authorization header.",
    hint="send exactly one Authorization header; check that a proxy in front does not add its own",
)


def _authorization_count(scope: Scope) -> int:
    return sum(1 for name, _ in scope["headers"] if name.lower() == b"authorization")


def _token_in_url(scope: Scope) -> bool:
    """Whether the query string carries an access token (`?token=cwp_...`, `?access_token=...`)."""
    query = scope.get("query_string", b"").decode("latin-1")
    if "token=" not in query:
        return False
    params = parse_qs(query)
    return any(v.startswith(TOKEN_PREFIX) for key in ("token", "access_token") for v in params.get(key, []))


def _routed(scope: Scope) -> bool:
    """Whether any route of the app matches this request's path (Starlette puts the app in the scope)."""
    app = scope.get("app")
    router = getattr(app, "router", None)
    if router is None:
        return True
    return any(route.matches(scope)[0] is not Match.NONE for route in router.routes)


def is_api_path(path: str) -> bool:
    # The analytics API (issue #9) is an API too: JSON errors, and CSRF checks on cookie-authenticated writes.
    return path.startswith(("/.api/", "/analytics/api/"))


def _error_response(scope: Scope, error: CodewellError, challenge: str | None = None) -> Response:
    headers = {"WWW-Authenticate": challenge} if challenge and error.http_status == 401 else {}
    if isinstance(error, Unavailable) and error.retry_after:
        headers["Retry-After"] = str(error.retry_after)
    if is_api_path(scope["path"]):
        return JSONResponse(error_body(error), status_code=error.http_status, headers=headers)
    # Elsewhere the one error mapping (http/errors.py): a page for browsers, JSON for JSON clients, else text.
    response = error_response(Request(scope), error)
    response.headers.update(headers)
    return response


class AuthenticationMiddleware:
    """Resolves the actor from the Authorization header (wins) or the session cookie.

    Malformed headers and unknown tokens end the request with 401 (JSON envelope under /.api/);
    unrecognized schemes are ignored (and audited by AuthService).
    """

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        auth = self.runtime.get(AuthService)
        headers = _headers(scope)
        path: str = scope["path"]
        client = ClientInfo(ip=(scope.get("client") or ("", 0))[0], user_agent=headers.get("user-agent", "")[:512])
        if _authorization_count(scope) > 1:
            # Proxies and frameworks disagree on which copy counts (`token <user>` then `token <admin>` read
            # as the admin here before): refuse the request rather than pick one.
            await run_in_threadpool(self._audit_failure, client, "more than one Authorization header")
            await _error_response(scope, DUPLICATE_HEADER_REFUSED)(scope, receive, send)
            return
        if _token_in_url(scope):
            await run_in_threadpool(auth.audit_token_in_url, client)
            await _error_response(scope, URL_TOKEN_REFUSED)(scope, receive, send)
            return
        # The scraper's secret on /metrics is no access token: the route checks it (codewell.http.ops).
        use_header = not (
            path == ops.METRICS_PATH and ops.metrics_credential(self.runtime.settings, headers.get("authorization"))
        )
        state = scope.setdefault("state", {})
        if use_header and "authorization" in headers and auth.defers(path):
            # The route (the MCP gate) runs this in the worker-thread hop it takes anyway: one hop, not two.
            state[DEFERRED_AUTHENTICATION] = lambda: self._authenticate(auth, scope, headers, client, path, use_header)
            await self.app(scope, receive, send)
            return
        # The hop every other authenticated request pays: the lean one (codewell.http.threads), not anyio's.
        refusal = await threads.run_sync(self._authenticate, auth, scope, headers, client, path, use_header)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authenticate(
        self, auth: AuthService, scope: Scope, headers: dict[str, str], client: ClientInfo, path: str, use_header: bool
    ) -> Response | None:
        """Set the request's actor and session, or return the refusal (in a worker thread: it may read the
        database)."""
        try:
            actor, session = self._resolve(auth, headers, client, path, use_header)
        except CodewellError as exc:
            return _error_response(scope, exc, auth.challenge_for(path))
        state = scope["state"]
        state["actor"] = actor
        state["session"] = session
        return self._deny(auth, actor, session, scope, headers)

    def _audit_failure(self, client: ClientInfo, reason: str) -> None:
        """An `auth.accessToken` / `failed` entry, as AuthService writes for a rejected header."""
        self.runtime.get(AuditService).record(
            "auth.accessToken", "failed", reason=reason, ip=client.ip, user_agent=client.user_agent
        )

    @staticmethod
    def _resolve(
        auth: AuthService, headers: dict[str, str], client: ClientInfo, path: str = "", use_header: bool = True
    ) -> tuple[Actor, SessionInfo | None]:
        header = headers.get("authorization") if use_header else None
        if header is not None:
            actor = auth.authenticate_header(header, client, path)
            if actor is not None:
                return actor, None
        proxied = auth.resolve_request(path, headers, client)
        if proxied is not None:
            return proxied, None
        cookie = _cookie(headers, SESSION_COOKIE)
        if cookie:
            found = auth.session_actor(cookie)
            if found is not None:
                return found
        return ANONYMOUS, None

    def _deny(
        self, auth: AuthService, actor: Actor, session: SessionInfo | None, scope: Scope, headers: dict[str, str]
    ) -> Response | None:
        """A response refusing the request before routing, or None to let it through."""
        path: str = scope["path"]
        method: str = scope["method"]
        if actor.is_anonymous:
            if self.runtime.config.auth_public or auth.is_anonymous_path(path) or not _routed(scope):
                return None  # unknown paths get the router's 404 (it tells nothing about any data)
            if is_api_path(path) or method not in SAFE_METHODS:
                return _error_response(scope, Unauthenticated("Not signed in.", hint=SIGN_IN_HINT))
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            return RedirectResponse(f"/sign-in?returnTo={quote(target, safe='')}", status_code=302)
        if not auth.scopes_allow(actor, path):
            scopes = ", ".join(sorted(actor.scopes)) or "none"
            return _error_response(
                scope,
                PermissionDenied(
                    f"This credential's scopes ({scopes}) do not allow {path}.",
                    hint="use a token with the user:all scope",
                ),
            )
        # Browsers send cookies on cross-site requests: a cookie-authenticated API write must prove it comes
        # from our own pages with the session's CSRF token (forms check theirs in codewell.http.csrf).
        unsafe_cookie_write = session is not None and is_api_path(path) and method not in SAFE_METHODS
        if unsafe_cookie_write and not same(headers.get(CSRF_HEADER, ""), session.csrf_token if session else ""):
            return _error_response(
                scope,
                PermissionDenied("Missing or wrong CSRF token.", hint="send the X-CSRF-Token header of the page"),
            )
        return None
