"""Helpers for route handlers: the acting user, the runtime, the JSON body and form fields of a request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from codewell.core.actors import ANONYMOUS, Actor
from codewell.core.errors import InvalidInput
from codewell.http.bodies import json_object
from codewell.runtime import Runtime

# The scope state key under which the authentication middleware leaves a request's authentication to its route
# (AuthService.add_deferred_path): a blocking call, run once in the route's worker thread.
DEFERRED_AUTHENTICATION = "deferred_authentication"
DeferredAuthentication = Callable[[], Response | None]


class AuthenticationPending(RuntimeError):
    """A route read the actor of a request whose authentication it was to run first (a bug, never ANONYMOUS)."""


def authentication_pending(scope: Scope) -> bool:
    """Whether the middleware left this request's authentication to its route (`authenticate_deferred`)."""
    return DEFERRED_AUTHENTICATION in scope.get("state", ())


def actor_of(request: Request) -> Actor:
    """The authenticated actor set by the authentication middleware, or ANONYMOUS."""
    actor = getattr(request.state, "actor", None)
    if isinstance(actor, Actor):
        return actor
    if authentication_pending(request.scope):
        raise AuthenticationPending("call authenticate_deferred (in a worker thread) before reading the actor")
    return ANONYMOUS


def authenticate_deferred(scope: Scope) -> Response | None:
    """Run the authentication the middleware left to this route, if it did (blocking: call it in the route's
    worker thread): the refusal the middleware would have answered (401, 403, 503), or None with the actor set."""
    state = scope.get("state")
    deferred: DeferredAuthentication | None = state.pop(DEFERRED_AUTHENTICATION, None) if state else None
    return deferred() if deferred is not None else None


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object under the body policy (codewell.http.bodies: the route family's size cap, the
    depth limit, no NaN); 413 or 400 otherwise. An empty body reads as `{}`."""
    return await json_object(request)


def form_text(form: Mapping[str, object], key: str) -> str:
    """A text field of a submitted form or query string ("" when it is missing or is a file upload)."""
    value = form.get(key, "")
    return value if isinstance(value, str) else ""


def form_expiry_days(form: Mapping[str, object], key: str = "expiresInDays") -> int | None:
    """A token-expiry choice from a form: a number of days, or None for "never"; InvalidInput otherwise."""
    text = form_text(form, key)
    if text != "never" and not text.isdigit():
        raise InvalidInput("choose when the token expires")
    return None if text == "never" else int(text)
