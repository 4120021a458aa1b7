"""Helpers for route handlers: the acting user and the runtime of a request."""

from __future__ import annotations

from starlette.requests import Request

from codewell.core.actors import ANONYMOUS, Actor
from codewell.runtime import Runtime


def actor_of(request: Request) -> Actor:
    """The authenticated actor set by the authentication middleware, or ANONYMOUS."""
    actor = getattr(request.state, "actor", None)
    return actor if isinstance(actor, Actor) else ANONYMOUS


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime
