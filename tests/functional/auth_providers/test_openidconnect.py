"""OpenID Connect sign-in against a real OpenID Provider (npm oidc-provider) on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.auth.identities import IdentityService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import make_user
from tests.functional.auth_providers.conftest import configure, local, start
from tests.oidc.op import OpenIDProvider

ACCOUNTS = {
    "alice": {"email": "alice@corp.example", "email_verified": True, "name": "Alice A", "preferred_username": "alice"},
    "mallory": {"email": "mallory@evil.example", "email_verified": True, "preferred_username": "mallory"},
    "unverified": {"email": "u@corp.example", "email_verified": False, "preferred_username": "u"},
}


@pytest.fixture
def op(runtime: Runtime) -> Iterator[OpenIDProvider]:
    client = {
        "client_id": "codewell",
        "client_secret": "codewell-secret",
        "redirect_uris": [f"{runtime.external_url}/.auth/callback"],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
    }
    with OpenIDProvider([client], ACCOUNTS) as provider:
        yield provider


def oidc(op: OpenIDProvider, **extra: object) -> dict[str, object]:
    return {
        "type": "openidconnect",
        "issuer": op.issuer,
        "clientID": "codewell",
        "clientSecret": "codewell-secret",
        **extra,
    }


def round_trip(runtime: Runtime, client: TestClient, op: OpenIDProvider, account: str, provider: object) -> object:
    op.login_as(account)
    target = start(client, provider)  # type: ignore[arg-type]
    callback = op.authorize(target, f"{runtime.external_url}/.auth/callback")
    return client.get(local(callback), follow_redirects=False)


def test_code_pkce_id_token_and_userinfo_sign_up(runtime: Runtime, client: TestClient, op: OpenIDProvider) -> None:
    (provider,) = configure(runtime, oidc(op))
    op.login_as("alice")
    target = start(client, provider, "/after")
    query = parse_qs(urlsplit(target).query)
    assert target.startswith(f"{op.issuer}/auth?")
    assert query["code_challenge_method"] == ["S256"]
    assert query["nonce"][0]
    assert query["scope"] == ["openid email profile"]
    callback = op.authorize(target, f"{runtime.external_url}/.auth/callback")
    assert parse_qs(urlsplit(callback).query)["iss"] == [op.issuer]  # RFC 9207
    response = client.get(local(callback), follow_redirects=False)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/after"
    user = runtime.get(AccountService).get_by_username("alice")  # allowSignup unset = true
    assert user.display_name == "Alice A"
    (identity,) = runtime.get(IdentityService).list_identities(INTERNAL, user.id)
    assert (identity.kind, identity.service_id, identity.account_id) == ("openidconnect", op.issuer, "alice")


def test_require_email_domain_and_unverified_email(runtime: Runtime, client: TestClient, op: OpenIDProvider) -> None:
    (provider,) = configure(runtime, oidc(op, requireEmailDomain="corp.example"))
    refused = round_trip(runtime, client, op, "mallory", provider)
    assert refused.status_code == 403  # type: ignore[attr-defined]
    assert "Only users with a verified e-mail address at corp.example may sign in." in refused.text  # type: ignore[attr-defined]
    unverified = round_trip(runtime, client, op, "unverified", provider)
    assert unverified.status_code == 403  # type: ignore[attr-defined]
    assert runtime.get(AccountService).count_users() == 0
    reasons = [e.reason for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn", action="failed")]
    assert sum("corp.example" in r for r in reasons) == 2


def test_signup_false_links_only_admin_created_accounts(
    runtime: Runtime, client: TestClient, op: OpenIDProvider
) -> None:
    (provider,) = configure(runtime, oidc(op, allowSignup=False))
    refused = round_trip(runtime, client, op, "alice", provider)
    assert refused.status_code == 403  # type: ignore[attr-defined]
    assert "Ask a site admin to create your account" in refused.text  # type: ignore[attr-defined]
    make_user(runtime, "alice-admin-made", email="alice@corp.example")
    assert round_trip(runtime, client, op, "alice", provider).status_code == 303  # type: ignore[attr-defined]


def test_wrong_issuer_in_the_config_is_refused(runtime: Runtime, client: TestClient, op: OpenIDProvider) -> None:
    (provider,) = configure(runtime, oidc(op) | {"issuer": op.issuer.replace("127.0.0.1", "localhost")})
    response = client.get(f"/.auth/openidconnect/login?pc={provider.id}", follow_redirects=False)
    assert response.status_code == 503
    assert "names a different issuer" in response.text
    reasons = [e.reason for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn", action="failed")]
    assert any("names a different issuer" in r for r in reasons)


def test_callback_with_a_foreign_iss_parameter_is_refused(
    runtime: Runtime, client: TestClient, op: OpenIDProvider
) -> None:
    (provider,) = configure(runtime, oidc(op))
    op.login_as("alice")
    callback = op.authorize(start(client, provider), f"{runtime.external_url}/.auth/callback")
    forged = callback.replace(
        f"iss={op.issuer.replace(':', '%3A').replace('/', '%2F')}", "iss=https%3A%2F%2Fevil.example"
    )
    assert forged != callback
    response = client.get(local(forged), follow_redirects=False)
    assert response.status_code == 403
    assert "different issuer" in response.text
    assert runtime.get(AccountService).count_users() == 0
