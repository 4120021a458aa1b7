"""The Authorization header over HTTP: every form and error of behaviour-notes §2, sudo, audit entries,
tokens in URLs, scope limits, and the anonymous-access policy (auth.public)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditEntry, AuditService
from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.auth.service import AuthService, ClientInfo
from codewell.core.actors import INTERNAL, Actor
from codewell.http.sessions import SESSION_COOKIE
from codewell.runtime import Runtime
from tests.factories import make_token, make_user, set_site_config

pytestmark = pytest.mark.database

ME = "/.api/users/me"


def _audit(runtime: Runtime, action: str = "failed") -> list[AuditEntry]:
    return runtime.get(AuditService).list(INTERNAL, entity="auth.accessToken", action=action)


@pytest.fixture
def alice_token(runtime: Runtime) -> str:
    return make_token(runtime, make_user(runtime, "alice"))


@pytest.mark.parametrize(
    "template",
    [
        "token {t}",
        "Token {t}",
        "token token={t}",
        'token token="{t}"',
        "TOKEN TOKEN={t}",
        "Bearer {t}",
        "bearer {t}",
        "BEARER {t}",
    ],
)
def test_every_header_form_authenticates(client: TestClient, alice_token: str, template: str) -> None:
    response = client.get(ME, headers={"Authorization": template.format(t=alice_token)})
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


@pytest.mark.parametrize(
    "value",
    [
        "token",
        "token a b",
        "token k=v, k=v",
        "token k=v",
        'token-sudo user="alice"',
        'token-sudo token="",user="alice"',
        'token-sudo token="x"',
        "Bearer",
        "Bearer a b",
    ],
)
def test_malformed_known_scheme_is_401_and_audited(client: TestClient, runtime: Runtime, value: str) -> None:
    response = client.get(ME, headers={"Authorization": value})
    assert response.status_code == 401
    assert response.json()["error"] == {"code": "unauthenticated", "message": "Invalid Authorization header."}
    entries = _audit(runtime)
    assert len(entries) == 1
    assert entries[0].reason.startswith("malformed Authorization header")
    assert entries[0].user_agent == "testclient"


def test_malformed_header_on_a_page_is_a_plain_401(client: TestClient) -> None:
    response = client.get("/settings/tokens", headers={"Authorization": "token a b"})
    assert response.status_code == 401
    assert response.text == "Invalid Authorization header."


@pytest.mark.parametrize("value", [f"token cwp_{'0' * 40}", "token tok==", "Bearer nope", f"Bearer cwp_{'a' * 40}"])
def test_unknown_token_is_401_invalid_access_token(client: TestClient, runtime: Runtime, value: str) -> None:
    response = client.get(ME, headers={"Authorization": value})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid access token."
    assert _audit(runtime)[0].reason == "unknown, revoked or expired access token"


@pytest.mark.parametrize("value", ["Basic dXNlcjpwYXNz", "Digest username=alice", "Negotiate abc", "tokens x"])
def test_other_schemes_are_ignored_and_audited(client: TestClient, runtime: Runtime, value: str) -> None:
    # Ignored: the request goes on as anonymous (so an auth proxy's header does not break it) ...
    assert client.get("/healthz", headers={"Authorization": value}).status_code == 200
    response = client.get(ME, headers={"Authorization": value})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Not signed in."
    # ... and recorded with the spec's entity, action and reason (no secret in it).
    entries = _audit(runtime)
    assert [(e.entity, e.action, e.reason) for e in entries] == [
        ("auth.accessToken", "failed", "invalid Authorization header")
    ] * 2
    assert value.split(" ", 1)[1] not in str([e.as_json() for e in entries])


def test_unknown_scheme_does_not_hide_a_valid_session(client: TestClient, runtime: Runtime) -> None:

    alice = make_user(runtime, "alice")
    cookie, _ = runtime.get(AuthService).start_session(alice, ClientInfo())
    client.cookies.set(SESSION_COOKIE, cookie)
    response = client.get(ME, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert response.json()["username"] == "alice"


def test_revoked_expired_and_deleted_user_tokens_fail_at_once(client: TestClient, runtime: Runtime) -> None:
    alice = make_user(runtime, "alice")
    tokens = runtime.get(TokenService)
    raw, info = tokens.create(INTERNAL, alice.id, "n", ["user:all"], None)
    headers = {"Authorization": f"token {raw}"}
    assert client.get(ME, headers=headers).status_code == 200
    tokens.revoke(INTERNAL, info.id)
    assert client.get(ME, headers=headers).status_code == 401

    bob = make_user(runtime, "bob")
    bob_token = make_token(runtime, bob)
    assert client.get(ME, headers={"Authorization": f"token {bob_token}"}).status_code == 200
    runtime.get(AccountService).delete_user(INTERNAL, bob.id)
    response = client.get(ME, headers={"Authorization": f"token {bob_token}"})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid access token."


class TestSudo:
    @pytest.fixture
    def admin_sudo_token(self, runtime: Runtime) -> str:
        make_user(runtime, "alice")
        root = make_user(runtime, "root", site_admin=True)
        return make_token(runtime, root, scopes=("user:all", "site-admin:sudo"))

    @pytest.mark.parametrize("template", ['token-sudo token="{t}", user="alice"', "token-sudo token={t},user=alice"])
    def test_sudo_acts_as_the_user_and_is_audited(
        self, client: TestClient, runtime: Runtime, admin_sudo_token: str, template: str
    ) -> None:
        response = client.get(ME, headers={"Authorization": template.format(t=admin_sudo_token)})
        assert response.status_code == 200
        assert response.json()["username"] == "alice"
        assert response.json()["siteAdmin"] is False
        entry = _audit(runtime, "impersonated")[0]
        assert (entry.actor_username, entry.details["user"]) == ("root", "alice")
        assert admin_sudo_token not in str(entry.as_json())

    def test_sudo_to_nonexistent_user(self, client: TestClient, admin_sudo_token: str) -> None:
        response = client.get(ME, headers={"Authorization": f'token-sudo token="{admin_sudo_token}",user="ghost"'})
        assert response.status_code == 403
        assert response.json()["error"]["message"] == "Unable to sudo to nonexistent user."

    def test_sudo_needs_the_owner_to_still_be_a_site_admin(
        self, client: TestClient, runtime: Runtime, admin_sudo_token: str
    ) -> None:
        accounts = runtime.get(AccountService)
        make_user(runtime, "other-admin", site_admin=True)
        accounts.set_site_admin(INTERNAL, accounts.get_by_username("root").id, False)
        response = client.get(ME, headers={"Authorization": f'token-sudo token="{admin_sudo_token}",user="alice"'})
        assert response.status_code == 403
        assert response.json()["error"]["message"] == "The subject user of a sudo access token must be a site admin."

    def test_sudo_needs_the_sudo_scope(self, client: TestClient, runtime: Runtime) -> None:
        make_user(runtime, "alice")
        plain = make_token(runtime, make_user(runtime, "root", site_admin=True))
        response = client.get(ME, headers={"Authorization": f'token-sudo token="{plain}",user="alice"'})
        assert response.status_code == 403
        assert "site-admin:sudo" in response.json()["error"]["message"]

    def test_sudo_with_unknown_token(self, client: TestClient) -> None:
        response = client.get(ME, headers={"Authorization": f'token-sudo token="cwp_{"1" * 40}",user="alice"'})
        assert response.status_code == 401
        assert response.json()["error"]["message"] == "Invalid access token."


def test_bearer_values_that_are_not_access_tokens_go_to_resolvers(
    client: TestClient, runtime: Runtime, alice_token: str
) -> None:
    alice = runtime.get(AccountService).get_by_username("alice")
    seen: list[str] = []

    def resolver(value: str) -> Actor | None:
        seen.append(value)
        if value == "oauth-abc":
            return runtime.get(AccountService).actor_for(alice, via="oauth", scopes=frozenset({"user:all"}))
        return None

    runtime.get(AuthService).add_bearer_resolver(resolver)
    assert client.get(ME, headers={"Authorization": "Bearer oauth-abc"}).json()["username"] == "alice"
    assert client.get(ME, headers={"Authorization": f"Bearer {alice_token}"}).status_code == 200
    assert client.get(ME, headers={"Authorization": "Bearer other"}).status_code == 401
    # Access tokens are tried first; the `token` scheme never reaches resolvers.
    assert client.get(ME, headers={"Authorization": "token oauth-abc"}).status_code == 401
    assert seen == ["oauth-abc", "other"]


@pytest.mark.parametrize("param", ["token", "access_token"])
def test_tokens_in_the_url_are_refused(client: TestClient, runtime: Runtime, alice_token: str, param: str) -> None:
    response = client.get(f"{ME}?{param}={alice_token}")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Access tokens are not accepted in URLs."
    assert "revoke" in response.json()["error"]["hint"]
    assert _audit(runtime)[0].reason == "access token in the URL refused"


@pytest.mark.parametrize("path", [ME, "/.api/mcp", "/sign-in", "/healthz"])
def test_two_authorization_headers_are_refused_and_audited(client: TestClient, runtime: Runtime, path: str) -> None:
    user = make_token(runtime, make_user(runtime, "alice"))
    admin = make_token(runtime, make_user(runtime, "root", site_admin=True))
    # The last copy used to win: a user's token followed by an admin's acted as the admin.
    response = client.get(path, headers=[("Authorization", f"token {user}"), ("Authorization", f"token {admin}")])
    assert response.status_code == 400
    assert "More than one Authorization header." in response.text
    if path.startswith("/.api/"):
        assert response.json()["error"]["code"] == "invalid_input"
    entry = _audit(runtime)[0]
    assert entry.reason == "more than one Authorization header"
    assert entry.actor_user_id is None
    assert user not in repr(entry)
    assert admin not in repr(entry)
    # Two copies of the same token are refused too: which copy counts is never up to a proxy.
    same = client.get(ME, headers=[("Authorization", f"token {user}"), ("authorization", f"token {user}")])
    assert same.status_code == 400
    assert client.get(ME, headers={"Authorization": f"token {user}"}).json()["username"] == "alice"


def test_mcp_scoped_token_reaches_only_mcp_paths(client: TestClient, runtime: Runtime) -> None:
    raw = make_token(runtime, make_user(runtime, "alice"), scopes=("mcp",))
    response = client.get(ME, headers={"Authorization": f"token {raw}"})
    assert response.status_code == 403
    assert "scopes (mcp)" in response.json()["error"]["message"]


class TestAnonymousPolicy:
    def test_private_instance_refuses_anonymous_api_calls_and_redirects_pages(self, client: TestClient) -> None:
        response = client.get("/.api/users")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
        page = client.get("/site-admin/users?x=1", follow_redirects=False)
        assert page.status_code == 302
        assert page.headers["location"] == "/sign-in?returnTo=%2Fsite-admin%2Fusers%3Fx%3D1"
        assert client.get("/healthz").status_code == 200
        assert client.get("/sign-in").status_code == 200

    def test_public_instance_lets_anonymous_through_to_routes_that_decide(
        self, client: TestClient, runtime: Runtime
    ) -> None:
        set_site_config(runtime, {"auth.public": True})
        response = client.get(ME)
        assert response.status_code == 401  # the route itself needs a user
        assert client.get("/.api/users").status_code == 401


def test_unknown_paths_are_404_for_anonymous_callers_too(client: TestClient) -> None:
    assert client.get("/-/no/such/page", follow_redirects=False).status_code == 404
    # `/<name>` may be a repository page (web/): anonymous callers sign in first, whether it exists or not.
    assert client.get("/no/such/page", follow_redirects=False).status_code == 302
    assert client.get("/.api/no-such-route").status_code == 404
    assert client.get("/settings/tokens", follow_redirects=False).status_code == 302
