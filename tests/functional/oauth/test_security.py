"""Findings 3 and 8 of issue #22's black-box probe, over real HTTP: the authorization endpoint is no open
redirector (RFC 9700 §4.11.2), and registration and the token endpoint validate what they are given."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from sqlalchemy import update

from codewell.core.tools import ToolSpec
from codewell.oauth.models import OAuthClientRow
from tests.functional.mcp.served import Served
from tests.functional.mcp.tools import TEST_TOOLS
from tests.functional.oauth.flow import (
    REDIRECT,
    Pkce,
    authorize,
    authorize_params,
    redirect_query,
    register,
    session_cookie,
    token,
)

EVIL = "https://evil.example.com/cb"
# Each makes a request that is invalid only after client and redirect URI were checked (a redirectable error).
BAD_REQUESTS: list[tuple[dict[str, Any], str]] = [
    ({"scope": "admin"}, "invalid_scope"),
    ({"code_challenge": None}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
]


@pytest.fixture
def tool_specs() -> list[ToolSpec]:
    return TEST_TOOLS


def _get_authorize(served: Served, params: dict[str, str], cookies: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.get(served.url("/.auth/idp/oauth/authorize"), params=params, cookies=cookies or {})


@pytest.mark.parametrize(("overrides", "error"), BAD_REQUESTS)
def test_errors_of_an_unapproved_dynamic_client_stay_on_our_page(
    served: Served, overrides: dict[str, Any], error: str
) -> None:
    """A self-registered client's redirect URI is the registrant's: sending errors there, anonymously and
    before any consent, made the server an open redirector to any site."""
    client_id = register(served, [EVIL])["client_id"]
    params = authorize_params(client_id, Pkce.new(), redirect_uri=EVIL, **overrides)
    anonymous = _get_authorize(served, params)
    assert anonymous.status_code == 400
    assert "location" not in anonymous.headers
    assert error in anonymous.text
    # Signed in but never approved this client: still no redirect.
    signed_in = _get_authorize(served, params, session_cookie(served, served.user("alice")))
    assert signed_in.status_code == 400
    assert "location" not in signed_in.headers


def test_errors_redirect_once_the_user_approved_the_client(served: Served) -> None:
    alice = served.user("alice")
    cookies = session_cookie(served, alice)
    client_id = register(served)["client_id"]
    redirect_query(authorize(served, cookies, authorize_params(client_id, Pkce.new())))  # approved once
    bob_never_approved = _get_authorize(
        served, authorize_params(client_id, Pkce.new(), scope="admin"), session_cookie(served, served.user("bob"))
    )
    assert bob_never_approved.status_code == 400
    for overrides, error in BAD_REQUESTS:
        query = redirect_query(_get_authorize(served, authorize_params(client_id, Pkce.new(), **overrides), cookies))
        assert (query["error"], query["state"], query["iss"]) == (error, "st4te", served.base_url)


def test_errors_of_an_admin_registered_client_redirect(served: Served) -> None:
    admin = served.user("root", site_admin=True)
    created = httpx2.post(
        served.url("/.api/oauth/clients"),
        json={"name": "Claude Code", "redirect_uris": [REDIRECT]},
        headers={"authorization": f"token {served.token(admin)}"},
    )
    client_id = created.json()["client_id"]
    query = redirect_query(_get_authorize(served, authorize_params(client_id, Pkce.new(), scope="admin")))
    assert query["error"] == "invalid_scope"


def _register(served: Served, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(served.url("/.auth/idp/oauth/register"), content=json.dumps(body).encode())


def test_registration_refuses_other_scopes(served: Served) -> None:
    refused = _register(served, {"redirect_uris": [REDIRECT], "scope": "admin"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_scope"
    assert _register(served, {"redirect_uris": [REDIRECT], "scope": "mcp user:all"}).json()["error"] == "invalid_scope"
    assert _register(served, {"redirect_uris": [REDIRECT], "scope": "mcp"}).status_code == 201


@pytest.mark.parametrize(
    "uri",
    [
        "https://client.example.com/cb#",
        "https://client.example.com/cb#section",
        "https://user:pass@client.example.com/cb",
        "https://evil.example.com@client.example.com/cb",
        "http://user@127.0.0.1:33418/callback",
        "https://client.example.com/cb\r\nSet-Cookie: x=1",
        "https://client.example.com/c\nb",
        "cursor://anysphere.cursor-mcp/oauth/callback\r",
    ],
)
def test_registration_refuses_fragments_userinfo_and_line_breaks(served: Served, uri: str) -> None:
    refused = _register(served, {"redirect_uris": [REDIRECT, uri]})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_redirect_uri"


def test_a_stored_redirect_uri_the_policy_refuses_now_is_not_used(served: Served) -> None:
    """Clients registered before the stricter policy keep their rows; /authorize checks the URI again."""
    client_id = register(served)["client_id"]
    sneaky = "https://user:pass@client.example.com/cb"
    with served.runtime.db.session() as session:
        session.execute(
            update(OAuthClientRow)
            .where(OAuthClientRow.client_id == client_id)
            .values(redirect_uris=json.dumps([sneaky]))
        )
    cookies = session_cookie(served, served.user("alice"))
    refused = _get_authorize(served, authorize_params(client_id, Pkce.new(), redirect_uri=sneaky), cookies)
    assert refused.status_code == 400
    assert "user name or password" in refused.text


def _code(served: Served, cookies: dict[str, str], client_id: str, pkce: Pkce, **overrides: str | None) -> str:
    return redirect_query(authorize(served, cookies, authorize_params(client_id, pkce, **overrides)))["code"]


def test_token_request_must_repeat_the_redirect_uri_of_the_authorization_request(served: Served) -> None:
    cookies = session_cookie(served, served.user("alice"))
    client_id = register(served)["client_id"]
    pkce = Pkce.new()
    code = _code(served, cookies, client_id, pkce)
    form = {"grant_type": "authorization_code", "code": code, "client_id": client_id, "code_verifier": pkce.verifier}
    missing = token(served, **form)
    assert missing.status_code == 400
    assert missing.json() == {
        "error": "invalid_grant",
        "error_description": "redirect_uri is required: the authorization request included one",
    }
    # The failed attempt spent the code (single use): a new authorization, then with the redirect URI.
    pkce = Pkce.new()
    code = _code(served, cookies, client_id, pkce)
    form = {**form, "code": code, "code_verifier": pkce.verifier, "redirect_uri": REDIRECT}
    assert token(served, **form).status_code == 200


def test_token_request_may_omit_a_redirect_uri_the_authorization_request_omitted(served: Served) -> None:
    cookies = session_cookie(served, served.user("alice"))
    client_id = register(served)["client_id"]  # one registered redirect URI: /authorize may omit it
    pkce = Pkce.new()
    code = _code(served, cookies, client_id, pkce, redirect_uri=None)
    form = {"grant_type": "authorization_code", "code": code, "client_id": client_id, "code_verifier": pkce.verifier}
    assert token(served, **form).status_code == 200
