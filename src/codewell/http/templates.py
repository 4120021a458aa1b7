"""Server-rendered pages: one Jinja2 environment and `render(request, name, **ctx)`.

The kit's own templates (`base.html`) live in `codewell/http/templates/`; each capability declares its folder
(`Capability.templates`, files under a sub-folder named after the capability to avoid clashes). Pages extend
`base.html` and fill `{% block title %}` and `{% block content %}`. Every template sees `actor` (the
signed-in user or anonymous), `csrf_token` and `csrf_field()` (a hidden input for forms) and `request`.
Scripts that call `/.api/` with the session cookie must send `X-CSRF-Token` (the page's `csrf-token` meta tag).

Page notices (`PageNotices`): capabilities register, in their setup, callables that return notices for a request
(`runtime.get(PageNotices).add(source)`); base.html shows them at the top of every page. A source that fails is
logged and skipped: a notice never breaks a page.

Content-Security-Policy (`page_csp`): scripts and styles only from this origin or carrying the page's nonce:
a `<script>` or `<style>` element in a template needs `nonce="{{ csp_nonce }}"`, and `style="..."` attributes
and `on...=` handlers do not run at all (use classes in base.html's style block). An injected tag without
the per-response nonce is inert, which is the point.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import jinja2
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from codewell.http.csrf import csrf_token, set_presession_cookie
from codewell.http.requests import actor_of, runtime_of
from codewell.http.sessions import CSRF_FORM_FIELD

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)
TEMPLATES_DIR = Path(__file__).parent / "templates"


@dataclass(frozen=True, slots=True)
class Notice:
    """A line shown at the top of every page (escaped), with an optional link to act on it."""

    text: str
    level: Literal["info", "warning", "error"] = "info"
    link: str | None = None
    link_text: str | None = None


NoticeSource = Callable[[Request], Sequence[Notice]]


class PageNotices:
    """The notice sources capabilities registered (e.g. licensing's expiry banner); asked on every page."""

    def __init__(self) -> None:
        self._sources: list[NoticeSource] = []
        self._lock = threading.Lock()

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls()

    def add(self, source: NoticeSource) -> None:
        """Register a source (idempotent: setup may run more than once per runtime)."""
        with self._lock:
            if source not in self._sources:
                self._sources.append(source)

    def for_request(self, request: Request) -> list[Notice]:
        notices: list[Notice] = []
        for source in list(self._sources):
            try:
                notices.extend(source(request))
            except Exception:
                log.exception("page notice source %r failed", source)
        return notices


@functools.cache
def environment(capability_folders: Sequence[Path] = ()) -> jinja2.Environment:
    """The one Jinja2 environment for the kit's templates plus the given capability folders."""
    folders = [TEMPLATES_DIR, *capability_folders]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(f) for f in folders]),
        autoescape=jinja2.select_autoescape(["html", "xml"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["datetime"] = lambda value: value.strftime("%Y-%m-%d %H:%M UTC") if value else "—"
    return env


def page_csp(nonce: str) -> str:
    """The Content-Security-Policy of a rendered page. No 'unsafe-inline': inline code needs the nonce.
    No form-action: sign-in and OAuth flows end in redirects to other origins, which browsers check against it."""
    return (
        f"default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'nonce-{nonce}'; "
        "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    )


def render(request: Request, name: str, *, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    """Render template `name` with the common context plus `ctx`, as an HTML response."""
    token = csrf_token(request)
    nonce = secrets.token_urlsafe(16)

    def csrf_field() -> Markup:
        return Markup(f'<input type="hidden" name="{CSRF_FORM_FIELD}" value="{escape(token)}">')

    context = {
        "request": request,
        "actor": actor_of(request),
        "csrf_token": token,
        "csrf_field": csrf_field,
        "csp_nonce": nonce,
        **ctx,
    }
    runtime = runtime_of(request)
    context.setdefault("page_notices", runtime.get(PageNotices).for_request(request))
    folders = tuple(c.templates for c in runtime.capabilities if c.templates is not None)
    html = environment(folders).get_template(name).render(context)
    response = HTMLResponse(html, status_code=status_code)
    set_presession_cookie(request, response)
    # Pages are per-user: never cache them in shared caches, never frame them (clickjacking).
    response.headers["cache-control"] = "no-store"
    response.headers["x-frame-options"] = "DENY"
    response.headers["content-security-policy"] = page_csp(nonce)
    return response
