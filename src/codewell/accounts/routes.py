"""REST API for users, tokens, roles and the audit log under /.api/ (thin: the services decide)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell import authz
from codewell.accounts.audit import AuditService
from codewell.accounts.credentials import CredentialService
from codewell.accounts.roles import RoleService
from codewell.accounts.service import AccountService, User
from codewell.accounts.tokens import SCOPE_USER_ALL, TokenService
from codewell.accounts.verification import NOT_CONFIGURED, EmailVerificationService
from codewell.authz import Action, UserRef
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput
from codewell.http.guards import require, require_actor
from codewell.http.requests import json_body, runtime_of
from codewell.repos.service import RepoService
from codewell.runtime import Runtime

Handler = Callable[[Request], Awaitable[Response]]


def _field(body: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    value = body.get(key, default)
    if value is not None and not isinstance(value, kind):
        raise InvalidInput(f"{key} must be a {kind.__name__}")
    return value


def _int_param(request: Request, key: str) -> int | None:
    value = request.query_params.get(key)
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise InvalidInput(f"{key} must be a non-negative integer")
    return int(value)


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _user_param(runtime: Runtime, request: Request) -> User:
    username = request.path_params["username"]
    accounts = runtime.get(AccountService)
    if username == "me":
        actor = require_actor(request)
        assert actor.user_id is not None
        return accounts.get_user(actor.user_id)
    return accounts.get_by_username(username)


def _user_json(runtime: Runtime, actor: Actor, user: User) -> dict[str, Any]:
    body = user.as_json()
    body["roles"] = runtime.get(RoleService).roles_of_user(user.id, site_admin=user.site_admin)
    if authz.allowed(actor, Action.USER_READ, UserRef(user.id)):
        body["emails"] = [e.as_json() for e in runtime.get(AccountService).list_emails(actor, user.id)]
        body["emailVerificationByLink"] = runtime.get(EmailVerificationService).mail_configured()
    return body


def threaded(work: Callable[[Request, Runtime], Any], status: int = 200) -> Handler:
    """A handler running `work(request, runtime)` in a thread and returning its result as JSON."""

    async def handler(request: Request) -> Response:
        if request.method in ("POST", "PUT", "PATCH"):
            request.state.body = await json_body(request)
        result = await run_in_threadpool(work, request, runtime_of(request))
        if result is None:
            return Response(status_code=204)
        return JSONResponse(result, status_code=status)

    return handler


# -- users --------------------------------------------------------------------------------------------------
def list_users(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    limit = _default(_int_param(request, "limit"), 100)
    users = runtime.get(AccountService).list_users(actor, request.query_params.get("query", ""), limit=limit)
    return {"users": [u.as_json() for u in users]}


def create_user(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.USERS_MANAGE)
    body = request.state.body
    user = runtime.get(AccountService).create_user(
        actor,
        _field(body, "username", str, ""),
        password=_field(body, "password", str),
        email=_field(body, "email", str),
        email_verified=_field(body, "emailVerified", bool, False),
        site_admin=_field(body, "siteAdmin", bool, False),
        service_account=_field(body, "serviceAccount", bool, False),
        display_name=_field(body, "displayName", str, ""),
    )
    email = _field(body, "email", str)
    if email and not _field(body, "emailVerified", bool, False):
        # Best effort (no-op without SMTP); POST .../emails/{email}/verification resends.
        runtime.get(EmailVerificationService).after_email_added(actor, user.id, email)
    return _user_json(runtime, actor, user)


def get_user(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    return _user_json(runtime, actor, _user_param(runtime, request))


def update_user(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    user = _user_param(runtime, request)
    body = request.state.body
    accounts = runtime.get(AccountService)
    if "siteAdmin" in body:
        require(request, Action.USERS_MANAGE)
        user = accounts.set_site_admin(actor, user.id, _field(body, "siteAdmin", bool))
    if "username" in body:
        user = accounts.set_username(actor, user.id, _field(body, "username", str, ""))
    if "displayName" in body:
        user = accounts.set_display_name(actor, user.id, _field(body, "displayName", str, ""))
    if "password" in body:
        accounts.set_password(actor, user.id, _field(body, "password", str, ""))
    return _user_json(runtime, actor, accounts.get_user(user.id))


def delete_user(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.USERS_MANAGE)
    runtime.get(AccountService).delete_user(actor, _user_param(runtime, request).id)


def reset_link(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.USERS_MANAGE)
    return {"url": runtime.get(CredentialService).password_reset_link(actor, _user_param(runtime, request).id)}


def add_email(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    body = request.state.body
    user = _user_param(runtime, request)
    email = runtime.get(AccountService).add_email(
        actor, user.id, _field(body, "email", str, ""), verified=_field(body, "verified", bool, False)
    )
    result = email.as_json()
    # "sent" | "notConfigured" (admins mark it verified) | "failed" (resend later) | "alreadyVerified"
    result["verification"] = runtime.get(EmailVerificationService).after_email_added(actor, user.id, email.email)
    if result["verification"] == "notConfigured":
        result["verificationMessage"] = f"{NOT_CONFIGURED[0]}: {NOT_CONFIGURED[1]}"
    return result


def resend_verification(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    user = _user_param(runtime, request)
    client = request.client.host if request.client else ""
    runtime.get(EmailVerificationService).send_link(
        actor, user.id, request.path_params["email"], ip=client, user_agent=request.headers.get("user-agent", "")
    )
    return {"email": request.path_params["email"].strip().lower(), "verification": "sent"}


def update_email(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.USERS_MANAGE)
    user = _user_param(runtime, request)
    verified = _field(request.state.body, "verified", bool, True)
    runtime.get(AccountService).set_email_verified(actor, user.id, request.path_params["email"], verified)
    return {"email": request.path_params["email"].lower(), "verified": verified}


def remove_email(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    runtime.get(AccountService).remove_email(actor, _user_param(runtime, request).id, request.path_params["email"])


def user_repos(request: Request, runtime: Runtime) -> Any:
    """GET: repositories explicitly granted to the user; PUT {"repos": [...]}: replace the grants."""
    actor = require_actor(request)
    user = _user_param(runtime, request)
    repos = runtime.get(RepoService)
    if request.method == "PUT":
        require(request, Action.REPOS_MANAGE)
        names = _field(request.state.body, "repos", list, [])
        if not all(isinstance(n, str) for n in names):
            raise InvalidInput("repos must be a list of repository names")
        repos.set_user_repos(actor, user.id, names)
        # Explicit grants override what code hosts sync: audited.
        details = {"user": user.username, "repos": sorted(names)[:100]}
        runtime.get(AuditService).record("repos.grants", "set", actor=actor, details=details)
    return {"repos": [r.name for r in repos.repos_of_user(actor, user.id)]}


# -- tokens -------------------------------------------------------------------------------------------------
def list_tokens(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    username = request.query_params.get("user")
    accounts = runtime.get(AccountService)
    user_id = accounts.get_by_username(username).id if username else actor.user_id
    assert user_id is not None
    return {"tokens": [t.as_json() for t in runtime.get(TokenService).list(actor, user_id)]}


def create_token(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    body = request.state.body
    username = _field(body, "user", str)
    user_id = runtime.get(AccountService).get_by_username(username).id if username else actor.user_id
    assert user_id is not None
    scopes = _field(body, "scopes", list, [SCOPE_USER_ALL])
    if not all(isinstance(s, str) for s in scopes):
        raise InvalidInput("scopes must be a list of strings")
    options = runtime.config.auth_access_tokens
    expires = _field(body, "expiresInDays", int, options.default_expiration_days)
    if body.get("expiresInDays", 0) is None:
        expires = None  # explicit null: no expiry (when the site allows it)
    raw, info = runtime.get(TokenService).create_token(actor, user_id, _field(body, "note", str, ""), scopes, expires)
    return {"token": raw, **info.as_json()}


def revoke_token(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    token_id = request.path_params["token_id"]
    return runtime.get(TokenService).revoke(actor, token_id).as_json()


# -- roles --------------------------------------------------------------------------------------------------
def list_roles(request: Request, runtime: Runtime) -> Any:
    return {"roles": [r.as_json() for r in runtime.get(RoleService).list_roles(require_actor(request))]}


def create_role(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.ROLES_MANAGE)
    body = request.state.body
    perms = _field(body, "permissions", list, [])
    role = runtime.get(RoleService).create_role(actor, _field(body, "name", str, ""), tuple(map(str, perms)))
    return role.as_json()


def get_role(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    roles = runtime.get(RoleService)
    body = roles.get_role(actor, request.path_params["name"]).as_json()
    if authz.allowed(actor, Action.ROLE_MEMBERS_READ):
        body["users"] = roles.users_with_role(actor, request.path_params["name"])
    return body


def rename_role(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.ROLES_MANAGE)
    new_name = _field(request.state.body, "name", str, "")
    return runtime.get(RoleService).rename_role(actor, request.path_params["name"], new_name).as_json()


def delete_role(request: Request, runtime: Runtime) -> Any:
    runtime.get(RoleService).delete_role(require(request, Action.ROLES_MANAGE), request.path_params["name"])


def role_permission(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.ROLES_MANAGE)
    name, permission = request.path_params["name"], request.path_params["permission"]
    granted = request.method == "PUT"
    return runtime.get(RoleService).set_permission(actor, name, permission, granted=granted).as_json()


def role_user(request: Request, runtime: Runtime) -> Any:
    actor = require(request, Action.ROLES_MANAGE)
    user = runtime.get(AccountService).get_by_username(request.path_params["username"])
    assigned = request.method == "PUT"
    runtime.get(RoleService).set_assignment(actor, request.path_params["name"], user.id, assigned=assigned)
    return {"role": request.path_params["name"], "user": user.username, "assigned": assigned}


# -- audit --------------------------------------------------------------------------------------------------
def list_audit(request: Request, runtime: Runtime) -> Any:
    actor = require_actor(request)
    params = request.query_params
    user_id = None
    if params.get("user"):
        user_id = runtime.get(AccountService).get_by_username(params["user"]).id
    entries = runtime.get(AuditService).list(
        actor,
        entity=params.get("entity", ""),
        action=params.get("action", ""),
        user_id=user_id,
        before_id=_int_param(request, "before"),
        limit=_default(_int_param(request, "limit"), 100),
    )
    return {"entries": [e.as_json() for e in entries]}


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/.api/users", threaded(list_users), methods=["GET"]),
        Route("/.api/users", threaded(create_user, 201), methods=["POST"]),
        Route("/.api/users/{username}", threaded(get_user), methods=["GET"]),
        Route("/.api/users/{username}", threaded(update_user), methods=["PATCH"]),
        Route("/.api/users/{username}", threaded(delete_user), methods=["DELETE"]),
        Route("/.api/users/{username}/password-reset-link", threaded(reset_link, 201), methods=["POST"]),
        Route("/.api/users/{username}/emails", threaded(add_email, 201), methods=["POST"]),
        Route("/.api/users/{username}/emails/{email}", threaded(update_email), methods=["PATCH"]),
        Route(
            "/.api/users/{username}/emails/{email}/verification", threaded(resend_verification, 201), methods=["POST"]
        ),
        Route("/.api/users/{username}/emails/{email}", threaded(remove_email), methods=["DELETE"]),
        Route("/.api/users/{username}/repos", threaded(user_repos), methods=["GET", "PUT"]),
        Route("/.api/tokens", threaded(list_tokens), methods=["GET"]),
        Route("/.api/tokens", threaded(create_token, 201), methods=["POST"]),
        Route("/.api/tokens/{token_id:int}", threaded(revoke_token), methods=["DELETE"]),
        Route("/.api/roles", threaded(list_roles), methods=["GET"]),
        Route("/.api/roles", threaded(create_role, 201), methods=["POST"]),
        Route("/.api/roles/{name}", threaded(get_role), methods=["GET"]),
        Route("/.api/roles/{name}", threaded(rename_role), methods=["PATCH"]),
        Route("/.api/roles/{name}", threaded(delete_role), methods=["DELETE"]),
        Route("/.api/roles/{name}/permissions/{permission}", threaded(role_permission), methods=["PUT", "DELETE"]),
        Route("/.api/roles/{name}/users/{username}", threaded(role_user), methods=["PUT", "DELETE"]),
        Route("/.api/audit", threaded(list_audit), methods=["GET"]),
    ]
