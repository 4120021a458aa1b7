"""The OAuth authorization server over real HTTP: metadata, DCR, consent, PKCE, tokens, refresh rotation,
revocation, introspection, resource binding, and the switches that turn dynamic clients off."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx2
import pytest
from sqlalchemy import update

from codewell.core.tools import ToolSpec
from codewell.db.base import utcnow
from codewell.oauth.models import OAuthTokenRow
from tests.functional.mcp.served import Served
from tests.functional.mcp.tools import TEST_TOOLS
from tests.functional.oauth.flow import (
    REDIRECT,
    Pkce,
    authorize,
    authorize_params,
    full_flow,
    redirect_query,
    register,
    session_cookie,
    token,
)

pytestmark = pytest.mark.database

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def tool_specs() -> list[ToolSpec]:
    return TEST_TOOLS


def mcp(served: Served, access_token: str, path: str = "/.api/mcp") -> httpx2.Response:
    return httpx2.post(served.url(path), json=LIST, headers={**HEADERS, "authorization": f"Bearer {access_token}"})


def test_authorization_server_and_resource_metadata(served: Served) -> None:
    meta = httpx2.get(served.url("/.well-known/oauth-authorization-server")).json()
    assert meta["issuer"] == served.base_url  # byte-exact, no trailing slash
    assert meta["authorization_endpoint"] == served.base_url + "/.auth/idp/oauth/authorize"
    assert meta["token_endpoint"] == served.base_url + "/.auth/idp/oauth/token"
    assert meta["registration_endpoint"] == served.base_url + "/.auth/idp/oauth/register"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["scopes_supported"] == ["mcp"]
    assert "none" in meta["token_endpoint_auth_methods_supported"]
    assert meta["authorization_response_iss_parameter_supported"] is True
    assert meta["client_id_metadata_document_supported"] is True
    for path in ("/.api/mcp", "/.api/mcp/all", "/.api/mcp/deepsearch"):
        prm = httpx2.get(served.url("/.well-known/oauth-protected-resource" + path)).json()
        assert prm == {
            "resource": served.base_url + path,
            "authorization_servers": [served.base_url],
            "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
            "resource_name": f"codewell MCP server ({path})",
        }


def test_full_flow_then_tool_call_refresh_rotation_and_revocation(served: Served) -> None:
    alice = served.user("alice")
    resource = served.url("/.api/mcp")
    client_id, tokens = full_flow(served, alice, resource)
    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "mcp"
    assert tokens["expires_in"] == 3600
    listed = mcp(served, tokens["access_token"])
    assert listed.status_code == 200, listed.text

    refreshed = token(served, grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client_id)
    assert refreshed.status_code == 200, refreshed.text
    new = refreshed.json()
    assert new["refresh_token"] != tokens["refresh_token"]
    assert mcp(served, new["access_token"]).status_code == 200

    # Reusing the spent refresh token is theft: the whole family (including the new tokens) is revoked.
    reused = token(served, grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client_id)
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    assert mcp(served, new["access_token"]).status_code == 401

    _, second = full_flow(served, alice, resource)
    revoked = httpx2.post(
        served.url("/.auth/idp/oauth/revoke"), data={"token": second["access_token"], "client_id": client_id}
    )
    assert revoked.status_code == 200
    assert mcp(served, second["access_token"]).status_code == 200  # another client's token: revoke ignored
    assert httpx2.post(served.url("/.auth/idp/oauth/revoke"), data={"token": second["access_token"]}).status_code == 200
    assert mcp(served, second["access_token"]).status_code == 401


def test_redirect_carries_iss_and_state_and_unsigned_users_go_to_sign_in(served: Served) -> None:
    alice = served.user("alice")
    client_id = register(served)["client_id"]
    params = authorize_params(client_id, Pkce.new())
    anonymous = httpx2.get(served.url("/.auth/idp/oauth/authorize"), params=params)
    assert anonymous.status_code == 302
    assert anonymous.headers["location"].startswith("/sign-in?returnTo=%2F.auth%2Fidp%2Foauth%2Fauthorize%3F")
    query = redirect_query(authorize(served, session_cookie(served, alice), params))
    assert query["state"] == "st4te"
    assert query["iss"] == served.base_url
    assert query["code"].startswith("cwoc_")
    denied = redirect_query(authorize(served, session_cookie(served, alice), params, decision="deny"))
    assert denied["error"] == "access_denied"
    assert denied["iss"] == served.base_url


def test_code_replay_wrong_verifier_and_redirect_mismatch(served: Served) -> None:
    alice = served.user("alice")
    client_id = register(served)["client_id"]
    cookies = session_cookie(served, alice)
    pkce = Pkce.new()
    code = redirect_query(authorize(served, cookies, authorize_params(client_id, pkce)))["code"]
    wrong = token(
        served,
        grant_type="authorization_code",
        code=code,
        client_id=client_id,
        redirect_uri=REDIRECT,
        code_verifier="x" * 50,
    )
    assert wrong.status_code == 400
    assert wrong.json() == {
        "error": "invalid_grant",
        "error_description": "code_verifier does not match the code_challenge",
    }

    pkce = Pkce.new()
    code = redirect_query(authorize(served, cookies, authorize_params(client_id, pkce)))["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_verifier": pkce.verifier,
    }
    first = token(served, **form)
    assert first.status_code == 200
    replay = token(served, **form)
    assert replay.json()["error"] == "invalid_grant"
    assert "already used" in replay.json()["error_description"]
    assert mcp(served, first.json()["access_token"]).status_code == 401  # replay revoked the first issue

    unregistered = httpx2.get(
        served.url("/.auth/idp/oauth/authorize"),
        params=authorize_params(client_id, Pkce.new(), redirect_uri="http://127.0.0.1:4000/elsewhere"),
        cookies=cookies,
    )
    assert unregistered.status_code == 400  # never redirected to an unregistered URI
    assert "is not registered for this client" in unregistered.text
    https_evil = httpx2.get(
        served.url("/.auth/idp/oauth/authorize"),
        params=authorize_params(client_id, Pkce.new(), redirect_uri="https://evil.example/cb"),
        cookies=cookies,
    )
    assert https_evil.status_code == 400


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"scope": "mcp openid"}, "invalid_scope"),
        ({"scope": "user:all"}, "invalid_scope"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": None}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
    ],
)
def test_authorize_errors_redirect_with_specific_codes(served: Served, overrides: dict[str, Any], error: str) -> None:
    alice = served.user("alice")
    cookies = session_cookie(served, alice)
    client_id = register(served)["client_id"]
    # Errors go back only to clients the user approved before (RFC 9700 §4.11.2; tests/.../test_security.py).
    redirect_query(authorize(served, cookies, authorize_params(client_id, Pkce.new())))
    response = httpx2.get(
        served.url("/.auth/idp/oauth/authorize"),
        params=authorize_params(client_id, Pkce.new(), **overrides),
        cookies=cookies,
    )
    query = redirect_query(response)
    assert query["error"] == error
    assert query["state"] == "st4te"


def test_token_is_bound_to_its_resource(served: Served) -> None:
    alice = served.user("alice")
    _, deep = full_flow(served, alice, served.url("/.api/mcp/deepsearch"))
    assert mcp(served, deep["access_token"], "/.api/mcp/deepsearch").status_code == 200
    other = mcp(served, deep["access_token"], "/.api/mcp/all")
    assert other.status_code == 401
    assert 'error="invalid_token"' in other.headers["www-authenticate"]
    _, root = full_flow(served, alice)  # no resource: bound to the whole instance
    assert mcp(served, root["access_token"], "/.api/mcp/all").status_code == 200


def test_expired_tokens_and_codes_fail(served: Served) -> None:
    alice = served.user("alice")
    client_id, tokens = full_flow(served, alice)
    with served.runtime.db.session() as session:
        session.execute(update(OAuthTokenRow).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert mcp(served, tokens["access_token"]).status_code == 401
    expired_refresh = token(
        served, grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client_id
    )
    assert expired_refresh.json()["error"] == "invalid_grant"


def test_introspection_and_userinfo(served: Served) -> None:
    alice = served.user("alice")
    client_id, tokens = full_flow(served, alice, served.url("/.api/mcp"))
    active = httpx2.post(
        served.url("/.auth/idp/oauth/introspect"), data={"token": tokens["access_token"], "client_id": client_id}
    ).json()
    assert active["active"] is True
    assert (active["username"], active["scope"], active["aud"], active["client_id"]) == (
        "alice",
        "mcp",
        served.url("/.api/mcp"),
        client_id,
    )
    other_client = register(served)["client_id"]
    hidden = httpx2.post(
        served.url("/.auth/idp/oauth/introspect"), data={"token": tokens["access_token"], "client_id": other_client}
    ).json()
    assert hidden == {"active": False}
    info = httpx2.get(
        served.url("/.auth/idp/oauth/userinfo"), headers={"authorization": f"Bearer {tokens['access_token']}"}
    )
    assert info.json() == {"sub": str(alice.id), "preferred_username": "alice"}


def test_registration_validation(served: Served) -> None:
    def reg(body: Any) -> httpx2.Response:
        return httpx2.post(served.url("/.auth/idp/oauth/register"), content=json.dumps(body).encode())

    assert reg({"redirect_uris": ["http://evil.example/cb"]}).json()["error"] == "invalid_redirect_uri"
    assert reg({}).json()["error"] == "invalid_redirect_uri"
    assert reg({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}).json()["error"] == (
        "invalid_client_metadata"
    )
    confidential = reg({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"}).json()
    assert confidential["client_secret"].startswith("cwcs_")
    public = reg({"redirect_uris": ["http://localhost:3334/oauth/callback"], "application_type": "native"}).json()
    assert public["scope"] == "mcp"
    assert "client_secret" not in public
    assert public["token_endpoint_auth_method"] == "none"


def test_dynamic_registration_switch(served: Served) -> None:
    alice = served.user("alice")
    admin = served.user("root", site_admin=True)
    access = served.token(alice)
    _, dynamic_tokens = full_flow(served, alice)
    static = httpx2.post(
        served.url("/.api/oauth/clients"),
        json={"name": "Claude Code", "redirect_uris": [REDIRECT]},
        headers={"authorization": f"token {served.token(admin)}"},
    )
    assert static.status_code == 201, static.text
    static_id = static.json()["client_id"]
    pkce = Pkce.new()
    code = redirect_query(authorize(served, session_cookie(served, alice), authorize_params(static_id, pkce)))["code"]
    static_tokens = token(
        served,
        grant_type="authorization_code",
        code=code,
        client_id=static_id,
        redirect_uri=REDIRECT,
        code_verifier=pkce.verifier,
    ).json()

    served.configure(**{"auth.idpDynamicClientRegistrationEnabled": False})
    blocked = httpx2.post(served.url("/.auth/idp/oauth/register"), json={"redirect_uris": [REDIRECT]})
    assert (blocked.status_code, blocked.text) == (404, "no route")
    assert "registration_endpoint" not in httpx2.get(served.url("/.well-known/oauth-authorization-server")).json()
    assert mcp(served, dynamic_tokens["access_token"]).status_code == 401  # DCR clients' tokens stop working
    assert mcp(served, static_tokens["access_token"]).status_code == 200  # static clients keep working
    assert (
        httpx2.post(
            served.url("/.api/mcp"), json=LIST, headers={**HEADERS, "authorization": f"token {access}"}
        ).status_code
        == 200
    )  # access tokens keep working

    served.configure(**{"auth.idpDynamicClientRegistrationEnabled": True, "mcp.enabled": False})
    assert httpx2.post(served.url("/.auth/idp/oauth/register"), json={"redirect_uris": [REDIRECT]}).status_code == 404


def test_static_clients_admin_api(served: Served) -> None:
    admin = served.user("root", site_admin=True)
    alice = served.user("alice")
    admin_h = {"authorization": f"token {served.token(admin)}"}
    user_h = {"authorization": f"token {served.token(alice)}"}
    body = {"name": "Cursor", "redirect_uris": ["cursor://anysphere.cursor-mcp/oauth/callback"], "confidential": True}
    assert httpx2.post(served.url("/.api/oauth/clients"), json=body, headers=user_h).status_code == 403
    created = httpx2.post(served.url("/.api/oauth/clients"), json=body, headers=admin_h)
    assert created.status_code == 201, created.text
    assert created.json()["client_secret"].startswith("cwcs_")
    listed = httpx2.get(served.url("/.api/oauth/clients?kind=static"), headers=admin_h).json()["clients"]
    assert [c["client_name"] for c in listed] == ["Cursor"]
    bad = httpx2.post(
        served.url("/.api/oauth/clients"), json={"name": "x", "redirect_uris": ["http://evil.example"]}, headers=admin_h
    )
    assert bad.status_code == 400
    assert "is not allowed" in bad.json()["error"]["message"]
    client_id = created.json()["client_id"]
    assert httpx2.delete(served.url(f"/.api/oauth/clients/{client_id}"), headers=admin_h).status_code == 204
    assert httpx2.delete(served.url(f"/.api/oauth/clients/{client_id}"), headers=admin_h).status_code == 404

    # A confidential client must authenticate at the token endpoint.
    confidential = httpx2.post(served.url("/.api/oauth/clients"), json=body, headers=admin_h).json()
    no_secret = token(served, grant_type="authorization_code", code="cwoc_x", client_id=confidential["client_id"])
    assert no_secret.status_code == 401
    assert no_secret.json()["error"] == "invalid_client"
