"""HTML pages: the user's access tokens (settings) and the site admin's users, roles and audit log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell import authz
from codewell.accounts.audit import AuditService
from codewell.accounts.credentials import CredentialService
from codewell.accounts.permissions import PERMISSIONS
from codewell.accounts.roles import RoleService
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.accounts.verification import NOT_CONFIGURED, VERIFY_PATH, EmailVerificationService
from codewell.authz import Action
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, Unauthenticated
from codewell.http.csrf import verify_form
from codewell.http.guards import require, require_actor
from codewell.http.requests import form_expiry_days, form_text, runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime


# -- settings: access tokens --------------------------------------------------------------------------------
def _tokens_context(runtime: Runtime, actor: Actor) -> dict[str, Any]:
    assert actor.user_id is not None
    options = runtime.config.auth_access_tokens
    allowed = options.allow == "all-users-create" or (
        options.allow == "site-admin-create" and authz.allowed(actor, Action.SITE_ADMIN)
    )
    return {
        "tokens": runtime.get(TokenService).list(actor, actor.user_id),
        "can_create": allowed,
        "expiry_options": sorted({*options.expiration_option_days, options.default_expiration_days}),
        "default_days": options.default_expiration_days,
        "allow_no_expiration": options.allow_no_expiration,
        "new_token": "",
        "error": "",
    }


async def tokens_page(request: Request) -> Response:
    actor = require_actor(request)
    runtime = runtime_of(request)
    context = await run_in_threadpool(_tokens_context, runtime, actor)
    return render(request, "accounts/tokens.html", **context)


async def create_token_page(request: Request) -> Response:
    actor = require_actor(request)
    runtime = runtime_of(request)
    form = await request.form()
    verify_form(request, form)
    scopes = [s for s in form.getlist("scopes") if isinstance(s, str)]
    new_token, error, status = "", "", 201

    def create() -> str:
        assert actor.user_id is not None
        expires = form_expiry_days(form)
        raw, _ = runtime.get(TokenService).create_token(actor, actor.user_id, form_text(form, "note"), scopes, expires)
        return raw

    try:
        new_token = await run_in_threadpool(create)
    except CodewellError as exc:
        error, status = exc.message, exc.http_status
    context = await run_in_threadpool(_tokens_context, runtime, actor)
    context.update(new_token=new_token, error=error)
    return render(request, "accounts/tokens.html", status_code=status, **context)


async def revoke_token_page(request: Request) -> Response:
    actor = require_actor(request)
    form = await request.form()
    verify_form(request, form)
    await run_in_threadpool(runtime_of(request).get(TokenService).revoke, actor, request.path_params["token_id"])
    return RedirectResponse("/settings/tokens", status_code=303)


# -- settings: e-mail addresses -----------------------------------------------------------------------------
_OUTCOMES = {
    "sent": "We sent a verification link to {email}. Open it while signed in to verify the address.",
    "notConfigured": "Added {email}. " + NOT_CONFIGURED[0].capitalize() + ": " + NOT_CONFIGURED[1] + ".",
    "failed": "Added {email}, but the verification e-mail could not be sent; try Resend later.",
    "alreadyVerified": "Added {email} (verified).",
}


def _emails_context(runtime: Runtime, actor: Actor) -> dict[str, Any]:
    assert actor.user_id is not None
    return {
        "emails": runtime.get(AccountService).list_emails(actor, actor.user_id),
        "mail_configured": runtime.get(EmailVerificationService).mail_configured(),
        "not_configured": f"{NOT_CONFIGURED[0].capitalize()}: {NOT_CONFIGURED[1]}.",
        "notice": "",
        "error": "",
    }


def _add_email(runtime: Runtime, actor: Actor, form: FormData) -> str:
    assert actor.user_id is not None
    added = runtime.get(AccountService).add_email(actor, actor.user_id, form_text(form, "email"))
    outcome = runtime.get(EmailVerificationService).after_email_added(actor, actor.user_id, added.email)
    return _OUTCOMES[outcome].format(email=added.email)


def _resend_email(runtime: Runtime, actor: Actor, form: FormData) -> str:
    assert actor.user_id is not None
    email = form_text(form, "email")
    runtime.get(EmailVerificationService).send_link(actor, actor.user_id, email)
    return _OUTCOMES["sent"].format(email=email.strip().lower())


def _remove_email(runtime: Runtime, actor: Actor, form: FormData) -> str:
    assert actor.user_id is not None
    runtime.get(AccountService).remove_email(actor, actor.user_id, form_text(form, "email"))
    return f"Removed {form_text(form, 'email').strip().lower()}."


def emails_form(action: Callable[[Runtime, Actor, FormData], str]) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler on /settings/emails: CSRF check, run `action`, show the page with its notice or error."""

    async def handler(request: Request) -> Response:
        actor = require_actor(request)
        form = await request.form()
        verify_form(request, form)
        runtime = runtime_of(request)
        notice, error, status = "", "", 200
        try:
            notice = await run_in_threadpool(action, runtime, actor, form)
        except CodewellError as exc:
            error, status = exc.message, exc.http_status
        context = await run_in_threadpool(_emails_context, runtime, actor)
        context.update(notice=notice, error=error)
        return render(request, "accounts/emails.html", status_code=status, **context)

    return handler


async def emails_page(request: Request) -> Response:
    actor = require_actor(request)
    context = await run_in_threadpool(_emails_context, runtime_of(request), actor)
    return render(request, "accounts/emails.html", **context)


async def verify_email_page(request: Request) -> Response:
    """GET /.auth/verify-email?code=...: anonymous visitors sign in first and come back; the signed-in user
    must be the one the link was sent to (see EmailVerificationService.verify)."""
    code = request.query_params.get("code", "")
    try:
        actor = require_actor(request)
    except Unauthenticated:
        back = VERIFY_PATH + "?" + urlencode({"code": code})
        return RedirectResponse("/sign-in?" + urlencode({"returnTo": back}), status_code=303)
    runtime = runtime_of(request)
    client_ip = request.client.host if request.client else ""
    user_agent = request.headers.get("user-agent", "")
    service = runtime.get(EmailVerificationService)
    try:
        result = await run_in_threadpool(lambda: service.verify(actor, code, ip=client_ip, user_agent=user_agent))
    except CodewellError as exc:
        return render(
            request,
            "accounts/verify_email.html",
            status_code=exc.http_status,
            email="",
            error=exc.message,
            hint=exc.hint or "",
        )
    return render(request, "accounts/verify_email.html", email=result.email, error="", hint="")


# -- site admin ---------------------------------------------------------------------------------------------
AdminAction = Callable[[Runtime, Actor, Request, FormData], str]


def admin_form(action: AdminAction, back: str) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler: CSRF check, run `action` (returns a notice), then show the admin page again."""

    async def handler(request: Request) -> Response:
        actor = require(request, Action.SITE_ADMIN)
        form = await request.form()
        verify_form(request, form)
        runtime = runtime_of(request)
        notice, error, status = "", "", 200
        try:
            notice = await run_in_threadpool(action, runtime, actor, request, form)
        except CodewellError as exc:
            error, status = exc.message, exc.http_status
        page = PAGES[back]
        context = await run_in_threadpool(page[1], runtime, actor, request)
        return render(request, page[0], status_code=status, notice=notice, error=error, **context)

    return handler


def _users_context(runtime: Runtime, actor: Actor, request: Request) -> dict[str, Any]:
    users = runtime.get(AccountService).list_users(actor, limit=1000)
    roles = runtime.get(RoleService)
    return {"users": [(u, roles.roles_of_user(u.id, site_admin=u.site_admin)) for u in users]}


def _roles_context(runtime: Runtime, actor: Actor, request: Request) -> dict[str, Any]:
    service = runtime.get(RoleService)
    roles = service.list_roles(actor)
    pairs = [(r, [] if r.system else service.users_with_role(actor, r.name)) for r in roles]
    return {"roles": pairs, "permissions": sorted(PERMISSIONS)}


def _audit_context(runtime: Runtime, actor: Actor, request: Request) -> dict[str, Any]:
    params = request.query_params
    before = params.get("before", "")
    entity, action, limit = params.get("entity", ""), params.get("action", ""), 100
    entries = runtime.get(AuditService).list(
        actor, entity=entity, action=action, before_id=int(before) if before.isdigit() else None, limit=limit
    )
    return {"entries": entries, "entity": entity, "action": action, "limit": limit}


PAGES: dict[str, tuple[str, Callable[[Runtime, Actor, Request], dict[str, Any]]]] = {
    "users": ("accounts/admin_users.html", _users_context),
    "roles": ("accounts/admin_roles.html", _roles_context),
    "audit": ("accounts/admin_audit.html", _audit_context),
}


def admin_page(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def handler(request: Request) -> Response:
        actor = require(request, Action.SITE_ADMIN)
        template, build = PAGES[name]
        context = await run_in_threadpool(build, runtime_of(request), actor, request)
        return render(request, template, notice="", error="", **context)

    return handler


def _create_user(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    service_account = form_text(form, "serviceAccount") == "true"
    email = form_text(form, "email") or None
    user = runtime.get(AccountService).create_user(
        actor,
        form_text(form, "username"),
        email=email,
        email_verified=email is not None,
        service_account=service_account,
    )
    if service_account:
        return f"Created service account {user.username}; create access tokens for it with `codewell tokens create`."
    link = runtime.get(CredentialService).password_reset_link(actor, user.id)
    return f"Created {user.username}. Send them this link to choose a password: {link}"


def _set_admin(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    accounts = runtime.get(AccountService)
    user = accounts.get_by_username(request.path_params["username"])
    user = accounts.set_site_admin(actor, user.id, form_text(form, "siteAdmin") == "true")
    return f"{user.username} is {'now' if user.site_admin else 'no longer'} a site admin."


def _reset_link(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    user = runtime.get(AccountService).get_by_username(request.path_params["username"])
    link = runtime.get(CredentialService).password_reset_link(actor, user.id)
    return f"Password reset link for {user.username}: {link}"


def _delete_user(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    accounts = runtime.get(AccountService)
    user = accounts.get_by_username(request.path_params["username"])
    accounts.delete_user(actor, user.id)
    return f"Deleted {user.username}."


def _create_role(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    perms = tuple(p for p in form.getlist("permissions") if isinstance(p, str))
    role = runtime.get(RoleService).create_role(actor, form_text(form, "name"), perms)
    return f"Created role {role.name}."


def _role_permission(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    granted = form_text(form, "op") == "add"
    name, permission = request.path_params["name"], form_text(form, "permission")
    runtime.get(RoleService).set_permission(actor, name, permission, granted=granted)
    return f"{'Added' if granted else 'Removed'} {permission} {'to' if granted else 'from'} {name}."


def _role_user(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    assigned = form_text(form, "op") == "assign"
    user = runtime.get(AccountService).get_by_username(form_text(form, "username"))
    runtime.get(RoleService).set_assignment(actor, request.path_params["name"], user.id, assigned=assigned)
    role = request.path_params["name"]
    return f"Assigned {role} to {user.username}." if assigned else f"Unassigned {role} from {user.username}."


def _delete_role(runtime: Runtime, actor: Actor, request: Request, form: FormData) -> str:
    runtime.get(RoleService).delete_role(actor, request.path_params["name"])
    return f"Deleted role {request.path_params['name']}."


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/settings/tokens", tokens_page, methods=["GET"]),
        Route("/settings/tokens", create_token_page, methods=["POST"]),
        Route("/settings/tokens/{token_id:int}/revoke", revoke_token_page, methods=["POST"]),
        Route("/settings/emails", emails_page, methods=["GET"]),
        Route("/settings/emails", emails_form(_add_email), methods=["POST"]),
        Route("/settings/emails/resend", emails_form(_resend_email), methods=["POST"]),
        Route("/settings/emails/remove", emails_form(_remove_email), methods=["POST"]),
        Route(VERIFY_PATH, verify_email_page, methods=["GET"]),
        Route("/site-admin/users", admin_page("users"), methods=["GET"]),
        Route("/site-admin/users", admin_form(_create_user, "users"), methods=["POST"]),
        Route("/site-admin/users/{username}/admin", admin_form(_set_admin, "users"), methods=["POST"]),
        Route("/site-admin/users/{username}/reset-link", admin_form(_reset_link, "users"), methods=["POST"]),
        Route("/site-admin/users/{username}/delete", admin_form(_delete_user, "users"), methods=["POST"]),
        Route("/site-admin/roles", admin_page("roles"), methods=["GET"]),
        Route("/site-admin/roles", admin_form(_create_role, "roles"), methods=["POST"]),
        Route("/site-admin/roles/{name}/permissions", admin_form(_role_permission, "roles"), methods=["POST"]),
        Route("/site-admin/roles/{name}/users", admin_form(_role_user, "roles"), methods=["POST"]),
        Route("/site-admin/roles/{name}/delete", admin_form(_delete_role, "roles"), methods=["POST"]),
        Route("/site-admin/audit", admin_page("audit"), methods=["GET"]),
    ]
