"""Route helpers: the acting user a route needs, or the error that refuses the request."""

from __future__ import annotations

from starlette.requests import Request

from codewell.core.actors import Actor
from codewell.core.errors import PermissionDenied, Unauthenticated
from codewell.http.requests import actor_of


def require_actor(request: Request) -> Actor:
    """The signed-in (or token-authenticated) user of the request; Unauthenticated (401) for anonymous."""
    actor = actor_of(request)
    if actor.is_anonymous:
        raise Unauthenticated("Not signed in.", hint="sign in, or send an access token: Authorization: token <token>")
    return actor


def require_site_admin(request: Request) -> Actor:
    """The request's actor when it is a site admin; 401 for anonymous, 403 for other users."""
    actor = require_actor(request)
    if not actor.site_admin:
        raise PermissionDenied("Only site admins can do this.")
    return actor


def require_interactive(request: Request) -> Actor:
    """A site admin acting through a session, an access token or sudo, not an OAuth bearer token: OAuth
    clients get read and navigation actions only (admin and role changes need a stronger credential)."""
    actor = require_site_admin(request)
    if actor.via == "oauth":
        raise PermissionDenied("OAuth tokens cannot change accounts, roles or settings.")
    return actor
