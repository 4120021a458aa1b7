"""Linked external accounts on `/settings/accounts`: connect a provider while signed in, disconnect, and the
refusals (last sign-in method, someone else's identity, CSRF, a callback finished by another session). The app
is served over real HTTP on loopback and the code host is the loopback fake speaking GitHub's shapes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from sqlalchemy import func, select

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService, User
from codewell.auth.identities import IdentityService
from codewell.auth.models import AuthFlowRow
from codewell.auth.service import LAST_SIGN_IN_METHOD, AuthService
from codewell.config.providers import Provider
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.browser import serve_app
from tests.factories import actor_of_user, make_user, set_site_config
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.oidc.op import OpenIDProvider

PASSWORD = "correct horse battery staple"


@dataclass
class Site:
    runtime: Runtime
    host: FakeCodeHost
    base: str
    github: Provider

    def browser(self) -> requests.Session:
        return requests.Session()

    def url(self, path: str) -> str:
        return self.base + path

    def sign_in(self, browser: requests.Session, username: str) -> None:
        page = browser.get(self.url("/sign-in"), timeout=10)
        form = {"username": username, "password": PASSWORD, "csrf_token": _csrf(page.text)}
        response = browser.post(self.url("/sign-in"), data=form, allow_redirects=False, timeout=10)
        assert response.status_code == 303, response.text

    def page(self, browser: requests.Session, path: str = "/settings/accounts") -> requests.Response:
        return browser.get(self.url(path), allow_redirects=False, timeout=10)

    def start_connect(self, browser: requests.Session, provider: Provider | None = None) -> str:
        """POST the Connect button; the provider's authorization URL it redirects to."""
        provider = provider or self.github
        form = {"csrf_token": _csrf(self.page(browser).text), "pc": provider.id}
        response = browser.post(self.url(f"/.auth/{provider.kind}/connect"), data=form, allow_redirects=False)
        assert response.status_code == 303, response.text
        return str(response.headers["location"])

    def callback(self, browser: requests.Session, authorize_url: str) -> requests.Response:
        """The provider approves at once; follow its redirect back to codewell's callback in `browser`."""
        approved = requests.get(authorize_url, allow_redirects=False, timeout=10)
        assert approved.status_code == 302, approved.text
        parts = urlsplit(approved.headers["location"])
        return browser.get(self.url(f"{parts.path}?{parts.query}"), allow_redirects=False, timeout=10)

    def connect(self, browser: requests.Session, provider: Provider | None = None) -> requests.Response:
        return self.callback(browser, self.start_connect(browser, provider))

    def disconnect(self, browser: requests.Session, identity_id: int, csrf: str | None = None) -> requests.Response:
        token = _csrf(self.page(browser).text) if csrf is None else csrf
        return browser.post(
            self.url(f"/settings/accounts/{identity_id}/disconnect"),
            data={"csrf_token": token},
            allow_redirects=False,
            timeout=10,
        )

    def identities(self, user: User) -> list[tuple[str, str]]:
        found = self.runtime.get(IdentityService).list_identities(INTERNAL, user.id)
        return [(i.kind, i.account_id) for i in found]

    def audit(self, action: str) -> list[Any]:
        return self.runtime.get(AuditService).list(INTERNAL, entity="auth.externalAccount", action=action)


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def _github(host: FakeCodeHost, **extra: object) -> dict[str, object]:
    return {"type": "github", "url": host.url, "clientID": host.client_id, "clientSecret": host.client_secret, **extra}


@pytest.fixture
def site(runtime: Runtime) -> Iterator[Site]:
    with FakeCodeHost() as host:
        set_site_config(runtime, {"auth.providers": [{"type": "builtin"}, _github(host)]})
        github = runtime.config.providers[1]
        with serve_app(runtime) as base:
            yield Site(runtime, host, base, github)


def test_connecting_github_while_signed_in_lists_it_without_its_token(site: Site) -> None:
    alice = make_user(site.runtime, "alice", password=PASSWORD, email="alice@corp.example")
    # Another e-mail at the host: only the explicit connection can link it to alice.
    site.host.add(HostUser(41, "alice-gh", "Alice", emails=[("alice@home.example", True)]))
    site.host.signed_in = "alice-gh"
    browser = site.browser()
    site.sign_in(browser, "alice")
    before = site.page(browser)
    assert before.status_code == 200
    assert "No linked accounts." in before.text
    assert f'value="{site.github.id}"' in before.text  # the Connect GitHub button
    session_cookie = browser.cookies.get("cw_session") or dict(browser.cookies)
    done = site.connect(browser)
    assert done.status_code == 303
    assert done.headers["location"] == "/settings/accounts?done=connected"
    assert site.identities(alice) == [("github", "41")]
    page = site.page(browser, done.headers["location"])
    assert "Account connected." in page.text
    assert "alice-gh" in page.text
    assert f'value="{site.github.id}"' not in page.text  # no Connect button for a linked provider
    for token in site.host.tokens:  # the access token the host issued is stored, never shown
        assert token not in page.text
    # The session is the one alice had: connecting does not sign in again.
    assert (browser.cookies.get("cw_session") or dict(browser.cookies)) == session_cookie
    (linked,) = site.audit("linked")
    assert linked.actor_username == "alice"
    assert linked.details["how"] == "connected"
    # And the identity now signs alice in (a new browser, through the sign-in flow).
    other = site.browser()
    start = other.get(
        site.url(f"/.auth/github/login?pc={site.github.id}&returnTo=/settings/accounts"), allow_redirects=False
    )
    signed = site.callback(other, start.headers["location"])
    assert signed.status_code == 303
    assert "alice-gh" in site.page(other).text


def test_disconnect_removes_the_identity_and_is_audited(site: Site) -> None:
    alice = make_user(site.runtime, "alice", password=PASSWORD, email="alice@corp.example")
    site.host.add(HostUser(42, "alice-gh", emails=[("alice@home.example", True)]))
    site.host.signed_in = "alice-gh"
    browser = site.browser()
    site.sign_in(browser, "alice")
    assert site.connect(browser).status_code == 303
    (identity,) = site.runtime.get(AuthService).list_identities(actor_of_user(site.runtime, alice))
    response = site.disconnect(browser, identity.id)
    assert response.status_code == 303
    assert response.headers["location"] == "/settings/accounts?done=disconnected"
    assert site.identities(alice) == []
    page = site.page(browser, response.headers["location"]).text
    assert "Account disconnected." in page
    assert "alice-gh" not in page
    assert f'value="{site.github.id}"' in page  # it may be connected again
    (entry,) = site.audit("unlinked")
    assert entry.actor_username == "alice"
    assert entry.details == {"provider": "github", "service": site.host.url, "accountID": "42"}


def test_the_last_way_to_sign_in_cannot_be_disconnected(site: Site) -> None:
    # An account without a password, signed in through GitHub (linked by its verified e-mail).
    bob = make_user(site.runtime, "bob", email="bob@corp.example")
    site.host.add(HostUser(43, "bob-gh", emails=[("bob@corp.example", True)]))
    site.host.signed_in = "bob-gh"
    browser = site.browser()
    start = browser.get(site.url(f"/.auth/github/login?pc={site.github.id}"), allow_redirects=False)
    assert site.callback(browser, start.headers["location"]).status_code == 303
    (identity,) = site.runtime.get(AuthService).list_identities(actor_of_user(site.runtime, bob))
    refused = site.disconnect(browser, identity.id)
    assert refused.status_code == 409
    assert LAST_SIGN_IN_METHOD in refused.text
    assert site.identities(bob) == [("github", "43")]
    assert site.audit("unlinked") == []
    # With a password (and the builtin provider on), GitHub is no longer the only way in.
    site.runtime.get(AccountService).set_password(INTERNAL, bob.id, PASSWORD)
    browser = site.browser()
    site.sign_in(browser, "bob")
    assert site.disconnect(browser, identity.id).status_code == 303
    assert site.identities(bob) == []


def test_a_password_does_not_count_when_password_sign_in_is_off(site: Site) -> None:
    carol = make_user(site.runtime, "carol", password=PASSWORD, email="carol@corp.example")
    site.host.add(HostUser(44, "carol-gh", emails=[("carol@corp.example", True)]))
    site.host.signed_in = "carol-gh"
    browser = site.browser()
    site.sign_in(browser, "carol")
    assert site.connect(browser).status_code == 303
    set_site_config(site.runtime, {"auth.providers": [_github(site.host)]})  # builtin removed
    (identity,) = site.runtime.get(AuthService).list_identities(actor_of_user(site.runtime, carol))
    refused = site.disconnect(browser, identity.id)
    assert refused.status_code == 409
    assert site.identities(carol) == [("github", "44")]


def test_someone_elses_identity_is_not_found(site: Site) -> None:
    make_user(site.runtime, "alice", password=PASSWORD, email="alice@corp.example")
    dave = make_user(site.runtime, "dave", password=PASSWORD, email="dave@corp.example")
    site.host.add(HostUser(45, "dave-gh", emails=[("dave@home.example", True)]))
    site.host.signed_in = "dave-gh"
    daves = site.browser()
    site.sign_in(daves, "dave")
    assert site.connect(daves).status_code == 303
    (identity,) = site.runtime.get(AuthService).list_identities(actor_of_user(site.runtime, dave))
    alices = site.browser()
    site.sign_in(alices, "alice")
    for identity_id in (identity.id, identity.id + 1000):  # dave's and a missing one answer alike
        response = site.disconnect(alices, identity_id)
        assert response.status_code == 404
        assert f"linked account {identity_id} not found" in response.text
        assert "dave" not in response.text
    assert site.identities(dave) == [("github", "45")]


def test_forms_without_the_csrf_token_are_refused(site: Site) -> None:
    erin = make_user(site.runtime, "erin", password=PASSWORD, email="erin@corp.example")
    site.host.add(HostUser(46, "erin-gh", emails=[("erin@home.example", True)]))
    site.host.signed_in = "erin-gh"
    browser = site.browser()
    site.sign_in(browser, "erin")
    refused = browser.post(
        site.url("/.auth/github/connect"), data={"pc": site.github.id, "csrf_token": "forged"}, allow_redirects=False
    )
    assert refused.status_code == 403
    assert "CSRF" in refused.text
    assert site.host.authorize_requests == []
    with site.runtime.db.session() as session:
        assert session.scalar(select(func.count()).select_from(AuthFlowRow)) == 0
    assert site.connect(browser).status_code == 303
    (identity,) = site.runtime.get(AuthService).list_identities(actor_of_user(site.runtime, erin))
    assert site.disconnect(browser, identity.id, csrf="").status_code == 403
    assert site.disconnect(browser, identity.id, csrf="forged").status_code == 403
    assert site.identities(erin) == [("github", "46")]


def test_a_connect_callback_is_bound_to_the_browser_and_the_user_who_started_it(site: Site) -> None:
    frank = make_user(site.runtime, "frank", password=PASSWORD, email="frank@corp.example")
    grace = make_user(site.runtime, "grace", password=PASSWORD, email="grace@corp.example")
    site.host.add(HostUser(47, "attacker-gh", emails=[("attacker@evil.example", True)]))
    site.host.signed_in = "attacker-gh"
    # Frank's callback URL opened in grace's browser: the state is bound to frank's browser.
    franks, graces = site.browser(), site.browser()
    site.sign_in(franks, "frank")
    site.sign_in(graces, "grace")
    stolen = site.callback(graces, site.start_connect(franks))
    assert stolen.status_code == 403
    # Same browser, but frank signed out and grace signed in before the provider came back.
    authorize = site.start_connect(franks)
    franks.post(site.url("/sign-out"), data={"csrf_token": _csrf(site.page(franks).text)}, allow_redirects=False)
    site.sign_in(franks, "grace")
    switched = site.callback(franks, authorize)
    assert switched.status_code == 403
    assert "no longer signed in as the user who started" in switched.text
    assert site.identities(frank) == []
    assert site.identities(grace) == []


def test_an_identity_linked_to_another_user_is_not_connected_again(site: Site) -> None:
    make_user(site.runtime, "heidi", password=PASSWORD, email="heidi@corp.example")
    ivan = make_user(site.runtime, "ivan", password=PASSWORD, email="ivan@corp.example")
    heidi = site.runtime.get(AccountService).get_by_username("heidi")
    site.host.add(HostUser(48, "shared-gh", emails=[("shared@home.example", True)]))
    site.host.signed_in = "shared-gh"
    heidis, ivans = site.browser(), site.browser()
    site.sign_in(heidis, "heidi")
    assert site.connect(heidis).status_code == 303
    site.sign_in(ivans, "ivan")
    refused = site.connect(ivans)
    assert refused.status_code == 409
    assert "already linked to another user" in refused.text
    assert "heidi" not in refused.text
    assert site.identities(heidi) == [("github", "48")]
    assert site.identities(ivan) == []


def test_no_sign_in_providers_can_be_connected_but_never_count_as_a_way_in(site: Site) -> None:
    set_site_config(
        site.runtime, {"auth.providers": [{"type": "builtin"}, _github(site.host, noSignIn=True, displayName="Corp")]}
    )
    judy = make_user(site.runtime, "judy", password=PASSWORD, email="judy@corp.example")
    site.host.add(HostUser(49, "judy-gh", emails=[("judy@corp.example", True)]))
    site.host.signed_in = "judy-gh"
    browser = site.browser()
    site.sign_in(browser, "judy")
    assert "Connect Corp" in site.page(browser).text
    assert site.connect(browser, site.runtime.config.providers[1]).status_code == 303
    page = site.page(browser).text
    assert "(not a sign-in method)" in page
    (identity,) = site.runtime.get(AuthService).list_identities(actor_of_user(site.runtime, judy))
    assert not identity.sign_in
    assert site.disconnect(browser, identity.id).status_code == 303


def test_an_openid_connect_account_is_connected_and_single_identity_per_user_holds(site: Site) -> None:
    client = {
        "client_id": "codewell",
        "client_secret": "codewell-secret",
        "redirect_uris": [f"{site.runtime.external_url}/.auth/callback"],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
    }
    accounts = {
        "work": {"email": "kim@work.example", "email_verified": True, "preferred_username": "kim"},
        "other": {"email": "kim2@work.example", "email_verified": True, "preferred_username": "kim2"},
    }
    with OpenIDProvider([client], accounts) as op:
        entry = {
            "type": "openidconnect",
            "issuer": op.issuer,
            "clientID": "codewell",
            "clientSecret": "codewell-secret",
        }
        set_site_config(
            site.runtime, {"auth.providers": [{"type": "builtin"}, {**entry, "singleIdentityPerUser": True}]}
        )
        provider = site.runtime.config.providers[1]
        kim = make_user(site.runtime, "kim", password=PASSWORD, email="kim@corp.example")
        browser = site.browser()
        site.sign_in(browser, "kim")

        def connect_as(account: str) -> requests.Response:
            op.login_as(account)
            callback = urlsplit(op.authorize(site.start_connect(browser, provider), site.runtime.external_url))
            return browser.get(site.url(f"{callback.path}?{callback.query}"), allow_redirects=False, timeout=10)

        assert connect_as("work").status_code == 303
        assert [kind for kind, _ in site.identities(kim)] == ["openidconnect"]
        assert "kim@work.example" in site.page(browser).text
        # A second identity at the same provider: singleIdentityPerUser refuses it (the button is gone too).
        assert f'value="{provider.id}"' not in site.page(browser).text
        refused = connect_as("other")
        assert refused.status_code == 403
        assert "already linked to another identity" in refused.text
        assert len(site.identities(kim)) == 1
