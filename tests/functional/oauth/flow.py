"""Drive the OAuth authorization code + PKCE flow over real HTTP as a browser and a client would."""

from __future__ import annotations

import html
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2

from codewell.accounts.service import User
from codewell.auth.service import AuthService, ClientInfo
from codewell.http.sessions import SESSION_COOKIE
from codewell.oauth.grants import pkce_challenge
from tests.functional.mcp.served import Served

REDIRECT = "http://127.0.0.1:33418/callback"
_INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


@dataclass
class Pkce:
    verifier: str
    challenge: str

    @classmethod
    def new(cls) -> Pkce:
        verifier = secrets.token_urlsafe(48)
        return cls(verifier, pkce_challenge(verifier))


def session_cookie(served: Served, user: User) -> dict[str, str]:
    cookie, _ = served.runtime.get(AuthService).start_session(user, ClientInfo())
    return {SESSION_COOKIE: cookie}


def register(served: Served, redirect_uris: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    response = httpx2.post(
        served.url("/.auth/idp/oauth/register"),
        json={"client_name": "Test Agent", "redirect_uris": redirect_uris or [REDIRECT], **extra},
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def authorize_params(client_id: str, pkce: Pkce, **overrides: str | None) -> dict[str, str]:
    params: dict[str, str | None] = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "state": "st4te",
        "scope": "mcp",
        "resource": None,
        **overrides,
    }
    return {k: v for k, v in params.items() if v is not None}


def authorize(
    served: Served, cookies: dict[str, str], params: dict[str, str], decision: str = "approve"
) -> httpx2.Response:
    """GET the consent page as the signed-in user, then submit it; returns the final (redirect) response."""
    page = httpx2.get(served.url("/.auth/idp/oauth/authorize"), params=params, cookies=cookies)
    if page.status_code != 200:
        return page
    form = {name: html.unescape(value) for name, value in _INPUT.findall(page.text)}
    form["decision"] = decision
    return httpx2.post(
        served.url("/.auth/idp/oauth/authorize"),
        content=urlencode(form).encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        cookies=cookies,
    )


def redirect_query(response: httpx2.Response) -> dict[str, str]:
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(REDIRECT)
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def token(served: Served, **form: str) -> httpx2.Response:
    return httpx2.post(
        served.url("/.auth/idp/oauth/token"),
        content=urlencode(form).encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )


def full_flow(served: Served, user: User, resource: str | None = None) -> tuple[str, dict[str, Any]]:
    """Register, authorize, exchange; returns (client_id, token response)."""
    client_id = register(served)["client_id"]
    pkce = Pkce.new()
    query = redirect_query(
        authorize(served, session_cookie(served, user), authorize_params(client_id, pkce, resource=resource))
    )
    response = token(
        served,
        grant_type="authorization_code",
        code=query["code"],
        redirect_uri=REDIRECT,
        client_id=client_id,
        code_verifier=pkce.verifier,
        **({"resource": resource} if resource else {}),
    )
    assert response.status_code == 200, response.text
    return client_id, dict(response.json())
