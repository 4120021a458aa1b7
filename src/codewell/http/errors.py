"""Maps service-layer exceptions to HTTP responses in one place: JSON under API paths, plain text elsewhere.

Storage faults (docs/security.md, "Storage faults") answer 503 with `Retry-After`, whether the database layer
raised `StorageUnavailable` or the file system raised an `OSError` that means a read-only, full or unwritable
data directory; each cause is logged once a minute, not once per request.
"""

from __future__ import annotations

import logging
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from codewell.core.errors import CodewellError, StorageUnavailable, Unavailable
from codewell.core.storage import report, storage_error
from codewell.http.bodies import BodyTooLarge, refusal

log = logging.getLogger(__name__)


def error_body(error: CodewellError) -> dict[str, object]:
    """The one JSON error envelope of every API: {"error": {"code", "message", "hint"?}}."""
    body: dict[str, object] = {"code": error.code, "message": error.message}
    if error.hint:
        body["hint"] = error.hint
    return {"error": body}


def wants_json(request: Request) -> bool:
    path = request.url.path
    accept = request.headers.get("accept", "")
    return path.startswith(("/.api/", "/analytics/api/", "/.auth/idp/")) or "application/json" in accept


def error_response(request: Request, error: CodewellError) -> Response:
    """The response for `error`, with `Retry-After` when the error says when a retry may work."""
    headers = {}
    if isinstance(error, Unavailable) and error.retry_after is not None:
        headers["retry-after"] = str(error.retry_after)
    if wants_json(request):
        return JSONResponse(error_body(error), status_code=error.http_status, headers=headers)
    return PlainTextResponse(str(error), status_code=error.http_status, headers=headers)


async def codewell_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CodewellError)
    if isinstance(exc, BodyTooLarge):
        return refusal(request.scope, exc)  # the shape of the route's family, as when refused by Content-Length
    if isinstance(exc, StorageUnavailable):
        report(exc)  # once per cause and minute: an outage must not write a line per request
    elif exc.http_status >= 500:
        log.error("request failed: %s", exc.message)
    return error_response(request, exc)


def _data_dir(request: Request) -> Path | None:
    runtime = getattr(request.app.state, "runtime", None)
    return runtime.settings.data_dir if runtime is not None else None


async def os_error_handler(request: Request, exc: Exception) -> Response:
    """An OSError that escaped a route: a storage fault answers 503 (logged once per cause), anything else is
    an unhandled error. Registered for OSError, so that Starlette answers it without re-raising it to the
    server (which would log a traceback per request)."""
    assert isinstance(exc, OSError)
    fault = storage_error(exc, _data_dir(request))
    if fault is None:
        return await unhandled_error_handler(request, exc)
    report(fault)
    return error_response(request, fault)


async def unhandled_error_handler(request: Request, exc: Exception) -> Response:
    if isinstance(exc, OSError) and (fault := storage_error(exc, _data_dir(request))) is not None:
        report(fault)
        return error_response(request, fault)
    # The traceback goes to the log with the request ID; the caller learns nothing about internals.
    log.exception("unhandled error", exc_info=exc)
    error = CodewellError("internal error; the request ID in the X-Request-ID header identifies it in the log")
    if wants_json(request):
        return JSONResponse(error_body(error), status_code=500)
    return PlainTextResponse(error.message, status_code=500)
