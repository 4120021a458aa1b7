"""Issue #33 item 7 for the OAuth server: HTTP Basic client authentication is no audit alarm where it belongs, and
turning dynamic client registration off revokes its clients' tokens for good (turning it on again revives none)."""

from __future__ import annotations

import base64
import re
from urllib.parse import urlencode

import httpx2
import pytest
from sqlalchemy import select

from codewell.accounts.audit import AuditEntry, AuditService
from codewell.core.actors import INTERNAL
from codewell.core.tools import ToolSpec
from codewell.oauth.models import OAuthTokenRow
from codewell.runtime import Runtime
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
FORM = {"content-type": "application/x-www-form-urlencoded"}
NONCE = re.compile(r"'nonce-([A-Za-z0-9_-]{16,})'")


@pytest.fixture
def tool_specs() -> list[ToolSpec]:
    return TEST_TOOLS


def _failed_header_entries(runtime: Runtime) -> list[AuditEntry]:
    entries = runtime.get(AuditService).list(INTERNAL, entity="auth.accessToken", action="failed")
    return [e for e in entries if e.reason == "invalid Authorization header"]


def _basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def test_basic_client_authentication_at_the_token_endpoint_writes_no_audit_alarm(served: Served) -> None:
    admin = served.user("root", site_admin=True)
    alice = served.user("alice")
    created = httpx2.post(
        served.url("/.api/oauth/clients"),
        json={"name": "Confidential", "redirect_uris": [REDIRECT], "confidential": True},
        headers={"authorization": f"token {served.token(admin)}"},
    ).json()
    basic = _basic(created["client_id"], created["client_secret"])
    pkce = Pkce.new()
    code = redirect_query(
        authorize(served, session_cookie(served, alice), authorize_params(created["client_id"], pkce))
    )["code"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": pkce.verifier}
    issued = httpx2.post(
        served.url("/.auth/idp/oauth/token"),
        content=urlencode(form).encode(),
        headers={**FORM, "authorization": basic},
    )
    assert issued.status_code == 200, issued.text
    tokens = issued.json()
    # Refresh, introspect and revoke: the other endpoints where a client authenticates with Basic.
    refreshed = httpx2.post(
        served.url("/.auth/idp/oauth/token"),
        content=urlencode({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}).encode(),
        headers={**FORM, "authorization": basic},
    )
    assert refreshed.status_code == 200, refreshed.text
    access = refreshed.json()["access_token"]
    introspected = httpx2.post(
        served.url("/.auth/idp/oauth/introspect"),
        content=urlencode({"token": access}).encode(),
        headers={**FORM, "authorization": basic},
    )
    assert introspected.json()["active"] is True
    revoked = httpx2.post(
        served.url("/.auth/idp/oauth/revoke"),
        content=urlencode({"token": access}).encode(),
        headers={**FORM, "authorization": basic},
    )
    assert revoked.status_code == 200
    assert _failed_header_entries(served.runtime) == []
    # A wrong secret over Basic is refused by the token endpoint itself.
    wrong = httpx2.post(
        served.url("/.auth/idp/oauth/token"),
        content=urlencode({"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}).encode(),
        headers={**FORM, "authorization": _basic(created["client_id"], "cwcs_wrong")},
    )
    assert (wrong.status_code, wrong.json()["error"]) == (401, "invalid_client")
    # Basic anywhere else is still the stray credential it was: ignored and audited.
    assert httpx2.get(served.url("/.api/users/me"), headers={"authorization": basic}).status_code == 401
    assert len(_failed_header_entries(served.runtime)) == 1


def test_turning_dynamic_registration_off_and_on_again_revives_no_token(served: Served) -> None:
    alice = served.user("alice")
    dynamic_client, dynamic = full_flow(served, alice)
    bearer = {**HEADERS, "authorization": f"Bearer {dynamic['access_token']}"}
    assert httpx2.post(served.url("/.api/mcp"), json=LIST, headers=bearer).status_code == 200

    served.configure(**{"auth.idpDynamicClientRegistrationEnabled": False})
    assert httpx2.post(served.url("/.api/mcp"), json=LIST, headers=bearer).status_code == 401
    with served.runtime.db.session() as session:
        live = session.scalars(select(OAuthTokenRow).where(OAuthTokenRow.revoked_at.is_(None))).all()
    assert live == []

    served.configure(**{"auth.idpDynamicClientRegistrationEnabled": True})
    assert httpx2.post(served.url("/.api/mcp"), json=LIST, headers=bearer).status_code == 401
    refresh = token(
        served, grant_type="refresh_token", refresh_token=dynamic["refresh_token"], client_id=dynamic_client
    )
    assert refresh.status_code == 400
    assert refresh.json()["error"] == "invalid_grant"
    # Registration itself works again: a new client gets new, working tokens.
    _, fresh = full_flow(served, alice)
    fresh_bearer = {**HEADERS, "authorization": f"Bearer {fresh['access_token']}"}
    assert httpx2.post(served.url("/.api/mcp"), json=LIST, headers=fresh_bearer).status_code == 200


def test_turning_the_tool_server_off_only_suspends_dynamic_clients_tokens(served: Served) -> None:
    alice = served.user("alice")
    _, dynamic = full_flow(served, alice)
    served.configure(**{"mcp.enabled": False})
    served.configure(**{"mcp.enabled": True})
    bearer = {**HEADERS, "authorization": f"Bearer {dynamic['access_token']}"}
    assert httpx2.post(served.url("/.api/mcp"), json=LIST, headers=bearer).status_code == 200


def test_the_consent_page_carries_the_full_page_policy(served: Served) -> None:
    alice = served.user("alice")
    client_id = register(served)["client_id"]
    cookies = session_cookie(served, alice)
    first, second = (
        httpx2.get(
            served.url("/.auth/idp/oauth/authorize"), params=authorize_params(client_id, Pkce.new()), cookies=cookies
        )
        for _ in range(2)
    )
    assert first.status_code == 200, first.text
    csp = first.headers["content-security-policy"]
    for directive in ("default-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "unsafe-inline" not in csp
    nonces = set(NONCE.findall(csp))
    assert len(nonces) == 1
    # The site's layout (issue #32): its stylesheet and script come from this origin; nothing inline exists.
    assert '<link rel="stylesheet" href="/.static/codewell.css">' in first.text
    assert "<style" not in first.text
    assert first.text.count("<script") == first.text.count('<script src="/.static/') == 1
    assert 'style="' not in first.text
    assert first.headers["x-frame-options"] == "DENY"
    assert NONCE.findall(second.headers["content-security-policy"]) != NONCE.findall(csp)
