"""Maps service-layer exceptions to HTTP responses in one place: JSON under API paths, plain text elsewhere."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from codewell.core.errors import CodewellError
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


async def codewell_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CodewellError)
    if isinstance(exc, BodyTooLarge):
        return refusal(request.scope, exc)  # the shape of the route's family, as when refused by Content-Length
    if exc.http_status >= 500:
        log.error("request failed: %s", exc.message)
    if wants_json(request):
        return JSONResponse(error_body(exc), status_code=exc.http_status)
    return PlainTextResponse(str(exc), status_code=exc.http_status)


async def unhandled_error_handler(request: Request, exc: Exception) -> Response:
    # The traceback goes to the log with the request ID; the caller learns nothing about internals.
    log.exception("unhandled error", exc_info=exc)
    error = CodewellError("internal error; the request ID in the X-Request-ID header identifies it in the log")
    if wants_json(request):
        return JSONResponse(error_body(error), status_code=500)
    return PlainTextResponse(error.message, status_code=500)
