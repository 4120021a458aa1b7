"""Operational endpoints: /healthz (the process is alive), /readyz (it can serve), /metrics (Prometheus)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from codewell import __version__
from codewell.capability import ReadinessCheck
from codewell.core.errors import CodewellError
from codewell.runtime import Runtime


def check_database(runtime: Runtime) -> str | None:
    try:
        runtime.db.check_connection()
        state = runtime.db.migration_state()
    except CodewellError as exc:
        return exc.message
    if state.pending:
        return "database migrations are pending: run `codewell db upgrade`"
    return None


def check_site_config(runtime: Runtime) -> str | None:
    runtime.site_config.refresh()
    return runtime.site_config.error


# The foundation's checks; each capability may declare more (`Capability.readiness`).
READINESS_CHECKS: list[tuple[str, ReadinessCheck]] = [
    ("database", check_database),
    ("site_config", check_site_config),
]


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


async def readyz(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime

    def run_checks() -> dict[str, str]:
        checks = [*READINESS_CHECKS, *(check for c in runtime.capabilities for check in c.readiness)]
        return {name: check(runtime) or "ok" for name, check in checks}

    results = await run_in_threadpool(run_checks)
    ready = all(value == "ok" for value in results.values())
    body = {"status": "ready" if ready else "not ready", "version": __version__, "checks": results}
    return JSONResponse(body, status_code=200 if ready else 503)


async def metrics(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
