"""A rejected credential on an MCP endpoint gets the OAuth challenge, so clients can start a fresh sign-in."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from codewell.accounts.roles import RoleService
from codewell.accounts.tokens import TokenService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("path", ["/.api/mcp", "/.api/mcp/all", "/.api/mcp/deepsearch"])
def test_unknown_token_gets_the_endpoints_challenge(client: TestClient, runtime: Runtime, path: str) -> None:
    response = client.post(path, json=LIST_TOOLS, headers={**ACCEPT, "Authorization": "Bearer cwp_" + "0" * 40})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    assert f'resource_metadata="{runtime.external_url}/.well-known/oauth-protected-resource{path}"' in challenge
    assert 'scope="mcp"' in challenge


def test_revoked_token_gets_the_challenge(client: TestClient, runtime: Runtime) -> None:
    user = make_user(runtime, "alice")
    token = make_token(runtime, user)
    # The MCP endpoints only answer requests addressed to the instance's own host (DNS rebinding guard).
    host = {"Host": runtime.external_url.split("://", 1)[1]}
    ok = client.post("/.api/mcp", json=LIST_TOOLS, headers={**ACCEPT, **host, **auth_headers(token)})
    assert ok.status_code == 200
    tokens = runtime.get(TokenService)
    (info,) = tokens.list(INTERNAL, user.id)
    tokens.revoke(INTERNAL, info.id)
    response = client.post("/.api/mcp", json=LIST_TOOLS, headers={**ACCEPT, **auth_headers(token)})
    assert response.status_code == 401
    assert "resource_metadata=" in response.headers["www-authenticate"]


def test_other_api_paths_get_no_oauth_challenge(client: TestClient) -> None:
    response = client.get("/.api/repos", headers={"Authorization": "Bearer cwp_" + "0" * 40})
    assert response.status_code == 401
    assert "www-authenticate" not in response.headers


def test_mcp_access_restriction_applies_on_the_next_request(client: TestClient, runtime: Runtime) -> None:
    """The spec's recipe: remove MCP#ACCESS from User, grant it through a custom role to chosen users."""

    alice, bob = make_user(runtime, "alice"), make_user(runtime, "bob")
    headers = {**ACCEPT, "Host": runtime.external_url.split("://", 1)[1]}
    alice_h, bob_h = (
        {**headers, **auth_headers(make_token(runtime, alice))},
        {**headers, **auth_headers(make_token(runtime, bob))},
    )
    assert client.post("/.api/mcp", json=LIST_TOOLS, headers=alice_h).status_code == 200
    assert client.post("/.api/mcp", json=LIST_TOOLS, headers=bob_h).status_code == 200
    roles = runtime.get(RoleService)
    roles.set_permission(INTERNAL, "User", "MCP#ACCESS", granted=False)
    roles.create_role(INTERNAL, "mcp-users", ("MCP#ACCESS",))
    roles.set_assignment(INTERNAL, "mcp-users", alice.id, assigned=True)
    # No waiting for a cache to expire: both answers change at once.
    assert client.post("/.api/mcp", json=LIST_TOOLS, headers=alice_h).status_code == 200
    denied = client.post("/.api/mcp", json=LIST_TOOLS, headers=bob_h)
    assert denied.status_code == 403
    assert denied.text == "forbidden"
    roles.set_assignment(INTERNAL, "mcp-users", alice.id, assigned=False)
    assert client.post("/.api/mcp", json=LIST_TOOLS, headers=alice_h).status_code == 403
