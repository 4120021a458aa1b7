"""CSRF protection for HTML forms: the session's token (or, before sign-in, a random cookie) in a hidden field."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from starlette.requests import Request
from starlette.responses import Response

from codewell.core.errors import PermissionDenied
from codewell.http.requests import runtime_of
from codewell.http.sessions import CSRF_FORM_FIELD, PRESESSION_CSRF_COOKIE, new_csrf_token, same


@runtime_checkable
class SessionWithCsrf(Protocol):
    """What request authentication puts in `request.state.session` for a signed-in browser session."""

    @property
    def csrf_token(self) -> str: ...


def _session(request: Request) -> SessionWithCsrf | None:
    session = getattr(request.state, "session", None)
    return session if isinstance(session, SessionWithCsrf) else None


def csrf_token(request: Request) -> str:
    """The token forms of this request must carry: the session's, else the pre-session cookie's (made here
    when missing; `set_presession_cookie` must then put it on the response)."""
    session = _session(request)
    if session is not None:
        return session.csrf_token
    existing = request.cookies.get(PRESESSION_CSRF_COOKIE, "")
    if existing:
        return existing
    token: str | None = getattr(request.state, "new_csrf", None)
    if token is None:
        token = new_csrf_token()
        request.state.new_csrf = token
    return token


def set_presession_cookie(request: Request, response: Response) -> None:
    token = getattr(request.state, "new_csrf", None)
    if token:
        response.set_cookie(
            PRESESSION_CSRF_COOKIE, token, httponly=True, samesite="strict", secure=_secure(request), path="/"
        )


def verify_form(request: Request, form: Any) -> None:
    """Raise PermissionDenied unless the form's csrf_token matches the request's expected token."""
    sent = form.get(CSRF_FORM_FIELD, "")
    session = _session(request)
    expected = session.csrf_token if session else request.cookies.get(PRESESSION_CSRF_COOKIE, "")
    if not isinstance(sent, str) or not same(sent, expected):
        raise PermissionDenied(
            "The form's CSRF token is missing or wrong.", hint="reload the page and submit the form again"
        )


def _secure(request: Request) -> bool:
    return runtime_of(request).external_url.startswith("https://")
