"""The auth capability: sign-in (passwords, sessions, external providers) and request authentication."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from codewell.auth import routes
from codewell.auth.middleware import AuthenticationMiddleware
from codewell.auth.providers import routes as provider_routes
from codewell.auth.providers.setup import setup
from codewell.capability import Capability, templates_of
from codewell.runtime import Runtime


def auth_routes(runtime: Runtime) -> Sequence[BaseRoute]:
    """Sign-in, sign-up, sign-out and password resets, then the external providers' login and callbacks."""
    return [*routes.routes(runtime), *provider_routes.routes(runtime)]


def auth_middleware(runtime: Runtime) -> Sequence[Middleware]:
    return [Middleware(AuthenticationMiddleware, runtime=runtime)]


CAPABILITY = Capability(
    name="auth",
    setup=setup,
    pages=auth_routes,
    middleware=auth_middleware,
    templates=templates_of(__file__),
)
