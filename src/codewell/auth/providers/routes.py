"""Routes of the external sign-in providers (thin: ExternalSignIn does the work).

`GET /.auth/<kind>/login?pc=<provider id>&returnTo=<path>` starts a sign-in; the provider comes back to
`GET /.auth/<kind>/callback` (code hosts), `GET /.auth/callback` (OpenID Connect) or
`POST /.auth/saml/acs` (SAML, SP metadata at `GET /.auth/saml/metadata`). `POST /.auth/<kind>/connect`
starts the same flow from account settings to link an account to the signed-in user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.accounts.service import User
from codewell.auth.providers.flows import FLOW_COOKIE, FLOW_LIFETIME, new_browser_token
from codewell.auth.providers.service import (
    CODE_HOST_KINDS,
    OIDC_CALLBACK,
    ExternalSignIn,
    add_credentials,
    finish_saml,
    sp_metadata,
)
from codewell.auth.routes import client_of, safe_return_to, signed_in_response
from codewell.auth.service import CONNECT_KINDS, AuthService
from codewell.config.providers import GerritProvider
from codewell.core.errors import CodewellError
from codewell.http.csrf import verify_form
from codewell.http.requests import actor_of, runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime


def error_page(request: Request, exc: CodewellError) -> Response:
    return render(
        request, "auth_providers/error.html", status_code=exc.http_status, message=exc.message, hint=exc.hint or ""
    )


def _browser_token(request: Request) -> tuple[str, bool]:
    """The flow-binding cookie of this browser (reused across tabs), and whether it is new."""
    existing = request.cookies.get(FLOW_COOKIE, "")
    return (existing, False) if existing else (new_browser_token(), True)


def set_flow_cookie(request: Request, response: Response, token: str) -> None:
    https = runtime_of(request).external_url.startswith("https://")
    # SAML posts back cross-site: Lax cookies are not sent on cross-site POSTs, so over HTTPS the binding
    # cookie is SameSite=None (still HttpOnly and Secure); code-flow callbacks are top-level GETs (Lax is enough).
    response.set_cookie(
        FLOW_COOKIE,
        token,
        max_age=int(FLOW_LIFETIME.total_seconds()),
        httponly=True,
        secure=https,
        samesite="none" if https else "lax",
        path="/.auth/",
    )


def login(kind: str) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        service = runtime_of(request).get(ExternalSignIn)
        token, new = _browser_token(request)
        return_to = safe_return_to(request.query_params.get("returnTo"))
        try:
            target = await run_in_threadpool(
                service.begin, kind, request.query_params.get("pc", ""), return_to, token, client_of(request)
            )
        except CodewellError as exc:
            return error_page(request, exc)
        response = RedirectResponse(target, status_code=302)
        if new:
            set_flow_cookie(request, response, token)
        return response

    return handler


async def start_session(request: Request, user: User, return_to: str) -> Response:
    cookie, _ = await run_in_threadpool(runtime_of(request).get(AuthService).start_session, user, client_of(request))
    return signed_in_response(request, cookie, return_to)


def connect(kind: str) -> Callable[[Request], Awaitable[Response]]:
    """`POST /.auth/<kind>/connect` (form: csrf_token, pc): connect an account there to the signed-in user."""

    async def handler(request: Request) -> Response:
        actor = actor_of(request)
        if not actor.is_user:
            return RedirectResponse("/sign-in?returnTo=/settings/accounts", status_code=302)
        form = await request.form()
        try:
            verify_form(request, form)
            pc = form.get("pc", "")
            token, new = _browser_token(request)
            target = await run_in_threadpool(
                runtime_of(request).get(ExternalSignIn).begin_connect,
                actor,
                kind,
                pc if isinstance(pc, str) else "",
                token,
                client_of(request),
            )
        except CodewellError as exc:
            return error_page(request, exc)
        response = RedirectResponse(target, status_code=303)
        if new:
            set_flow_cookie(request, response, token)
        return response

    return handler


def callback(kind: str) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        service = runtime_of(request).get(ExternalSignIn)
        params = dict(request.query_params.items())
        try:
            user, return_to, connected = await run_in_threadpool(
                service.finish,
                kind,
                params,
                request.cookies.get(FLOW_COOKIE, ""),
                client_of(request),
                actor_of(request),
            )
        except CodewellError as exc:
            return error_page(request, exc)
        if connected:  # linked to the signed-in user from account settings: the session stays as it is
            return RedirectResponse(return_to, status_code=303)
        return await start_session(request, user, return_to)

    return handler


async def saml_metadata(request: Request) -> Response:
    try:
        xml = await run_in_threadpool(sp_metadata, runtime_of(request))
    except CodewellError as exc:
        return PlainTextResponse(exc.message, status_code=exc.http_status)
    return Response(xml, media_type="application/samlmetadata+xml")


async def saml_acs(request: Request) -> Response:
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    try:
        user, return_to = await run_in_threadpool(
            finish_saml, runtime_of(request), fields, request.cookies.get(FLOW_COOKIE, ""), client_of(request)
        )
    except CodewellError as exc:
        return error_page(request, exc)
    return await start_session(request, user, return_to)


async def gerrit_credentials(request: Request) -> Response:
    """Account security: add Gerrit HTTP credentials (checked against Gerrit's REST API)."""
    runtime = runtime_of(request)
    actor = actor_of(request)
    if not actor.is_user:
        return RedirectResponse("/sign-in?returnTo=/.auth/gerrit/credentials", status_code=302)
    providers = [p for p in runtime.config.providers if isinstance(p, GerritProvider)]
    context: dict[str, Any] = {"providers": providers, "error": "", "notice": ""}
    if request.method == "GET":
        return render(request, "auth_providers/gerrit.html", **context)
    form = await request.form()
    verify_form(request, form)
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    try:
        await run_in_threadpool(
            add_credentials,
            runtime,
            actor,
            fields.get("pc", ""),
            fields.get("username", ""),
            fields.get("password", ""),
            client_of(request),
        )
    except CodewellError as exc:
        context["error"] = exc.message
        return render(request, "auth_providers/gerrit.html", status_code=exc.http_status, **context)
    context["notice"] = "Gerrit credentials added."
    return render(request, "auth_providers/gerrit.html", **context)


def routes(runtime: Runtime) -> list[BaseRoute]:
    result: list[BaseRoute] = []
    for kind in (*CODE_HOST_KINDS, "openidconnect", "saml"):
        result.append(Route(f"/.auth/{kind}/login", login(kind), methods=["GET"]))
    for kind in CODE_HOST_KINDS:
        result.append(Route(f"/.auth/{kind}/callback", callback(kind), methods=["GET"]))
    for kind in CONNECT_KINDS:
        result.append(Route(f"/.auth/{kind}/connect", connect(kind), methods=["POST"]))
    result.append(Route(OIDC_CALLBACK, callback("openidconnect"), methods=["GET"]))
    result.append(Route("/.auth/saml/metadata", saml_metadata, methods=["GET"]))
    result.append(Route("/.auth/saml/acs", saml_acs, methods=["POST"]))
    result.append(Route("/.auth/gerrit/credentials", gerrit_credentials, methods=["GET", "POST"]))
    return result
