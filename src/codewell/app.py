"""The HTTP composition root: one function builds the whole ASGI application from a runtime.

Everything a capability serves comes from its entry in `codewell.capabilities`; the HTTP kit
(`codewell.http`) supplies the request context, the error mapping and the operational endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from codewell.capabilities import wire
from codewell.core.errors import CodewellError
from codewell.core.processes import freeze_startup_heap
from codewell.http import ops
from codewell.http.errors import (
    codewell_error_handler,
    http_exception_handler,
    os_error_handler,
    unhandled_error_handler,
)
from codewell.http.middleware import RequestContextMiddleware
from codewell.http.routing import IndexedRouter
from codewell.runtime import Runtime

log = logging.getLogger(__name__)


def capability_routes(runtime: Runtime) -> list[BaseRoute]:
    """The operational endpoints, then every capability's routes and pages in the declared order."""
    routes: list[BaseRoute] = [*ops.routes()]
    for capability in runtime.capabilities:
        if capability.routes is not None:
            routes.extend(capability.routes(runtime))
        if capability.pages is not None:
            routes.extend(capability.pages(runtime))
    return routes


def capability_middleware(runtime: Runtime) -> list[Middleware]:
    """Every capability's middleware (outermost first), inside the request context."""
    middleware: list[Middleware] = []
    for capability in runtime.capabilities:
        if capability.middleware is not None:
            middleware.extend(capability.middleware(runtime))
    return middleware


async def config_watcher(runtime: Runtime) -> None:
    """Pick up site config changes within a second even when no request reads the config."""
    while True:
        await asyncio.to_thread(runtime.site_config.refresh)
        await asyncio.sleep(1.0)


def create_app(runtime: Runtime, *, background: bool = True) -> Starlette:
    """Build the app; `background=False` (tests) skips the background loops."""
    wire(runtime)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks: list[asyncio.Task[None]] = []
        if background:
            loops = [("config-watcher", config_watcher), *runtime.background]
            tasks = [asyncio.create_task(loop(runtime), name=name) for name, loop in loops]
            freeze_startup_heap()  # a real server (tests build many apps in one process: they keep collecting)
        try:
            yield
        finally:
            # Graceful shutdown: stop background loops, then release the database and services.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            log.info("shut down")

    app = Starlette(
        middleware=[Middleware(RequestContextMiddleware), *capability_middleware(runtime)],
        exception_handlers={
            HTTPException: http_exception_handler,
            CodewellError: codewell_error_handler,
            OSError: os_error_handler,
            Exception: unhandled_error_handler,
        },
        lifespan=lifespan,
    )
    # The routes a path could match are found by its first segments (http/routing.py), not by trying all ~180.
    app.router = IndexedRouter(capability_routes(runtime), lifespan=lifespan)
    app.state.runtime = runtime
    return app
