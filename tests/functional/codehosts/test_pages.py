"""The code host pages over real HTTP (the app served on loopback, session sign-in with a password, forms with
their CSRF token): `/site-admin/code-hosts` with "Sync now", `/settings/code-hosts` with the user's own status,
and disconnecting a linked account taking its synced permissions away at once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from codewell.accounts.audit import AuditService
from codewell.accounts.service import User
from codewell.auth.identities import IdentityService
from codewell.config.providers import Provider
from codewell.core.actors import INTERNAL
from codewell.licensing.plans import TRIAL_DAYS
from codewell.runtime import Runtime
from tests.browser import serve_app
from tests.factories import actor_of_user, make_user, set_site_config
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import TOKEN_ENV, add_repo, connect, visible
from tests.unit.licensing.testkeys import Clock, licensing

PASSWORD = "correct horse battery staple"
AFTER_TRIAL = timedelta(days=TRIAL_DAYS, minutes=1)


@dataclass
class Site:
    runtime: Runtime
    host: FakeCodeHost
    base: str
    alice: User

    def url(self, path: str) -> str:
        return self.base + path

    def get(self, browser: requests.Session, path: str) -> requests.Response:
        return browser.get(self.url(path), allow_redirects=False, timeout=30)

    def post(self, browser: requests.Session, path: str, csrf_from: str | None) -> requests.Response:
        data = {"csrf_token": _csrf(self.get(browser, csrf_from).text)} if csrf_from else {}
        return browser.post(self.url(path), data=data, allow_redirects=False, timeout=30)

    def sign_in(self, username: str) -> requests.Session:
        browser = requests.Session()
        page = browser.get(self.url("/sign-in"), timeout=10)
        form = {"username": username, "password": PASSWORD, "csrf_token": _csrf(page.text)}
        response = browser.post(self.url("/sign-in"), data=form, allow_redirects=False, timeout=10)
        assert response.status_code == 303, response.text
        return browser

    def github(self) -> Provider:
        return next(p for p in self.runtime.config.providers if p.kind == "github")

    def connect_github(self, browser: requests.Session, login: str) -> None:
        """Connect the host account `login` from /settings/accounts (the host approves at once)."""
        self.host.signed_in = login
        form = {"csrf_token": _csrf(self.get(browser, "/settings/accounts").text), "pc": self.github().id}
        start = browser.post(self.url("/.auth/github/connect"), data=form, allow_redirects=False, timeout=10)
        assert start.status_code == 303, start.text
        approved = requests.get(start.headers["location"], allow_redirects=False, timeout=10)
        assert approved.status_code == 302, approved.text
        parts = urlsplit(approved.headers["location"])
        done = browser.get(self.url(f"{parts.path}?{parts.query}"), allow_redirects=False, timeout=30)
        assert done.status_code == 303, done.text


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def _row(html: str, connection_id: str) -> str:
    match = re.search(rf'<tr data-connection="{connection_id}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {connection_id}"
    return re.sub(r"\s+", " ", match.group(1))


@pytest.fixture
def site(runtime: Runtime, host: FakeCodeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    host.add(HostUser(11, "alice-gh", "Alice", emails=[("alice@home.example", True)]))
    add_repo(host, tmp_path, 101, "acme/public", visibility="public")
    add_repo(host, tmp_path, 102, "acme/secret", visibility="private", members={"alice-gh": 30})
    add_repo(host, None, 201, "locked/hidden", visibility="private", members={"alice-gh": 30})
    host.restricted_orgs.add("locked")
    connect(runtime, host, monkeypatch, orgs=["acme", "locked"])
    make_user(runtime, "root", password=PASSWORD, site_admin=True, email="root@corp.example")
    alice = make_user(runtime, "alice", password=PASSWORD, email="alice@corp.example")
    with serve_app(runtime) as base:
        yield Site(runtime, host, base, alice)


def test_admin_page_shows_each_connection_and_sync_now_runs_it(site: Site) -> None:
    root = site.sign_in("root")
    before = site.get(root, "/site-admin/code-hosts")
    assert before.status_code == 200
    assert 'href="/site-admin/code-hosts" aria-current="page"' in before.text  # the admin nav links the page
    row = _row(before.text, "main")
    assert "github" in row
    assert site.host.url in row
    assert "last sync: —" in row  # never synced yet
    assert "0 found" in row
    # Where to point the host's push webhooks; off until the connection has a secret.
    webhook = f"push webhooks: <code>{site.runtime.external_url}/.api/webhooks/github</code>"
    assert webhook in row
    assert "(off: no webhookSecretEnv or webhookSecretFile)" in row

    done = site.post(root, "/site-admin/code-hosts/main/sync", csrf_from="/site-admin/code-hosts")
    assert done.status_code == 303
    assert done.headers["location"] == "/site-admin/code-hosts?done=synced&id=main"
    after = site.get(root, done.headers["location"])
    assert "Synced " in after.text
    row = _row(after.text, "main")
    assert "3 found" in row
    assert "last sync: —" not in row
    assert "last success: —" not in row
    assert "next sync: —" not in row
    assert "on<br>last synced: 20" in row  # permission sync on, and when it last ran

    # A host that is down: the sync fails, the page says so and shows the error; nothing is lost.
    site.host.down = True
    failed = site.post(root, "/site-admin/code-hosts/main/sync", csrf_from="/site-admin/code-hosts")
    assert failed.headers["location"] == "/site-admin/code-hosts?done=failed&id=main"
    page = site.get(root, failed.headers["location"])
    assert "failed" in page.text
    assert 'data-field="error">error: ' in _row(page.text, "main")
    assert "3 found" in _row(page.text, "main")

    # The notice is a fixed text: nothing from the URL is shown.
    forged = site.get(root, "/site-admin/code-hosts?done=<b>pwned</b>&id=main")
    assert "pwned" not in forged.text


def test_admin_page_refusals(site: Site) -> None:
    alice = site.sign_in("alice")
    assert site.get(alice, "/site-admin/code-hosts").status_code == 403
    refused = site.post(alice, "/site-admin/code-hosts/main/sync", csrf_from="/settings")
    assert refused.status_code == 403
    anonymous = site.get(requests.Session(), "/site-admin/code-hosts")
    assert anonymous.status_code in (302, 303, 401)
    root = site.sign_in("root")
    assert site.post(root, "/site-admin/code-hosts/main/sync", csrf_from=None).status_code == 403  # no CSRF token
    missing = site.post(root, "/site-admin/code-hosts/nope/sync", csrf_from="/site-admin/code-hosts")
    assert missing.status_code == 404
    # Nothing was synced by the refused requests.
    assert "0 found" in _row(site.get(root, "/site-admin/code-hosts").text, "main")


def test_admin_page_says_why_permission_sync_is_off(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    root = site.sign_in("root")
    clock = Clock()
    licensing(site.runtime, clock)
    clock.offset = AFTER_TRIAL  # the trial ended: the Free plan has no permission sync
    row = _row(site.get(root, "/site-admin/code-hosts").text, "main")
    assert "the license plan does not include permission sync (permission-sync)" in row
    monkeypatch.setenv(TOKEN_ENV, site.host.pat("svc"))
    connection = {"id": "main", "kind": "github", "url": site.host.url, "tokenEnv": TOKEN_ENV, "authorization": False}
    set_site_config(site.runtime, {"codeHostConnections": [connection]})
    row = _row(site.get(root, "/site-admin/code-hosts").text, "main")
    assert "off: authorization is false in the connection config" in row


def test_user_status_page_sync_now_and_disconnect_revokes_at_once(site: Site) -> None:
    runtime = site.runtime
    root = site.sign_in("root")
    site.post(root, "/site-admin/code-hosts/main/sync", csrf_from="/site-admin/code-hosts")
    alice_user = site.alice
    alice_actor = actor_of_user(runtime, alice_user)
    browser = site.sign_in("alice")

    page = site.get(browser, "/settings/code-hosts")
    assert page.status_code == 200
    assert "no linked account" in _row(page.text, "main")
    assert visible(runtime, alice_actor) == {"acme/public"}

    site.connect_github(browser, "alice-gh")
    # Linking synced her at once: the private repository she reads upstream is visible.
    assert visible(runtime, alice_actor) == {"acme/public", "acme/secret"}
    row = _row(site.get(browser, "/settings/code-hosts").text, "main")
    assert "last synced 20" in row
    assert "1 private repositories" in row
    assert "org locked" in row  # why the restricted org's repository is not there

    # "Sync now" after a change upstream: the new grant shows at once.
    add_repo(site.host, None, 103, "acme/another", visibility="private", members={"alice-gh": 30})
    site.post(root, "/site-admin/code-hosts/main/sync", csrf_from="/site-admin/code-hosts")
    site.host.repos["acme/another"].members.clear()
    site.post(root, "/site-admin/code-hosts/main/sync", csrf_from="/site-admin/code-hosts")
    assert visible(runtime, alice_actor) == {"acme/public", "acme/secret"}
    site.host.repos["acme/another"].members["alice-gh"] = 30
    synced = site.post(browser, "/settings/code-hosts/sync", csrf_from="/settings/code-hosts")
    assert synced.status_code == 303
    assert synced.headers["location"] == "/settings/code-hosts?done=synced"
    page = site.get(browser, synced.headers["location"])
    assert "were synced" in page.text
    assert "2 private repositories" in _row(page.text, "main")
    assert visible(runtime, alice_actor) == {"acme/public", "acme/secret", "acme/another"}
    assert site.post(browser, "/settings/code-hosts/sync", csrf_from=None).status_code == 403  # no CSRF token

    # Disconnect: the repositories it granted are gone immediately, not at the next sync.
    assert "127.0.0.1/acme/secret" in browser.get(site.url("/.api/repos"), timeout=10).text
    (identity,) = runtime.get(IdentityService).list_identities(INTERNAL, alice_user.id)
    gone = site.post(browser, f"/settings/accounts/{identity.id}/disconnect", csrf_from="/settings/accounts")
    assert gone.status_code == 303, gone.text
    assert visible(runtime, alice_actor) == {"acme/public"}
    listing = browser.get(site.url("/.api/repos"), timeout=10)
    assert listing.status_code == 200
    assert "127.0.0.1/acme/public" in listing.text
    assert "acme/secret" not in listing.text
    assert "no linked account" in _row(site.get(browser, "/settings/code-hosts").text, "main")
    (cleared,) = runtime.get(AuditService).list(INTERNAL, entity="codehosts.permissions", action="cleared")
    assert cleared.details == {"connection": "main", "userID": alice_user.id}


def test_user_page_refusals(site: Site) -> None:
    assert site.get(requests.Session(), "/settings/code-hosts").status_code in (302, 303, 401)
    anonymous = requests.Session().post(site.url("/settings/code-hosts/sync"), allow_redirects=False, timeout=10)
    assert anonymous.status_code in (302, 303, 401, 403)
