"""Operational endpoints: /healthz (the process is alive), /readyz (it can serve), /metrics (Prometheus).

/healthz and /readyz are anonymous (load balancers probe them). /metrics is for operators: site admins
(session or access token), or a scraper sending `Authorization: Bearer <CODEWELL_METRICS_TOKEN>`. Its
series name routes and error counts, which tell an outsider how the instance is used.
"""

from __future__ import annotations

import hmac
import threading
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from codewell import __version__, authz
from codewell.authz import Action
from codewell.capability import ReadinessCheck
from codewell.core.errors import CodewellError, PermissionDenied, Unauthenticated
from codewell.core.settings import Settings
from codewell.core.storage import CachedProbe, probe_directory
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime

METRICS_PATH = "/metrics"
METRICS_HINT = (
    "sign in as a site admin, or set CODEWELL_METRICS_TOKEN on the server and send "
    "`Authorization: Bearer <that token>` (Prometheus: authorization.credentials)"
)


def check_database(runtime: Runtime) -> str | None:
    try:
        runtime.db.check_connection()
        current = runtime.db.schema_current()
    except CodewellError as exc:
        return exc.message
    if not current:
        return "database migrations are pending: run `codewell db upgrade`"
    return None


def check_database_writes(runtime: Runtime) -> str | None:
    """A real write (one upsert, committed), cached for two seconds: a database that reads but cannot be
    written (a lock held past the busy timeout, a read-only or full disk) is not ready."""
    return runtime.db.probe_write()


_directory_probes: dict[Path, CachedProbe] = {}
_directory_probes_lock = threading.Lock()


def _probe(path: Path) -> str | None:
    with _directory_probes_lock:
        probe = _directory_probes.get(path)
        if probe is None:
            probe = _directory_probes[path] = CachedProbe(lambda: probe_directory(path))
    return probe()


def check_data_dir(runtime: Runtime) -> str | None:
    """A file created, written and deleted in the data directory (and the shared one, when apart), cached for
    two seconds: mirrors, shards and caches are written there, and a read-only or full disk stops them."""
    settings = runtime.settings
    for path in dict.fromkeys((settings.data_dir, settings.shared_dir)):
        if problem := _probe(path):
            return problem
    return None


def check_site_config(runtime: Runtime) -> str | None:
    runtime.site_config.refresh()
    return runtime.site_config.error


# The foundation's checks; each capability may declare more (`Capability.readiness`).
READINESS_CHECKS: list[tuple[str, ReadinessCheck]] = [
    ("database", check_database),
    ("database_writes", check_database_writes),
    ("data_dir", check_data_dir),
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


def metrics_credential(settings: Settings, authorization: str | None) -> bool:
    """Whether an Authorization header value is `Bearer <CODEWELL_METRICS_TOKEN>`; never when that is unset.

    The authentication middleware asks this too, so that it does not take the scraper's secret for an
    (unknown) access token.
    """
    expected = settings.metrics_token
    if not expected or not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    # Compared in constant time: the answer must not tell how much of a guess was right.
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), expected.encode())


async def metrics(request: Request) -> Response:
    actor = actor_of(request)
    if not authz.allowed(actor, Action.METRICS_READ) and not metrics_credential(
        runtime_of(request).settings, request.headers.get("authorization")
    ):
        if actor.is_anonymous:
            raise Unauthenticated("Reading /metrics needs a site admin or the metrics token.", hint=METRICS_HINT)
        raise PermissionDenied("Only site admins and the metrics token can read /metrics.", hint=METRICS_HINT)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST, headers={"cache-control": "no-store"})


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route(METRICS_PATH, metrics, methods=["GET"]),
    ]
