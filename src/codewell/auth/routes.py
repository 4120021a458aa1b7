"""Builtin sign-in, sign-up, sign-out and password reset pages (thin: AuthService does the work)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.accounts.credentials import SESSION_LIFETIME, CredentialService
from codewell.accounts.service import AccountService, User, builtin_signup_allowed
from codewell.accounts.verification import EmailVerificationService
from codewell.auth.providers.service import ExternalSignIn
from codewell.auth.service import AuthService, ClientInfo
from codewell.core.errors import CodewellError, PermissionDenied
from codewell.http.csrf import verify_form
from codewell.http.requests import actor_of, form_text, runtime_of
from codewell.http.sessions import SESSION_COOKIE
from codewell.http.templates import render
from codewell.runtime import Runtime


def safe_return_to(value: str | None) -> str:
    """A same-site path to go back to after sign-in; anything else (other hosts, `//x`, `\\x`) becomes `/`."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")) or any(c in value for c in "\r\n"):
        return "/"
    return value


def client_of(request: Request) -> ClientInfo:
    return ClientInfo(
        ip=request.client.host if request.client else "", user_agent=request.headers.get("user-agent", "")
    )


def _signed_in(request: Request, cookie: str, target: str) -> Response:
    runtime = runtime_of(request)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=int(SESSION_LIFETIME.total_seconds()),
        httponly=True,
        samesite="lax",
        secure=runtime.external_url.startswith("https://"),
        path="/",
    )
    return response


def signed_in_response(request: Request, cookie: str, target: str) -> Response:
    """The redirect that sets a new session cookie (used by the external sign-in providers too)."""
    return _signed_in(request, cookie, target)


def _external_options(request: Request, return_to: str) -> list[Any]:
    return runtime_of(request).get(ExternalSignIn).options(return_to)


async def sign_in_page(request: Request) -> Response:
    runtime = runtime_of(request)
    auth = runtime.get(AuthService)
    return_to = safe_return_to(request.query_params.get("returnTo"))
    context: dict[str, Any] = {
        "return_to": return_to,
        "builtin": auth.builtin_enabled(),
        "signup": builtin_signup_allowed(runtime),
        "providers": _external_options(request, return_to),
        "username": "",
        "error": "",
    }
    if request.method == "GET":
        if actor_of(request).is_user:
            return RedirectResponse(return_to, status_code=303)
        return render(request, "auth/sign_in.html", **context)
    form = await request.form()
    verify_form(request, form)
    username = form_text(form, "username")
    try:
        user = await run_in_threadpool(auth.sign_in_password, username, form_text(form, "password"), client_of(request))
        cookie, _ = await run_in_threadpool(auth.start_session, user, client_of(request))
    except CodewellError as exc:
        context.update(username=username, error=exc.message)
        return render(request, "auth/sign_in.html", status_code=exc.http_status, **context)
    return _signed_in(request, cookie, return_to)


async def sign_up_page(request: Request) -> Response:
    runtime = runtime_of(request)
    accounts = runtime.get(AccountService)
    first = await run_in_threadpool(accounts.count_users) == 0
    if not (first or builtin_signup_allowed(runtime)):
        raise PermissionDenied("Sign-up is disabled on this instance.", hint="ask a site admin to create your account")
    min_length = runtime.config.auth_min_password_length
    context: dict[str, Any] = {"first": first, "username": "", "email": "", "error": "", "min_length": min_length}
    if request.method == "GET":
        return render(request, "auth/sign_up.html", **context)
    form = await request.form()
    verify_form(request, form)
    username, email = form_text(form, "username"), form_text(form, "email")
    try:
        user = await run_in_threadpool(
            lambda: accounts.create_user(
                actor_of(request), username, password=form_text(form, "password"), email=email or None
            )
        )
        cookie, _ = await run_in_threadpool(runtime.get(AuthService).start_session, user, client_of(request))
    except CodewellError as exc:
        context.update(username=username, email=email, error=exc.message)
        return render(request, "auth/sign_up.html", status_code=exc.http_status, **context)
    if email:
        await run_in_threadpool(_send_first_verification_link, runtime, user)
    return _signed_in(request, cookie, "/")


def _send_first_verification_link(runtime: Runtime, user: User) -> None:
    """E-mail a verification link for the sign-up address when SMTP is configured (best effort: a failure
    leaves the address unverified, and the user can resend it from /settings/emails)."""
    accounts = runtime.get(AccountService)
    actor = accounts.actor_for(user, via="session")
    for address in accounts.list_emails(actor, user.id):
        if not address.verified:
            runtime.get(EmailVerificationService).after_email_added(actor, user.id, address.email)


async def sign_out(request: Request) -> Response:
    form = await request.form()
    verify_form(request, form)
    cookie = request.cookies.get(SESSION_COOKIE, "")
    if cookie:
        await run_in_threadpool(runtime_of(request).get(AuthService).end_session, cookie)
    # With one OAuth/OIDC/SAML provider as the only sign-in method, signing out starts a new sign-in there.
    sole = runtime_of(request).get(ExternalSignIn).sole_redirect_login()
    response = RedirectResponse(sole or "/sign-in", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


async def password_reset_page(request: Request) -> Response:
    runtime = runtime_of(request)
    credentials = runtime.get(CredentialService)
    source = request.query_params if request.method == "GET" else await request.form()
    user_id_text, code = form_text(source, "userID"), form_text(source, "code")
    user_id = int(user_id_text) if user_id_text.isdigit() else 0
    valid = await run_in_threadpool(credentials.check_reset_code, user_id, code)
    context: dict[str, Any] = {"valid": valid, "user_id": user_id, "code": code, "error": "", "min_length": 0}
    context["min_length"] = runtime.config.auth_min_password_length
    if request.method == "GET" or not valid:
        return render(request, "auth/password_reset.html", status_code=200 if valid else 400, **context)
    verify_form(request, source)
    try:
        await run_in_threadpool(credentials.reset_password, user_id, code, form_text(source, "password"))
    except CodewellError as exc:
        context["error"] = exc.message
        return render(request, "auth/password_reset.html", status_code=exc.http_status, **context)
    return RedirectResponse("/sign-in", status_code=303)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/sign-in", sign_in_page, methods=["GET", "POST"]),
        Route("/sign-up", sign_up_page, methods=["GET", "POST"]),
        Route("/sign-out", sign_out, methods=["POST"]),
        Route("/password-reset", password_reset_page, methods=["GET", "POST"]),
    ]
