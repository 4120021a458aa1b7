"""REST API for users, tokens, roles and the audit log, with a permission battery over every route."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from codewell.accounts.service import AccountService
from codewell.auth.service import AuthService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user

pytestmark = pytest.mark.database


@pytest.fixture
def admin(runtime: Runtime) -> dict[str, str]:
    return auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))


@pytest.fixture
def alice(runtime: Runtime) -> dict[str, str]:
    return auth_headers(make_token(runtime, make_user(runtime, "alice", email="alice@example.com")))


# Every accounts route, as (method, path, body); run as anonymous, a plain user and a site admin.
ADMIN_ROUTES = [
    ("POST", "/.api/users", {"username": "carol"}),
    ("PATCH", "/.api/users/bob", {"siteAdmin": True}),
    ("DELETE", "/.api/users/bob", None),
    ("POST", "/.api/users/bob/password-reset-link", {}),
    ("PATCH", "/.api/users/bob/emails/bob@example.com", {"verified": True}),
    ("POST", "/.api/roles", {"name": "Agents"}),
    ("PUT", "/.api/roles/User/permissions/MCP%23ACCESS", {}),
    ("DELETE", "/.api/roles/User/permissions/MCP%23ACCESS", None),
    ("GET", "/.api/audit", None),
    ("GET", "/.api/tokens?user=bob", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_admin_routes_battery(
    client: TestClient,
    runtime: Runtime,
    admin: dict[str, str],
    alice: dict[str, str],
    method: str,
    path: str,
    body: dict[str, object] | None,
) -> None:
    make_user(runtime, "bob", email="bob@example.com")
    assert client.request(method, path, json=body).status_code == 401
    assert client.request(method, path, json=body, headers=alice).status_code == 403
    assert client.request(method, path, json=body, headers=admin).status_code in (200, 201, 204)


def test_users_crud(client: TestClient, admin: dict[str, str], alice: dict[str, str]) -> None:
    created = client.post(
        "/.api/users", json={"username": "carol", "email": "carol@example.com", "displayName": "Carol"}, headers=admin
    )
    assert created.status_code == 201
    assert created.json()["roles"] == ["User"]
    assert created.json()["emails"] == [{"email": "carol@example.com", "verified": False, "primary": True}]
    duplicate = client.post("/.api/users", json={"username": "CAROL"}, headers=admin)
    assert duplicate.status_code == 409
    bad = client.post("/.api/users", json={"username": "carol!"}, headers=admin)
    assert bad.status_code == 400
    assert "only letters, digits" in bad.json()["error"]["message"]
    listed = client.get("/.api/users?query=car", headers=alice).json()["users"]
    assert [u["username"] for u in listed] == ["carol"]
    # Other users' e-mails are not shown to non-admins.
    assert "emails" not in client.get("/.api/users/carol", headers=alice).json()
    promoted = client.patch("/.api/users/carol", json={"siteAdmin": True}, headers=admin)
    assert promoted.json()["roles"] == ["User", "Site Administrator"]
    assert client.delete("/.api/users/carol", headers=admin).status_code == 204
    assert client.get("/.api/users/carol", headers=admin).status_code == 404


def test_user_search_query_length_is_bounded(client: TestClient, alice: dict[str, str]) -> None:
    """Issue #22 (security 5): a 60,000-character query reached SQLite as a LIKE pattern "too complex" (500)."""
    found = client.get("/.api/users", params={"query": "ALI"}, headers=alice)
    assert [u["username"] for u in found.json()["users"]] == ["alice"]
    at_limit = client.get("/.api/users", params={"query": "a" * 255}, headers=alice)
    assert at_limit.status_code == 200
    assert at_limit.json() == {"users": []}
    response = client.get("/.api/users", params={"query": "a" * 60_000}, headers=alice)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["message"] == "the user search query is longer than 255 characters"
    assert "usernames and display names" in error["hint"]


def test_last_admin_cannot_delete_or_demote_itself(client: TestClient, admin: dict[str, str]) -> None:
    demote = client.patch("/.api/users/me", json={"siteAdmin": False}, headers=admin)
    assert demote.status_code == 409
    assert "last site admin" in demote.json()["error"]["message"]
    assert client.delete("/.api/users/root", headers=admin).status_code == 409


def test_bad_json_is_a_clear_400(client: TestClient, admin: dict[str, str]) -> None:
    response = client.post("/.api/users", content=b"{nope", headers=admin)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "the request body is not valid JSON"
    wrong_type = client.post("/.api/users", json={"username": 5}, headers=admin)
    assert wrong_type.json()["error"]["message"] == "username must be a str"


def test_token_life_cycle_over_rest(client: TestClient, alice: dict[str, str]) -> None:
    created = client.post("/.api/tokens", json={"note": "ci", "scopes": ["mcp"], "expiresInDays": 30}, headers=alice)
    assert created.status_code == 201
    token = created.json()["token"]
    assert token.startswith("cwp_")
    assert created.json()["scopes"] == ["mcp"]
    listed = client.get("/.api/tokens", headers=alice).json()["tokens"]
    assert token not in str(listed)
    assert {t["note"] for t in listed} == {"ci", "test"}
    no_expiry = client.post("/.api/tokens", json={"note": "x", "expiresInDays": None}, headers=alice)
    assert no_expiry.json()["expiresAt"] is None
    default = client.post("/.api/tokens", json={"note": "y"}, headers=alice)
    assert default.json()["expiresAt"] is not None  # defaultExpirationDays (90)
    token_id = created.json()["id"]
    assert client.delete(f"/.api/tokens/{token_id}", headers=alice).json()["revokedAt"] is not None
    assert client.get("/.api/users/me", headers={"Authorization": f"token {token}"}).status_code == 401


def test_users_cannot_revoke_or_see_each_others_tokens(
    client: TestClient, runtime: Runtime, alice: dict[str, str]
) -> None:
    bob_headers = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    bob_token_id = client.get("/.api/tokens", headers=bob_headers).json()["tokens"][0]["id"]
    assert client.delete(f"/.api/tokens/{bob_token_id}", headers=alice).status_code == 404
    assert client.get("/.api/tokens?user=bob", headers=alice).status_code == 403
    assert client.post("/.api/tokens", json={"user": "bob", "note": "x"}, headers=alice).status_code == 403


def test_mcp_access_recipe_over_rest(client: TestClient, runtime: Runtime, admin: dict[str, str]) -> None:
    accounts = runtime.get(AccountService)
    make_user(runtime, "dave")
    dave = accounts.actor_for(accounts.get_by_username("dave"), via="session")
    assert client.delete("/.api/roles/User/permissions/MCP%23ACCESS", headers=admin).json()["permissions"] == []
    assert not accounts.has_permission(dave, "MCP#ACCESS")
    created = client.post("/.api/roles", json={"name": "MCP users", "permissions": ["MCP#ACCESS"]}, headers=admin)
    assert created.status_code == 201
    assert client.put("/.api/roles/MCP%20users/users/dave", headers=admin).json()["assigned"] is True
    assert accounts.has_permission(dave, "MCP#ACCESS")
    role = client.get("/.api/roles/MCP%20users", headers=admin).json()
    assert role == {
        "id": role["id"],
        "name": "MCP users",
        "system": False,
        "permissions": ["MCP#ACCESS"],
        "users": ["dave"],
    }
    assert client.patch("/.api/roles/MCP%20users", json={"name": "Agents"}, headers=admin).json()["name"] == "Agents"
    assert client.delete("/.api/roles/Agents", headers=admin).status_code == 204
    assert not accounts.has_permission(dave, "MCP#ACCESS")


def test_audit_api_filters_and_pages(client: TestClient, admin: dict[str, str]) -> None:
    for _ in range(3):
        client.get("/.api/users/me", headers={"Authorization": "Basic eDp5"})
    entries = client.get("/.api/audit?entity=auth.accessToken&action=failed&limit=2", headers=admin).json()["entries"]
    assert len(entries) == 2
    assert entries[0]["reason"] == "invalid Authorization header"
    older = client.get(
        f"/.api/audit?entity=auth.accessToken&action=failed&before={entries[-1]['id']}", headers=admin
    ).json()
    assert len(older["entries"]) == 1
    assert client.get("/.api/audit?limit=0", headers=admin).status_code == 400
    assert client.get("/.api/audit?limit=x", headers=admin).status_code == 400


def test_oauth_actors_cannot_change_accounts(client: TestClient, runtime: Runtime) -> None:

    accounts = runtime.get(AccountService)
    root = make_user(runtime, "root", site_admin=True)
    runtime.get(AuthService).add_bearer_resolver(
        lambda v: accounts.actor_for(root, via="oauth", scopes=frozenset({"user:all"})) if v == "oauth" else None
    )
    headers = {"Authorization": "Bearer oauth"}
    assert client.get("/.api/users/me", headers=headers).status_code == 200
    response = client.post("/.api/roles", json={"name": "x"}, headers=headers)
    assert response.status_code == 403
    assert "OAuth" in response.json()["error"]["message"]
