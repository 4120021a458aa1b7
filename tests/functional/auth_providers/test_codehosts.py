"""OAuth sign-in with the code hosts, end to end: codewell's routes ↔ a loopback host speaking the real shapes."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.auth.identities import IdentityService
from codewell.auth.models import ExternalAccountRow
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.factories import make_user
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.auth_providers.conftest import approve, configure, local, sign_in, start

pytestmark = pytest.mark.database


def github(host: FakeCodeHost, **extra: object) -> dict[str, object]:
    return {"type": "github", "url": host.url, "clientID": host.client_id, "clientSecret": host.client_secret, **extra}


def gitlab(host: FakeCodeHost, **extra: object) -> dict[str, object]:
    return {"type": "gitlab", "url": host.url, "clientID": host.client_id, "clientSecret": host.client_secret, **extra}


def signed_in_as(client: TestClient) -> str:
    """The username shown in the page header of a signed-in session ('' when signed out)."""
    page = client.get("/sign-in?returnTo=/nowhere", follow_redirects=False)
    return "" if page.status_code == 200 else page.headers["location"]


def audit_reasons(runtime: Runtime, action: str = "failed") -> list[str]:
    return [e.reason for e in runtime.get(AuditService).list(INTERNAL, entity="auth.signIn", action=action)]


def test_github_signup_creates_a_user_with_pkce_and_an_encrypted_token(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(7, "Jane.Doe@corp", "Jane Doe", emails=[("jane@corp.example", True), ("j@home.example", True)]))
    host.signed_in = "Jane.Doe@corp"
    (provider,) = configure(runtime, github(host, allowSignup=True))
    response = sign_in(client, provider, "/search?q=x")
    assert response.status_code == 303
    assert response.headers["location"] == "/search?q=x"
    user = runtime.get(AccountService).get_by_username("Jane.Doe")  # login normalized (rule 2: one '@')
    assert user.display_name == "Jane Doe"
    emails = runtime.get(AccountService).list_emails(INTERNAL, user.id)
    assert {(e.email, e.verified) for e in emails} == {("jane@corp.example", True), ("j@home.example", True)}
    # PKCE: the challenge went to the authorization endpoint, the verifier to the token endpoint.
    assert host.authorize_requests[-1]["code_challenge_method"] == "S256"
    assert host.token_requests[-1]["code_verifier"]
    assert host.authorize_requests[-1]["scope"] == "user:email repo read:org"
    # The session works, and the OAuth token is stored encrypted yet readable by the service itself.
    assert client.get("/sign-in", follow_redirects=False).status_code == 303
    with runtime.db.session() as session:
        row = session.scalars(select(ExternalAccountRow)).one()
        blob = row.auth_data
    access_token = next(iter(host.tokens))
    assert blob is not None
    assert access_token.encode() not in blob
    token = runtime.get(IdentityService).token_of(INTERNAL, row.id)
    assert token is not None
    assert token["access_token"] == access_token


def test_github_signup_is_off_by_default_and_admin_created_accounts_link_by_verified_email(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(8, "bob", emails=[("bob@corp.example", True)]))
    host.signed_in = "bob"
    (provider,) = configure(runtime, github(host))
    refused = sign_in(client, provider)
    assert refused.status_code == 403
    assert (
        "User account with verified email &#39;bob@corp.example&#39; does not exist. Ask a site admin to create your "
        "account and then verify your email." in refused.text
    )
    assert runtime.get(AccountService).find_by_username("bob") is None
    make_user(runtime, "robert", email="bob@corp.example")  # an admin creates it (verified e-mail)
    linked = sign_in(client, provider)
    assert linked.status_code == 303
    identities = runtime.get(IdentityService).list_identities(
        INTERNAL, runtime.get(AccountService).get_by_username("robert").id
    )
    assert [(i.kind, i.account_id) for i in identities] == [("github", "8")]


def test_a_missing_verified_email_is_refused_with_the_reference_message(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(9, "nomail", emails=[("unverified@corp.example", False)]))
    host.signed_in = "nomail"
    (provider,) = configure(runtime, github(host, allowSignup=True))
    response = sign_in(client, provider)
    assert response.status_code == 403
    assert "could not be linked to an account here because no verified email was provided" in response.text
    assert runtime.get(AccountService).count_users() == 0
    assert any("no verified email" in r for r in audit_reasons(runtime))


def test_username_and_email_are_never_overwritten_at_later_sign_ins(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    account = host.add(HostUser(10, "first-login", emails=[("x@corp.example", True)]))
    host.signed_in = "first-login"
    (provider,) = configure(runtime, github(host, allowSignup=True))
    assert sign_in(client, provider).status_code == 303
    account.login, account.emails = "renamed", [("other@corp.example", True)]
    client.cookies.clear()
    assert sign_in(client, provider).status_code == 303
    users = runtime.get(AccountService).list_users(INTERNAL)
    assert [u.username for u in users] == ["first-login"]
    assert [e.email for e in runtime.get(AccountService).list_emails(INTERNAL, users[0].id)] == ["x@corp.example"]


def test_username_clash_gets_a_random_suffix(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    make_user(runtime, "alice", email="alice@elsewhere.example")
    host.add(HostUser(11, "alice", emails=[("alice@corp.example", True)]))
    host.signed_in = "alice"
    (provider,) = configure(runtime, github(host, allowSignup=True))
    assert sign_in(client, provider).status_code == 303
    names = sorted(u.username for u in runtime.get(AccountService).list_users(INTERNAL))
    assert names[0] == "alice"
    assert re.fullmatch(r"alice-[a-z]{5}", names[1])


def test_github_allow_orgs_and_teams(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    host.add(HostUser(20, "member", emails=[("m@x.example", True)], orgs=[(1, "Acme")]))
    host.add(
        HostUser(21, "teamed", emails=[("t@x.example", True)], orgs=[(2, "other")], teams=[("other", "Core Devs")])
    )
    host.add(
        HostUser(22, "subteam", emails=[("s@x.example", True)], orgs=[(2, "other")], teams=[("other", "Core Devs Sub")])
    )
    host.add(HostUser(23, "outsider", emails=[("o@x.example", True)]))
    (provider,) = configure(
        runtime, github(host, allowSignup=True, allowOrgs=["acme"], allowOrgsMap={"other": ["Core Devs"]})
    )
    results = {}
    for login in ("member", "teamed", "subteam", "outsider"):
        host.signed_in = login
        client.cookies.clear()
        results[login] = sign_in(client, provider).status_code
    assert results == {"member": 303, "teamed": 303, "subteam": 403, "outsider": 403}
    assert sorted(u.username for u in runtime.get(AccountService).list_users(INTERNAL)) == ["member", "teamed"]
    assert sum("not a member of an organization or team" in r for r in audit_reasons(runtime)) == 2


def test_github_team_names_are_display_names_matched_exactly(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(24, "slugged", emails=[("sl@x.example", True)], teams=[("acme", "Core Devs")]))
    host.signed_in = "slugged"
    (provider,) = configure(runtime, github(host, allowSignup=True, allowOrgsMap={"acme": ["core-devs"]}))
    assert sign_in(client, provider).status_code == 403  # the slug is not the display name


def test_github_required_sso_orgs(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    host.add(
        HostUser(30, "sso", emails=[("sso@x.example", True)], orgs=[(101, "a"), (102, "b")], sso_unauthorized=[102])
    )
    host.signed_in = "sso"
    (ok,) = configure(runtime, github(host, allowSignup=True, requiredSsoOrgs=["101"]))
    assert sign_in(client, ok).status_code == 303
    client.cookies.clear()
    for required in (["102"], ["all"]):
        (provider,) = configure(runtime, github(host, allowSignup=True, requiredSsoOrgs=required))
        response = sign_in(client, provider)
        assert response.status_code == 403
        assert "authorize this OAuth application for SSO in the GitHub organization(s) 102" in response.text


def test_gitlab_allows_signup_by_default_and_checks_groups_and_minimal_access(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(40, "guest", emails=[("g@x.example", True)], groups={"eng/backend": 10}))
    host.add(HostUser(41, "minimal", emails=[("min@x.example", True)], groups={"eng/backend": 5}))
    host.add(HostUser(42, "parent-only", emails=[("p@x.example", True)], groups={"eng": 30}))
    (provider,) = configure(runtime, gitlab(host, allowGroups=["eng/backend"], apiScope="read_api"))
    outcome = {}
    for login in ("guest", "minimal", "parent-only"):
        host.signed_in = login
        client.cookies.clear()
        outcome[login] = sign_in(client, provider)
    assert {k: v.status_code for k, v in outcome.items()} == {"guest": 303, "minimal": 403, "parent-only": 403}
    assert "does not have at least Guest access in a group allowed to sign in" in outcome["minimal"].text
    assert host.authorize_requests[-1]["scope"] == "read_user read_api"
    assert host.authorize_requests[-1]["code_challenge_method"] == "S256"


def test_gitlab_sso_url_sends_the_browser_through_group_sso_first(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    sso = "https://gitlab.example/groups/eng/-/saml/sso?token=abc"
    (provider,) = configure(runtime, gitlab(host, ssoURL=sso))
    target = start(client, provider)
    assert target.startswith(sso + "&redirect=")
    inner = parse_qs(urlsplit(target).query)["redirect"][0]
    assert inner.startswith(f"{host.url}oauth/authorize?")


def test_bitbucket_cloud_and_server(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    host.add(HostUser(50, "bb", "B B", emails=[("bb@x.example", True)]))
    host.signed_in = "bb"
    cloud, server = configure(
        runtime,
        {"type": "codehost_c_cloud", "url": host.url, "clientKey": host.client_id, "clientSecret": host.client_secret},
        {"type": "codehost_c_server", "url": host.url, "clientID": host.client_id, "clientSecret": host.client_secret},
    )
    assert sign_in(client, cloud).status_code == 303  # allowSignup defaults to true
    assert "code_challenge" not in host.authorize_requests[-1]  # no PKCE with Bitbucket Cloud consumers
    assert host.authorize_requests[-1]["scope"] == "account email repository"
    client.cookies.clear()
    # Bitbucket Data Center: sign-up defaults to false, but the same verified e-mail links to the same account.
    assert sign_in(client, server).status_code == 303
    user = runtime.get(AccountService).get_by_username("bb")
    kinds = sorted(i.kind for i in runtime.get(IdentityService).list_identities(INTERNAL, user.id))
    assert kinds == ["bitbucketcloud", "bitbucketserver"]
    assert runtime.get(AccountService).count_users() == 1


def test_identities_from_several_providers_link_to_one_account(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(60, "dev", emails=[("dev@x.example", True)]))
    host.signed_in = "dev"
    gh, gl = configure(runtime, github(host, allowSignup=True), gitlab(host))
    assert sign_in(client, gh).status_code == 303
    client.cookies.clear()
    assert sign_in(client, gl).status_code == 303
    (user,) = runtime.get(AccountService).list_users(INTERNAL)
    assert len(runtime.get(IdentityService).list_identities(INTERNAL, user.id)) == 2


def test_state_is_single_use_bound_to_the_browser_and_unforgeable(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(70, "eve", emails=[("eve@x.example", True)]))
    host.signed_in = "eve"
    (provider,) = configure(runtime, github(host, allowSignup=True))
    callback = local(approve(start(client, provider)))
    # Another browser (no flow cookie) presenting the callback is refused, and the state is then spent.
    with TestClient(client.app) as other:
        assert other.get(callback, follow_redirects=False).status_code == 403
    assert client.get(callback, follow_redirects=False).status_code == 403
    # A forged state is refused.
    assert client.get("/.auth/github/callback?code=x&state=forged", follow_redirects=False).status_code == 403
    # A fresh, honest flow works once; replaying its callback is refused.
    callback = local(approve(start(client, provider)))
    assert client.get(callback, follow_redirects=False).status_code == 303
    client.cookies.pop("cw_session", None)
    assert client.get(callback, follow_redirects=False).status_code == 403
    reasons = audit_reasons(runtime)
    assert "state not bound to this browser session" in reasons
    assert reasons.count("unknown or already used state") == 3


def test_callbacks_for_a_provider_removed_from_the_config_are_refused(
    runtime: Runtime, client: TestClient, host: FakeCodeHost
) -> None:
    host.add(HostUser(80, "late", emails=[("late@x.example", True)]))
    host.signed_in = "late"
    (provider,) = configure(runtime, github(host, allowSignup=True))
    callback = local(approve(start(client, provider)))
    configure(runtime, {"type": "builtin", "allowSignup": False})
    response = client.get(callback, follow_redirects=False)
    assert response.status_code == 403
    assert "not configured on this instance" in response.text
    assert "callback for a provider removed from the config" in audit_reasons(runtime)
    login = client.get(f"/.auth/github/login?pc={provider.id}", follow_redirects=False)
    assert login.status_code == 403


def test_host_errors_are_shown_and_audited(runtime: Runtime, client: TestClient, host: FakeCodeHost) -> None:
    (provider,) = configure(runtime, github(host, allowSignup=True))
    target = start(client, provider)
    state = parse_qs(urlsplit(target).query)["state"][0]
    response = client.get(
        f"/.auth/github/callback?error=access_denied&error_description=The+user+denied&state={state}",
        follow_redirects=False,
    )
    assert response.status_code == 403
    assert "did not sign you in: The user denied" in response.text
    assert "provider error access_denied" in audit_reasons(runtime)
