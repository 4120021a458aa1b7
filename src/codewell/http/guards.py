"""Route helpers: the acting user a route needs, or the error that refuses the request."""

from __future__ import annotations

from starlette.requests import Request

from codewell import authz
from codewell.authz import Action, Resource
from codewell.core.actors import Actor
from codewell.core.errors import Unauthenticated
from codewell.http.requests import actor_of


def require_actor(request: Request) -> Actor:
    """The signed-in (or token-authenticated) user of the request; Unauthenticated (401) for anonymous."""
    actor = actor_of(request)
    if actor.is_anonymous:
        raise Unauthenticated("Not signed in.", hint="sign in, or send an access token: Authorization: token <token>")
    return actor


def require(request: Request, action: Action, resource: Resource | None = None) -> Actor:
    """The request's actor when it may do `action` (codewell.authz.ensure: 401 for anonymous callers, 403 when
    the user or the credential may not, e.g. an OAuth token asking for an admin change)."""
    actor = actor_of(request)
    authz.ensure(actor, action, resource)
    return actor
