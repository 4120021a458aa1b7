"""REST and the admin page of licensing (thin: the service decides): GET /.api/license, /site-admin/license."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action
from codewell.http.guards import require
from codewell.http.requests import runtime_of
from codewell.http.templates import render
from codewell.licensing.plans import FEATURES, LIMITS
from codewell.licensing.service import FEATURE_TITLES, LicensingService
from codewell.runtime import Runtime


async def license_json(request: Request) -> Response:
    actor = require(request, Action.LICENSE_READ)
    report = await run_in_threadpool(runtime_of(request).get(LicensingService).report, actor)
    return JSONResponse(report.as_json(), headers={"cache-control": "no-store"})


async def license_page(request: Request) -> Response:
    actor = require(request, Action.LICENSE_READ)
    report = await run_in_threadpool(runtime_of(request).get(LicensingService).report, actor)
    return render(
        request,
        "licensing/admin_license.html",
        report=report,
        status=report.status,
        features=[(name, FEATURE_TITLES.get(name, name)) for name in FEATURES],
        limit_names=LIMITS,
        notice="",
        error="",
    )


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [Route("/.api/license", license_json, methods=["GET"])]


def pages(runtime: Runtime) -> list[BaseRoute]:
    return [Route("/site-admin/license", license_page, methods=["GET"])]
