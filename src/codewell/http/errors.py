"""Maps service-layer exceptions to HTTP responses in one place: JSON for API paths and JSON clients, a page in
the site's layout for browsers (`templates/error.html`, worded for people), plain text for anything else (curl).

Content negotiation: API paths (`/.api/`, ...) and an `Accept` naming `application/json` get the JSON envelope,
whatever else they accept; an `Accept` naming `text/html` (every browser) gets the page; the rest gets the message
as text. A page that cannot be rendered (the fault being rendered is the template's) falls back to the text.

Storage faults (docs/security.md, "Storage faults") answer 503 with `Retry-After`, whether the database layer
raised `StorageUnavailable` or the file system raised an `OSError` that means a read-only, full or unwritable
data directory; each cause is logged once a minute, not once per request.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from codewell.core.errors import (
    CodewellError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    StorageUnavailable,
    Unauthenticated,
    Unavailable,
)
from codewell.core.logging import request_id_var
from codewell.core.storage import report, storage_error
from codewell.http.bodies import BodyTooLarge, refusal
from codewell.http.templates import render

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


def wants_html(request: Request) -> bool:
    """A browser: its `Accept` names text/html (JSON clients and API paths were answered before)."""
    return "text/html" in request.headers.get("accept", "")


# The title of the page per status, for people.
_TITLES = {
    400: "That request did not work",
    401: "Sign in to see this page",
    403: "You do not have access to this page",
    404: "Page not found",
    405: "That action is not available here",
    409: "That conflicts with what is already there",
    413: "That was too large",
    429: "Too many requests",
    500: "Something went wrong on our side",
    503: "codewell is unavailable for a moment",
}
# A hint that names an MCP tool or API parameter (`list_files shows ...`, `use startLine/endLine`) is written for
# an agent; the page shows its own next steps instead.
_AGENT_WORDING = re.compile(r"\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z][A-Za-z]*\b")


def _title(status: int) -> str:
    return _TITLES.get(status) or ("Something went wrong on our side" if status >= 500 else "That did not work")


def _actions(request: Request, status: int) -> list[tuple[str, str | None]]:
    """What a person can do next, as (text, link) pairs."""
    signed_in = getattr(getattr(request.state, "actor", None), "is_user", False)
    here = request.url.path + ("?" + request.url.query if request.url.query else "")
    actions: list[tuple[str, str | None]] = []
    if status in (401, 403, 404) and not signed_in:
        actions.append(
            (
                "Sign in: private repositories and pages show only to people who may read them",
                "/sign-in?returnTo=" + quote(here, safe=""),
            )
        )
    if status == 404:
        actions.append(("Check the address: a repository, file or revision may have been renamed or removed", None))
    if status == 403 and signed_in:
        actions.append(("Ask a site admin for access", None))
    if status >= 500 or status == 429:
        actions.append(("Wait a moment, then reload the page", None))
    actions.append(("Browse the repositories", "/repositories"))
    actions.append(("Search code", "/search"))
    actions.append(("Go to the home page", "/"))
    return actions


def error_page(
    request: Request,
    status: int,
    message: str,
    *,
    hint: str = "",
    title: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """The page for an error of `status` in the site's layout, written for people; plain text when the page
    itself cannot be rendered (an app without a runtime, a template fault)."""
    shown_hint = "" if _AGENT_WORDING.search(hint) else hint
    try:
        response: Response = render(
            request,
            "error.html",
            status_code=status,
            status=status,
            title=title or _title(status),
            message=message,
            hint=shown_hint,
            actions=_actions(request, status),
            request_id=request_id_var.get() or "",
        )
    except Exception:
        log.exception("the error page could not be rendered; answering plain text")
        return PlainTextResponse(message, status_code=status, headers=headers)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def error_response(request: Request, error: CodewellError) -> Response:
    """The response for `error`, with `Retry-After` when the error says when a retry may work."""
    headers = {}
    if isinstance(error, Unavailable) and error.retry_after is not None:
        headers["retry-after"] = str(error.retry_after)
    if wants_json(request):
        return JSONResponse(error_body(error), status_code=error.http_status, headers=headers)
    if wants_html(request):
        return error_page(request, error.http_status, error.message, hint=error.hint or "", headers=headers)
    return PlainTextResponse(str(error), status_code=error.http_status, headers=headers)


# Starlette's own HTTP errors (no route matched: 404; a route without the method: 405) as codewell errors.
_HTTP_ERRORS: dict[int, type[CodewellError]] = {
    400: InvalidInput,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
}


async def http_exception_handler(request: Request, exc: Exception) -> Response:
    """Starlette's `HTTPException` (an unknown path, a method a route does not take) in the same three shapes as
    every other error, instead of Starlette's bare text. Registered by `app.py` for `HTTPException`."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=headers)
    kind = _HTTP_ERRORS.get(exc.status_code)
    if wants_json(request):
        code = kind.code if kind is not None else f"http_{exc.status_code}"
        message = f"no route for {request.method} {request.url.path}" if exc.status_code in (404, 405) else exc.detail
        body = {"error": {"code": code, "message": message}}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    if wants_html(request):
        page = "There is no page at this address." if exc.status_code == 404 else str(exc.detail)
        return error_page(request, exc.status_code, page, headers=headers)
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=headers)


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
    if wants_html(request):
        return error_page(request, 500, "codewell could not answer this request because of an internal error.")
    return PlainTextResponse(error.message, status_code=500)
