"""Helpers for route handlers: the acting user, the runtime, the JSON body and form fields of a request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from codewell.core.actors import ANONYMOUS, Actor
from codewell.core.errors import InvalidInput
from codewell.http.bodies import json_object
from codewell.runtime import Runtime


def actor_of(request: Request) -> Actor:
    """The authenticated actor set by the authentication middleware, or ANONYMOUS."""
    actor = getattr(request.state, "actor", None)
    return actor if isinstance(actor, Actor) else ANONYMOUS


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
