"""`/site-admin/jobs`: the background job queue for site admins (thin: JobService decides).

Queue depth per kind, the oldest waiting job, the processes running jobs, failed jobs with their reasons, and
the newest jobs, with Cancel and Retry buttons. After a POST the page redirects back with `?done=<code>`: the
notice is one of the fixed texts below, never text taken from the URL.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action
from codewell.core.errors import InvalidInput
from codewell.http.csrf import verify_form
from codewell.http.guards import require
from codewell.http.requests import runtime_of
from codewell.http.templates import render
from codewell.jobs.models import STATES
from codewell.jobs.service import JobService
from codewell.runtime import Runtime

PATH = "/site-admin/jobs"
NOTICES = {
    "cancelled": "Job {id} was cancelled (a running job stops at its next safe point).",
    "retried": "Job {id} was queued again.",
}


async def jobs_page(request: Request) -> Response:
    actor = require(request, Action.JOBS_READ)
    service = runtime_of(request).get(JobService)
    state = request.query_params.get("state") or None
    if state is not None and state not in STATES:
        raise InvalidInput(f"unknown job state {state!r}", hint="one of " + ", ".join(STATES))
    kind = request.query_params.get("kind") or None
    stats = await run_in_threadpool(service.stats, actor)
    workers = await run_in_threadpool(service.workers, actor)
    failed = await run_in_threadpool(lambda: service.list_jobs(actor, state="failed", limit=50))
    recent = await run_in_threadpool(lambda: service.list_jobs(actor, state=state, kind=kind, limit=100))
    notice = ""
    template = NOTICES.get(request.query_params.get("done", ""))
    job_id = request.query_params.get("id", "")
    if template is not None and job_id.isdigit():
        notice = template.format(id=int(job_id))
    return render(
        request,
        "jobs/admin_jobs.html",
        stats=stats,
        workers=workers,
        failed=failed,
        recent=recent,
        states=STATES,
        state=state or "",
        kind=kind or "",
        notice=notice,
    )


async def job_action(request: Request) -> Response:
    """`POST /site-admin/jobs/{id}/cancel|retry`, then back to the page."""
    actor = require(request, Action.JOBS_MANAGE)
    verify_form(request, await request.form())
    service = runtime_of(request).get(JobService)
    job_id = int(request.path_params["job_id"])
    action = request.path_params["action"]
    if action == "cancel":
        job = await run_in_threadpool(service.cancel, actor, job_id)
        done = "cancelled"
    else:
        job = await run_in_threadpool(service.retry, actor, job_id)
        done = "retried"
    return RedirectResponse(f"{PATH}?{urlencode({'done': done, 'id': job.id})}", status_code=303)


def pages(_runtime: Runtime) -> list[BaseRoute]:
    return [
        Route(PATH, jobs_page, methods=["GET"]),
        Route(PATH + "/{job_id:int}/{action:str}", job_action, methods=["POST"]),
    ]
