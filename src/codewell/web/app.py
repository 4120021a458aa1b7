"""The composition root: one function builds the whole ASGI application from a runtime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from codewell.accounts import pages as accounts_pages
from codewell.accounts import routes as accounts_routes
from codewell.analytics import pages as analytics_pages
from codewell.analytics import routes as analytics_routes
from codewell.auth import routes as auth_routes
from codewell.auth.middleware import AuthenticationMiddleware
from codewell.auth.providers import routes as auth_provider_routes
from codewell.capabilities import setup_all
from codewell.core.errors import CodewellError
from codewell.evaluator import routes as evaluator_routes
from codewell.history import routes as history_routes
from codewell.mcp import http as mcp_http
from codewell.oauth import routes as oauth_routes
from codewell.repos import routes as repos_routes
from codewell.runtime import Runtime
from codewell.search import routes as search_routes
from codewell.web import ops
from codewell.web.errors import codewell_error_handler, unhandled_error_handler
from codewell.web.middleware import RequestContextMiddleware

log = logging.getLogger(__name__)


def capability_routes(runtime: Runtime) -> list[BaseRoute]:
    """Every capability's routes, in one readable list."""
    return [
        *ops.routes(),
        *auth_routes.routes(),
        *auth_provider_routes.routes(),
        *accounts_routes.routes(),
        *accounts_pages.routes(),
        *evaluator_routes.routes(),
        *mcp_http.routes(runtime),
        *oauth_routes.routes(runtime),
        *history_routes.routes(),
        *repos_routes.routes(),
        *search_routes.routes(),
        *analytics_routes.routes(),
        *analytics_pages.routes(),
    ]


def capability_middleware(runtime: Runtime) -> list[Middleware]:
    """Middleware after the request context (outermost first)."""
    return [
        Middleware(AuthenticationMiddleware, runtime=runtime),
    ]


async def config_watcher(runtime: Runtime) -> None:
    """Pick up site config changes within a second even when no request reads the config."""
    while True:
        await asyncio.to_thread(runtime.site_config.refresh)
        await asyncio.sleep(1.0)


def create_app(runtime: Runtime, *, background: bool = True) -> Starlette:
    """Build the app; `background=False` (tests) skips the background loops."""
    setup_all(runtime)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks: list[asyncio.Task[None]] = []
        if background:
            loops = [("config-watcher", config_watcher), *runtime.background]
            tasks = [asyncio.create_task(loop(runtime), name=name) for name, loop in loops]
        try:
            yield
        finally:
            # Graceful shutdown: stop background loops, then release the database and services.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            log.info("shut down")

    app = Starlette(
        routes=capability_routes(runtime),
        middleware=[Middleware(RequestContextMiddleware), *capability_middleware(runtime)],
        exception_handlers={CodewellError: codewell_error_handler, Exception: unhandled_error_handler},
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    return app
