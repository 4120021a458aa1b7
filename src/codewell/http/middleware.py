"""Request ID, security headers, access logging, request metrics and the body size caps as one pure ASGI
middleware."""

from __future__ import annotations

import logging
import os
import random
import re
import time

from prometheus_client import Counter, Histogram
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codewell import authz
from codewell.core.logging import request_id_var
from codewell.http import bodies
from codewell.runtime import Runtime

log = logging.getLogger("codewell.access")

REQUESTS = Counter("codewell_http_requests_total", "HTTP requests served", ["method", "route", "status"])
LATENCY = Histogram(
    "codewell_http_request_duration_seconds",
    "HTTP request latency",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Request IDs only need to be unique, not unguessable: a generator seeded once per process instead of uuid4's
# os.urandom per request, a system call that also let go of the GIL on every request (the loop thread then
# waited for worker threads to give it back).
_REQUEST_IDS = random.Random(os.urandom(32))

# On every response. nosniff: a file served as text/plain (a repository file, a CSV) is never run as a script
# or style. same-origin: URLs name private repositories and files, so other sites never see them as Referer.
SECURITY_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"))
# The policy of responses that bring none: nothing in them may load or run anything, or be framed. Pages
# rendered by codewell.http.templates carry their own (with a nonce for their style block).
DEFAULT_CSP = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'"


UNMATCHED = "unmatched"
# Methods outside this set (clients may send any token) share one label: each label value is a series forever.
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_label(scope: Scope) -> str:
    """The metrics label of a served request: the template of the route that matched (`/.api/users/{username}`),
    never the raw path, which would publish private repository names on /metrics and add a series per path.

    The router records the route it dispatched to in the scope; a request refused before routing (by the
    authentication middleware) is matched here against the app's routes. Anything else is UNMATCHED.
    """
    route = scope.get("route")
    if route is None:
        router = getattr(scope.get("app"), "router", None)
        for candidate in getattr(router, "routes", ()):
            if candidate.matches(scope)[0] is not Match.NONE:
                route = candidate
                break
    template = getattr(route, "path_format", None)
    return template if isinstance(template, str) and template else UNMATCHED


def method_label(method: str) -> str:
    return method if method in _KNOWN_METHODS else "other"


def new_request_id() -> str:
    """32 hex digits, as uuid4().hex looked."""
    return f"{_REQUEST_IDS.getrandbits(128):032x}"


def _incoming_request_id(scope: Scope) -> str:
    """The last X-Request-ID header's value ("" without one), without building a dict of every header."""
    found = b""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            found = value
    return found.decode("latin-1")


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def capped(receive: Receive, family: bodies.BodyFamily, limit: int) -> Receive:
    """`receive` that raises BodyTooLarge once the body passes `limit`: a chunked body declares no length, so
    the bytes are counted as they arrive and never more than `limit` reach whoever reads them."""
    size = 0

    async def receive_capped() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            size += len(message.get("body", b""))
            if size > limit:
                raise bodies.too_large(family, limit)
        return message

    return receive_capped


def _runtime_of(scope: Scope) -> Runtime | None:
    """The app's runtime (Starlette puts the app in the scope before its middleware runs)."""
    runtime = getattr(getattr(scope.get("app"), "state", None), "runtime", None)
    return runtime if isinstance(runtime, Runtime) else None


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _incoming_request_id(scope)
        request_id = incoming if _VALID_REQUEST_ID.match(incoming) else new_request_id()
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        started_response = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started_response
            if message["type"] == "http.response.start":
                started_response = True
                status = message["status"]
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.append((b"x-request-id", request_id.encode()))
                headers.extend(h for h in SECURITY_HEADERS if h[0] not in present)
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", DEFAULT_CSP))
                message["headers"] = headers
            await send(message)

        # The body policy (codewell.http.bodies): a declared length over the route family's cap is refused before
        # anything runs; any other body is counted as it is read.
        family = bodies.family_of(scope["path"])
        limit = family.limit
        declared = _declared_length(scope)
        try:
            if limit is not None and declared is not None and declared > limit:
                await bodies.refusal(scope, bodies.too_large(family, limit))(scope, receive, send_with_id)
                return
            if limit is not None:
                receive = capped(receive, family, limit)
            try:
                # One authorization scope per request: each permission question is decided once (codewell.authz).
                with authz.scope(_runtime_of(scope)):
                    await self.app(scope, receive, send_with_id)
            except bodies.BodyTooLarge as exc:
                # Read outside the routes' error mapping (a capability's middleware): answered here the same way.
                if started_response:
                    raise
                await bodies.refusal(scope, exc)(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = route_label(scope)
            REQUESTS.labels(method_label(scope["method"]), route, str(status)).inc()
            LATENCY.labels(route).observe(elapsed)
            log.info(
                "%s %s %s",
                scope["method"],
                scope["path"],
                status,
                extra={"status": status, "duration_ms": round(elapsed * 1000, 2)},
            )
            request_id_var.reset(token)
