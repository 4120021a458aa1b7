"""Pages of codehosts (thin: the services decide): `/site-admin/code-hosts` (every connection's status with "Test",
"Sync now" and "Remove" (which says how many repositories stay registered and offers to remove them too), and a
form that adds a connection, site admins) and `/settings/code-hosts` (the signed-in
user's own permission sync status with "Sync now").

After a POST the page redirects back with `?done=<code>` (and the connection ID): the notice is one of the fixed
texts below, never text taken from the URL.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action, UserRef, ensure
from codewell.codehosts.connections import KIND_LABELS, ConnectionService, NewConnection, Probe
from codewell.codehosts.service import CodeHostService
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, Unauthenticated
from codewell.http.csrf import verify_form
from codewell.http.guards import require, require_actor
from codewell.http.requests import form_text, runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime

ADMIN_PATH = "/site-admin/code-hosts"
USER_PATH = "/settings/code-hosts"
ADMIN_NOTICES = {
    "created": "Added {label}: its repositories are discovered within a few seconds. Test shows what its token can do.",
    "synced": "Synced {label}: its status below is the result.",
    "failed": "The sync of {label} failed: its error is below.",
}
REMOVED = "Removed the connection {label}."
KEPT = (
    " Its {count} repositories stay registered and searchable but are no longer discovered or fetched with its"
    " token; remove them on the Repositories page if they are not wanted."
)
REMOVED_REPOS = " Its {count} repositories were removed too."
# The fields the add form gives back after a mistake: never the token.
FORM_FIELDS = ("id", "kind", "url", "displayName", "tokenEnv", "username", "scopes", "repos", "authorization")
CONNECTION_ID = re.compile(r"[a-z0-9][a-z0-9_\-]{0,39}")  # config/codehosts.py's rule for an ID
USER_NOTICES = {"synced": "Your repository permissions were synced: the status below is the result."}


def _service(request: Request) -> CodeHostService:
    return runtime_of(request).get(CodeHostService)


# -- site admin -----------------------------------------------------------------------------------------------


async def admin_page(request: Request) -> Response:
    actor = require(request, Action.REPOS_MANAGE)
    notice = ""
    params = request.query_params
    template = ADMIN_NOTICES.get(params.get("done", ""))
    statuses = await run_in_threadpool(_service(request).status, actor)
    shown = next((s for s in statuses if s.id == params.get("id")), None)
    if template is not None and shown is not None:
        notice = template.format(label=shown.label)
    elif params.get("done") == "removed":
        # The connection is gone: its ID is shown only if it is a valid one (never arbitrary text from the URL).
        label = params.get("id", "")
        kept, removed = params.get("kept", ""), params.get("removed", "")
        if CONNECTION_ID.fullmatch(label) and kept.isdigit() and removed.isdigit():
            notice = REMOVED.format(label=label)
            notice += KEPT.format(count=kept) if int(kept) else ""
            notice += REMOVED_REPOS.format(count=removed) if int(removed) else ""
    return await _render_admin(request, actor, notice=notice)


async def _render_admin(
    request: Request,
    actor: Actor,
    *,
    notice: str = "",
    error: str = "",
    form: dict[str, str] | None = None,
    probe: Probe | None = None,
    status_code: int = 200,
) -> Response:
    statuses = await run_in_threadpool(_service(request).status, actor)
    registered = await run_in_threadpool(runtime_of(request).get(ConnectionService).registered, actor)
    return render(
        request,
        "codehosts/admin_codehosts.html",
        status_code=status_code,
        connections=statuses,
        registered=registered,
        notice=notice,
        error=error,
        form={**dict.fromkeys(FORM_FIELDS, ""), "kind": "github", **(form or {})},
        kinds=KIND_LABELS,
        probe=probe,
    )


def _new_connection(form: FormData) -> NewConnection:
    def lines(name: str) -> tuple[str, ...]:
        return tuple(v.strip() for v in form_text(form, name).replace(",", "\n").splitlines() if v.strip())

    return NewConnection(
        id=form_text(form, "id").strip(),
        kind=form_text(form, "kind").strip(),
        url=form_text(form, "url").strip(),
        display_name=form_text(form, "displayName").strip(),
        token=form_text(form, "token").strip(),
        token_env=form_text(form, "tokenEnv").strip(),
        username=form_text(form, "username").strip(),
        scopes=lines("scopes"),
        repos=lines("repos"),
        authorization=form_text(form, "authorization") == "on",
    )


async def admin_create(request: Request) -> Response:
    """`POST /site-admin/code-hosts`: add a connection; a mistake re-renders the form (the token is never sent
    back) with the error at its field."""
    actor = require(request, Action.SITE_ADMIN)
    form = await request.form()
    verify_form(request, form)
    new = _new_connection(form)
    connections = runtime_of(request).get(ConnectionService)
    try:
        created = await run_in_threadpool(connections.add, actor, new)
    except InvalidInput as exc:
        kept = {k: form_text(form, k) for k in FORM_FIELDS}
        error = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        return await _render_admin(request, actor, error=error, form=kept, status_code=exc.http_status)
    return RedirectResponse(f"{ADMIN_PATH}?{urlencode({'done': 'created', 'id': created.id})}", status_code=303)


async def admin_test(request: Request) -> Response:
    """`POST /site-admin/code-hosts/{id}/test`: probe the connection and show each check on the page."""
    actor = require(request, Action.REPOS_MANAGE)
    verify_form(request, await request.form())
    connections = runtime_of(request).get(ConnectionService)
    probe = await run_in_threadpool(connections.test, actor, request.path_params["connection_id"])
    return await _render_admin(request, actor, probe=probe)


async def admin_sync(request: Request) -> Response:
    """`POST /site-admin/code-hosts/{id}/sync`: discover and sync permissions now, then back to the page."""
    actor = require(request, Action.REPOS_MANAGE)
    verify_form(request, await request.form())
    connection_id = request.path_params["connection_id"]
    report = await run_in_threadpool(_service(request).sync_connection, actor, connection_id)
    done = "failed" if report.error is not None else "synced"
    return RedirectResponse(f"{ADMIN_PATH}?{urlencode({'done': done, 'id': connection_id})}", status_code=303)


async def admin_remove(request: Request) -> Response:
    """`POST /site-admin/code-hosts/{id}/remove`: take the connection out of the site config (and its repositories
    too when `repos=remove`), then back to the page, which says what stayed."""
    actor = require(request, Action.SITE_ADMIN)
    form = await request.form()
    verify_form(request, form)
    connections = runtime_of(request).get(ConnectionService)
    with_repos = form_text(form, "repos") == "remove"
    connection_id = request.path_params["connection_id"]
    try:
        removal = await run_in_threadpool(lambda: connections.remove(actor, connection_id, with_repos=with_repos))
    except InvalidInput as exc:
        error = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        return await _render_admin(request, actor, error=error, status_code=exc.http_status)
    query = {"done": "removed", "id": removal.id, "kept": len(removal.kept), "removed": len(removal.removed)}
    return RedirectResponse(f"{ADMIN_PATH}?{urlencode(query)}", status_code=303)


# -- the user's own status ------------------------------------------------------------------------------------


def _own(request: Request) -> tuple[Actor, int]:
    actor = require_actor(request)
    if actor.user_id is None:
        raise Unauthenticated("Sign in to see your code host permissions.")
    ensure(actor, Action.USER_READ, UserRef(actor.user_id))
    return actor, actor.user_id


async def user_page(request: Request) -> Response:
    actor, user_id = _own(request)
    items = await run_in_threadpool(_service(request).user_status, actor, user_id)
    notice = USER_NOTICES.get(request.query_params.get("done", ""), "")
    return render(request, "codehosts/settings_codehosts.html", items=items, notice=notice)


async def user_sync(request: Request) -> Response:
    """`POST /settings/code-hosts/sync`: sync the signed-in user's permissions at every connection now."""
    actor, user_id = _own(request)
    verify_form(request, await request.form())
    await run_in_threadpool(_service(request).sync_user_now, actor, user_id)
    return RedirectResponse(f"{USER_PATH}?done=synced", status_code=303)


def pages(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route(ADMIN_PATH, admin_page, methods=["GET"]),
        Route(ADMIN_PATH, admin_create, methods=["POST"]),
        Route(ADMIN_PATH + "/{connection_id}/test", admin_test, methods=["POST"]),
        Route(ADMIN_PATH + "/{connection_id}/sync", admin_sync, methods=["POST"]),
        Route(ADMIN_PATH + "/{connection_id}/remove", admin_remove, methods=["POST"]),
        Route(USER_PATH, user_page, methods=["GET"]),
        Route(USER_PATH + "/sync", user_sync, methods=["POST"]),
    ]
