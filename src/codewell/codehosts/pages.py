"""Pages of codehosts (thin: the service decides): `/site-admin/code-hosts` (every connection's status with a
"Sync now" button, site admins) and `/settings/code-hosts` (the signed-in user's own permission sync status
with "Sync now").

After a POST the page redirects back with `?done=<code>` (and the connection ID): the notice is one of the fixed
texts below, never text taken from the URL.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action, UserRef, ensure
from codewell.codehosts.service import CodeHostService
from codewell.core.actors import Actor
from codewell.core.errors import Unauthenticated
from codewell.http.csrf import verify_form
from codewell.http.guards import require, require_actor
from codewell.http.requests import runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime

ADMIN_PATH = "/site-admin/code-hosts"
USER_PATH = "/settings/code-hosts"
ADMIN_NOTICES = {
    "synced": "Synced {label}: its status below is the result.",
    "failed": "The sync of {label} failed: its error is below.",
}
USER_NOTICES = {"synced": "Your repository permissions were synced: the status below is the result."}


def _service(request: Request) -> CodeHostService:
    return runtime_of(request).get(CodeHostService)


# -- site admin -----------------------------------------------------------------------------------------------


async def admin_page(request: Request) -> Response:
    actor = require(request, Action.REPOS_MANAGE)
    statuses = await run_in_threadpool(_service(request).status, actor)
    notice = ""
    template = ADMIN_NOTICES.get(request.query_params.get("done", ""))
    shown = next((s for s in statuses if s.id == request.query_params.get("id")), None)
    if template is not None and shown is not None:
        notice = template.format(label=shown.label)
    return render(request, "codehosts/admin_codehosts.html", connections=statuses, notice=notice, error="")


async def admin_sync(request: Request) -> Response:
    """`POST /site-admin/code-hosts/{id}/sync`: discover and sync permissions now, then back to the page."""
    actor = require(request, Action.REPOS_MANAGE)
    verify_form(request, await request.form())
    connection_id = request.path_params["connection_id"]
    report = await run_in_threadpool(_service(request).sync_connection, actor, connection_id)
    done = "failed" if report.error is not None else "synced"
    return RedirectResponse(f"{ADMIN_PATH}?{urlencode({'done': done, 'id': connection_id})}", status_code=303)


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
        Route(ADMIN_PATH + "/{connection_id}/sync", admin_sync, methods=["POST"]),
        Route(USER_PATH, user_page, methods=["GET"]),
        Route(USER_PATH + "/sync", user_sync, methods=["POST"]),
    ]
