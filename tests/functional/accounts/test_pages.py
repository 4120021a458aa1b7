"""Sign-in, sign-up, sign-out, password reset and the token/admin pages over HTTP, with CSRF checks."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from codewell.accounts.credentials import CredentialService
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.auth.service import AuthService
from codewell.core.actors import INTERNAL
from codewell.http.sessions import SESSION_COOKIE
from codewell.runtime import Runtime
from tests.factories import make_user, set_site_config

PASSWORD = "correct horse battery staple"


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def sign_in(client: TestClient, username: str, password: str = PASSWORD, return_to: str = "/") -> None:
    page = client.get("/sign-in")
    response = client.post(
        f"/sign-in?returnTo={return_to}",
        data={"username": username, "password": password, "csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text


def test_sign_in_sets_a_hardened_cookie_and_returns_to_the_page(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    page = client.get("/sign-in")
    response = client.post(
        "/sign-in?returnTo=/settings/tokens",
        data={"username": "alice", "password": PASSWORD, "csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/settings/tokens"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert client.get("/.api/users/me").json()["username"] == "alice"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/\\evil.example"])
def test_return_to_never_leaves_the_site(client: TestClient, runtime: Runtime, target: str) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    page = client.get("/sign-in")
    response = client.post(
        "/sign-in",
        params={"returnTo": target},
        data={"username": "alice", "password": PASSWORD, "csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert response.headers["location"] == "/"


def test_sign_in_form_needs_its_csrf_token(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    client.get("/sign-in")
    response = client.post("/sign-in", data={"username": "alice", "password": PASSWORD, "csrf_token": "forged"})
    assert response.status_code == 403
    assert "CSRF" in response.text
    response = client.post("/sign-in", data={"username": "alice", "password": PASSWORD})
    assert response.status_code == 403


def test_wrong_password_and_unknown_user_show_the_same_page(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    bodies = []
    for username, password in [("alice", "wrong password!!"), ("nobody", PASSWORD)]:
        page = client.get("/sign-in")
        response = client.post(
            "/sign-in", data={"username": username, "password": password, "csrf_token": csrf_of(page.text)}
        )
        assert response.status_code == 401
        assert "Invalid username or password." in response.text
        bodies.append(re.sub(r'(?:value|nonce)="[^"]*"', "", response.text))  # CSRF token, per-page CSP nonce
    assert bodies[0] == bodies[1]


def test_sign_out_ends_the_session_server_side(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    sign_in(client, "alice")
    cookie = client.cookies[SESSION_COOKIE]
    page = client.get("/settings/tokens")
    response = client.post("/sign-out", data={"csrf_token": csrf_of(page.text)}, follow_redirects=False)
    assert response.status_code == 303
    assert runtime.get(AuthService).session_actor(cookie) is None
    client.cookies.set(SESSION_COOKIE, cookie)  # a copied cookie does not come back to life
    assert client.get("/.api/users/me").status_code == 401


def test_cookie_authenticated_api_writes_need_the_csrf_header(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    sign_in(client, "alice")
    assert client.post("/.api/tokens", json={"note": "x"}).status_code == 403
    csrf = csrf_of(client.get("/settings/tokens").text)
    assert client.post("/.api/tokens", json={"note": "x"}, headers={"X-CSRF-Token": csrf}).status_code == 201


def test_tokens_page_creates_shows_once_and_revokes(client: TestClient, runtime: Runtime) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    sign_in(client, "alice")
    page = client.get("/settings/tokens")
    assert "No access tokens." in page.text
    created = client.post(
        "/settings/tokens",
        data={"note": "laptop", "scopes": ["user:all", "mcp"], "expiresInDays": "30", "csrf_token": csrf_of(page.text)},
    )
    assert created.status_code == 201
    raw = re.search(r"cwp_[0-9a-f]{40}", created.text)
    assert raw
    assert runtime.get(TokenService).authenticate(raw.group()) is not None
    again = client.get("/settings/tokens")
    assert "laptop" in again.text
    assert raw.group() not in again.text  # shown once
    token_id = runtime.get(TokenService).list(INTERNAL, alice.id)[0].id
    forged = client.post(f"/settings/tokens/{token_id}/revoke", data={"csrf_token": "nope"})
    assert forged.status_code == 403
    revoked = client.post(f"/settings/tokens/{token_id}/revoke", data={"csrf_token": csrf_of(again.text)})
    assert revoked.status_code == 200
    assert "No access tokens." in revoked.text
    assert runtime.get(TokenService).authenticate(raw.group()) is None


def test_token_form_errors_are_shown(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    sign_in(client, "alice")
    page = client.get("/settings/tokens")
    response = client.post(
        "/settings/tokens", data={"note": "x", "expiresInDays": "30", "csrf_token": csrf_of(page.text)}
    )
    assert response.status_code == 400
    assert "at least one scope" in response.text


def test_sign_up_first_user_becomes_admin_then_signup_follows_config(client: TestClient, runtime: Runtime) -> None:
    page = client.get("/sign-up")
    assert "becomes its site admin" in page.text
    response = client.post(
        "/sign-up",
        data={"username": "first", "password": PASSWORD, "csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert runtime.get(AccountService).get_by_username("first").site_admin
    set_site_config(runtime, {"auth.providers": [{"type": "builtin", "allowSignup": False}]})
    client.cookies.clear()
    assert client.get("/sign-up").status_code == 403


def test_password_reset_page(client: TestClient, runtime: Runtime) -> None:
    alice = make_user(runtime, "alice", password=PASSWORD)
    link = runtime.get(CredentialService).password_reset_link(INTERNAL, alice.id)
    path = link.removeprefix(runtime.external_url)
    page = client.get(path)
    assert page.status_code == 200
    form = {"userID": str(alice.id), "code": path.split("code=")[1], "csrf_token": csrf_of(page.text)}
    short = client.post("/password-reset", data={**form, "password": "short"})
    assert "at least 12" in short.text
    done = client.post("/password-reset", data={**form, "password": "my new long password"}, follow_redirects=False)
    assert done.status_code == 303
    sign_in(client, "alice", "my new long password")
    assert client.get(path).status_code == 400  # used up


def test_admin_pages_need_a_site_admin(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    sign_in(client, "alice")
    for path in ("/site-admin/users", "/site-admin/roles", "/site-admin/audit"):
        assert client.get(path).status_code == 403


def test_admin_pages_manage_users_roles_and_show_audit(client: TestClient, runtime: Runtime) -> None:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    sign_in(client, "root")
    users = client.get("/site-admin/users")
    assert "root" in users.text
    created = client.post("/site-admin/users", data={"username": "carol", "csrf_token": csrf_of(users.text)})
    assert "/password-reset?userID=" in created.text
    roles = client.get("/site-admin/roles")
    csrf = csrf_of(roles.text)
    client.post(
        "/site-admin/roles/User/permissions", data={"permission": "MCP#ACCESS", "op": "remove", "csrf_token": csrf}
    )
    client.post("/site-admin/roles", data={"name": "MCP users", "permissions": "MCP#ACCESS", "csrf_token": csrf})
    assigned = client.post(
        "/site-admin/roles/MCP%20users/users", data={"username": "carol", "op": "assign", "csrf_token": csrf}
    )
    assert "Assigned MCP users to carol." in assigned.text
    accounts = runtime.get(AccountService)
    carol = accounts.actor_for(accounts.get_by_username("carol"), via="session")
    assert accounts.has_permission(carol, "MCP#ACCESS")
    refused = client.post("/site-admin/users/root/delete", data={"csrf_token": csrf})
    assert refused.status_code == 409
    assert "last site admin" in refused.text
    audit = client.get("/site-admin/audit?entity=accounts.role")
    assert "permissionRemoved" in audit.text
    assert "assigned" in audit.text
