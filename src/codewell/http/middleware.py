"""Request ID, access logging and request metrics as one pure ASGI middleware."""

from __future__ import annotations

import logging
import re
import time
import uuid

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codewell.core.logging import request_id_var

log = logging.getLogger("codewell.access")

REQUESTS = Counter("codewell_http_requests_total", "HTTP requests served", ["method", "route", "status"])
LATENCY = Histogram(
    "codewell_http_request_duration_seconds",
    "HTTP request latency",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def route_label(path: str) -> str:
    """A low-cardinality label for metrics: the first two path segments."""
    parts = [p for p in path.split("/") if p][:2]
    return "/" + "/".join(parts)


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = route_label(scope["path"])
            REQUESTS.labels(scope["method"], route, str(status)).inc()
            LATENCY.labels(route).observe(elapsed)
            log.info(
                "%s %s %s",
                scope["method"],
                scope["path"],
                status,
                extra={"status": status, "duration_ms": round(elapsed * 1000, 2)},
            )
            request_id_var.reset(token)
