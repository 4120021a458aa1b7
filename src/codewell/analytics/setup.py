"""Wire analytics into a runtime: analytics tokens as bearer credentials, and flushing usage on shutdown."""

from __future__ import annotations

import asyncio

from codewell.analytics.events import UsageRecorder
from codewell.analytics.tokens import SCOPE_ANALYTICS, AnalyticsTokenService
from codewell.auth.service import AuthService
from codewell.runtime import Runtime

ANALYTICS_API = "/analytics/api/"


def setup(runtime: Runtime) -> None:
    """Register the analytics token resolver and paths with request authentication, and a background loop
    that writes buffered usage events when `codewell serve` stops (idempotent)."""
    auth = runtime.get(AuthService)
    auth.add_bearer_resolver(runtime.get(AnalyticsTokenService).authenticate)
    # The analytics API answers missing credentials itself (401 with the JSON envelope), and analytics
    # tokens (scope `analytics`) reach nothing but the analytics API.
    auth.add_anonymous_path(ANALYTICS_API)
    auth.add_scope_path(SCOPE_ANALYTICS, ANALYTICS_API)
    if not any(name == "usage-events-flush" for name, _ in runtime.background):
        runtime.background.append(("usage-events-flush", flush_on_shutdown))


async def flush_on_shutdown(runtime: Runtime) -> None:
    """Sleep until cancelled by the server's shutdown, then write every buffered usage event."""
    try:
        await asyncio.Event().wait()
    finally:
        # Synchronous on purpose: the server is stopping and a cancelled task should not await again.
        runtime.get(UsageRecorder).flush()
