"""Code host connections set up from the site-admin page over real HTTP (issue #32, item 6): a site admin adds a
connection with a form (the token goes to a 0600 file, never into the site config), tests it against the host's
API (token, identity, scopes, repositories visible: nothing registered) and syncs it; mistakes are refused with
what to fix and leave nothing behind. The host is the loopback fake speaking GitHub's and GitLab's REST APIs."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5
import pytest
import requests

from codewell.codehosts.connections import ConnectionService, NewConnection
from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests import cliprocess
from tests.browser import serve_app
from tests.factories import make_user
from tests.fakes.codehosts import FakeCodeHost
from tests.functional.codehosts.conftest import add_repo

PASSWORD = "correct horse battery staple"
PAGE = "/site-admin/code-hosts"


@dataclass
class Site:
    runtime: Runtime
    host: FakeCodeHost
    base: str

    def sign_in(self, username: str) -> requests.Session:
        browser = requests.Session()
        page = browser.get(self.base + "/sign-in", timeout=10)
        form = {"username": username, "password": PASSWORD, "csrf_token": _csrf(page.text)}
        response = browser.post(self.base + "/sign-in", data=form, allow_redirects=False, timeout=10)
        assert response.status_code == 303, response.text
        return browser

    def post(self, browser: requests.Session, path: str, form: dict[str, str] | None = None) -> requests.Response:
        data = {"csrf_token": _csrf(browser.get(self.base + "/settings", timeout=30).text), **(form or {})}
        return browser.post(self.base + path, data=data, allow_redirects=False, timeout=60)

    def entries(self) -> list[dict[str, object]]:
        data = json5.loads(self.runtime.site_config.path.read_text())
        return list(data.get("codeHostConnections", []))


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def _checks(html: str) -> dict[str, str]:
    """The probe's lines by check name: "works ...", "fails ..." or "note ..." with the detail."""
    found = re.findall(r'<li data-check="([^"]+)"><strong[^>]*>(\w+)</strong> [^:]+: (.*?)</li>', html, re.S)
    return {name: outcome + " " + " ".join(detail.split()) for name, outcome, detail in found}


@pytest.fixture
def site(runtime: Runtime, host: FakeCodeHost, tmp_path: Path) -> Iterator[Site]:
    add_repo(host, tmp_path, 101, "acme/public", visibility="public")
    add_repo(host, tmp_path, 102, "acme/secret", visibility="private")
    add_repo(host, None, 301, "other/elsewhere", visibility="private")
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    make_user(runtime, "alice", password=PASSWORD)
    with serve_app(runtime) as base:
        yield Site(runtime, host, base)


def test_an_admin_adds_tests_and_syncs_a_connection_from_the_page(site: Site) -> None:
    root = site.sign_in("root")
    token = site.host.pat("svc")
    site.host.token_scopes[token] = "repo, read:org"
    form = {"kind": "github", "id": "acme-gh", "url": site.host.url, "token": token, "scopes": "acme\n"}
    created = site.post(root, PAGE, form)
    assert created.status_code == 303, created.text
    assert created.headers["location"] == f"{PAGE}?done=created&id=acme-gh"

    # The site config names a 0600 file holding the token; the token itself is nowhere in the config.
    [entry] = site.entries()
    token_file = Path(str(entry["tokenFile"]))
    assert entry == {
        "id": "acme-gh",
        "kind": "github",
        "url": site.host.url,
        "tokenFile": str(token_file),
        "orgs": ["acme"],
    }
    assert token not in site.runtime.site_config.path.read_text()
    assert token_file.read_text().strip() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.parent == site.runtime.settings.shared_dir / "codehosts"
    assert [c.id for c in site.runtime.config.code_host_connections] == ["acme-gh"]  # reloaded at once
    page = root.get(site.base + created.headers["location"], timeout=30)
    assert "Added acme-gh" in page.text
    assert '<tr data-connection="acme-gh">' in page.text

    # Test: every check passes, the organization's repositories are listed, nothing is registered.
    tested = site.post(root, f"{PAGE}/acme-gh/test")
    assert tested.status_code == 200
    checks = _checks(tested.text)
    assert checks["token"] == "works read from tokenFile"
    assert checks["token accepted"] == "works signed in as svc"
    assert checks["scopes"] == "works read:org, repo"
    assert checks["repositories"] == "works 2 visible (1 private): acme/public, acme/secret"
    assert checks["permission sync"].startswith("note off: authorization is false")
    assert 'data-ok="true"' in tested.text
    assert site.runtime.get(RepoService).all_repos(INTERNAL) == []

    # Sync now registers what the test listed.
    synced = site.post(root, f"{PAGE}/acme-gh/sync")
    assert synced.headers["location"] == f"{PAGE}?done=synced&id=acme-gh"
    names = sorted(r.name for r in site.runtime.get(RepoService).all_repos(INTERNAL))
    assert names == ["127.0.0.1/acme/public", "127.0.0.1/acme/secret"]

    # The same probe over REST, for scripts.
    rest = root.post(
        f"{site.base}/.api/codehosts/acme-gh/test",
        headers={"X-CSRF-Token": _csrf(root.get(site.base + PAGE, timeout=30).text)},
        timeout=30,
    )
    assert rest.status_code == 200, rest.text
    body = rest.json()
    assert body["ok"] is True
    assert [c["name"] for c in body["checks"]] == [
        "token",
        "token accepted",
        "scopes",
        "repositories",
        "permission sync",
    ]


def test_the_test_says_what_does_not_work(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    root = site.sign_in("root")
    narrow = site.host.pat("svc")
    site.host.token_scopes[narrow] = "repo"
    monkeypatch.setenv("ACME_TOKEN", narrow)
    form = {"kind": "github", "id": "narrow", "url": site.host.url, "tokenEnv": "ACME_TOKEN", "scopes": "acme\nghost"}
    assert site.post(root, PAGE, form).status_code == 303
    checks = _checks(site.post(root, f"{PAGE}/narrow/test").text)
    assert checks["token"] == "works read from tokenEnv ACME_TOKEN"
    assert checks["scopes"] == "fails repo; missing read:org: private repositories or organizations may not be listed"
    assert checks["repositories"].startswith(
        "fails 2 visible (1 private): acme/public, acme/secret; not listed: org ghost:"
    )
    assert "404" in checks["repositories"]

    # A token the host refuses: said plainly, with what to check; the probe stops there.
    monkeypatch.setenv("ACME_TOKEN", "pat-revoked")
    page = site.post(root, f"{PAGE}/narrow/test")
    checks = _checks(page.text)
    assert checks["token accepted"].startswith("fails ")
    assert "refused the token (401)" in checks["token accepted"]
    assert "check the token and the URL" in checks["token accepted"]
    assert "repositories" not in checks
    assert 'data-ok="false"' in page.text
    assert "pat-revoked" not in page.text

    # An unset variable: the first check fails and says which variable.
    monkeypatch.delenv("ACME_TOKEN")
    checks = _checks(site.post(root, f"{PAGE}/narrow/test").text)
    assert checks == {"token": "fails environment variable ACME_TOKEN (tokenEnv) is not set"}


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"kind": "github", "id": "Bad ID", "token": "t"}, "id: must be 1-40 lowercase letters, digits, - or _"),
        ({"kind": "github", "id": "gh"}, "token: paste the token, or name the environment variable"),
        ({"kind": "github", "id": "gh", "token": "t", "tokenEnv": "X"}, "token: paste the token, or name"),
        ({"kind": "gerrit", "id": "gr", "url": "https://review.example.com/", "token": "t"}, "username is required"),
        ({"kind": "gerrit", "id": "gr", "token": "t", "username": "u"}, "url is required for kind gerrit"),
        ({"kind": "github", "id": "gh", "url": "ftp://x", "token": "t"}, "url must be an absolute http:// or https://"),
        ({"kind": "svn", "id": "gh", "token": "t"}, "kind: choose one of github, gitlab"),
        ({"kind": "github", "id": "gh", "tokenEnv": "NOT-A-NAME"}, "tokenEnv: String should match pattern"),
    ],
)
def test_mistakes_are_refused_with_what_to_fix_and_leave_nothing(
    site: Site, form: dict[str, str], message: str
) -> None:
    root = site.sign_in("root")
    before = site.runtime.site_config.path.read_text()
    refused = site.post(root, PAGE, form)
    assert refused.status_code == 400
    assert message in refused.text.replace("&#39;", "'")
    assert site.runtime.site_config.path.read_text() == before
    assert not (site.runtime.settings.shared_dir / "codehosts").exists()
    # The form keeps what was typed, except the token.
    assert f'value="{form["id"]}"' in refused.text
    if form.get("token"):
        assert 'name="token" autocomplete="off" value=""' in refused.text


def test_an_existing_id_is_refused_and_only_admins_may_add_or_test(site: Site) -> None:
    root = site.sign_in("root")
    form = {"kind": "gitlab", "id": "lab", "url": site.host.url, "token": site.host.pat("svc")}
    assert site.post(root, PAGE, form).status_code == 303
    again = site.post(root, PAGE, {**form, "token": "other"})
    assert again.status_code == 400
    assert "a connection named &#39;lab&#39; exists already" in again.text
    assert (site.runtime.settings.shared_dir / "codehosts" / "lab.token").read_text().strip() == form["token"]
    # GitLab's API reports the user but, on this host, not the token's scopes.
    checks = _checks(site.post(root, f"{PAGE}/lab/test").text)
    assert checks["token accepted"] == "works signed in as svc"
    assert checks["scopes"] == "note not reported for this token (a fine-grained or project token)"

    alice = site.sign_in("alice")
    assert site.post(alice, PAGE, {**form, "id": "mine"}).status_code == 403
    assert site.post(alice, f"{PAGE}/lab/test").status_code == 403
    assert [e["id"] for e in site.entries()] == ["lab"]
    assert site.post(root, f"{PAGE}/nope/test").status_code == 404
    assert json.loads(site.runtime.site_config.path.read_text())  # still valid JSON


@pytest.mark.parametrize(
    ("kind", "fields", "token"),
    [
        ("bitbucketcloud", {"username": "svc", "scopes": ("ws",)}, "pat"),
        ("bitbucketserver", {"scopes": ("ws",)}, "pat"),
        ("gerrit", {"username": "svc"}, "svc-http"),  # Gerrit takes the account's HTTP password
    ],
)
def test_the_other_hosts_are_probed_through_their_own_apis(
    runtime: Runtime, host: FakeCodeHost, tmp_path: Path, kind: str, fields: dict[str, Any], token: str
) -> None:
    host.users["svc"].http_password = "svc-http"
    add_repo(host, tmp_path, 501, "ws/shared", visibility="public")
    add_repo(host, tmp_path, 502, "ws/secret", visibility="private")
    secret = host.pat("svc") if token == "pat" else token
    connections = runtime.get(ConnectionService)
    connections.add(INTERNAL, NewConnection(id="other", kind=kind, url=host.url, token=secret, **fields))
    probe = connections.test(INTERNAL, "other")
    checks = {c.name: (c.ok, c.detail) for c in probe.checks}
    assert checks["token accepted"] == (True, "signed in as svc")
    assert checks["scopes"][0] is None  # these hosts do not say
    assert checks["repositories"][0] is True
    assert checks["repositories"][1].startswith("2 visible (")  # Gerrit's projects all count as private
    assert "ws/shared" in checks["repositories"][1]
    assert probe.ok
    assert runtime.get(RepoService).all_repos(INTERNAL) == []

    # A wrong secret: refused by the host, said as such.
    Path(str(runtime.config.code_host_connections[0].token_file)).write_text("wrong\n")
    refused = {c.name: c for c in connections.test(INTERNAL, "other").checks}
    assert refused["token accepted"].ok is False
    assert "check the token and the URL" in refused["token accepted"].detail


def test_codewell_codehosts_test_prints_each_check_and_fails_when_one_fails(
    tmp_path: Path, database_url: str, host: FakeCodeHost
) -> None:
    add_repo(host, None, 1, "acme/one", visibility="public")
    token_file = tmp_path / "token"
    env = _cli_env(tmp_path, database_url, host, token_file)
    shown = cliprocess.run("codehosts", "test", "gh", env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "works token: read from tokenFile",
        "works token accepted: signed in as svc",
        "note  scopes: not reported for this token (a fine-grained or project token)",
        "works repositories: 1 visible (0 private): acme/one",
        "note  permission sync: off: authorization is false (only site admins and grants)",
    ]
    as_json = cliprocess.run("codehosts", "test", "gh", "--json", env=env, timeout=120)
    assert json.loads(as_json.stdout)["ok"] is True
    token_file.unlink()
    failed = cliprocess.run("codehosts", "test", "gh", env=env, timeout=120)
    assert failed.returncode == 1
    assert failed.stdout.startswith("fails token: cannot read tokenFile")
    assert "error: gh: something does not work" in failed.stderr


def test_an_admin_removes_a_connection_keeping_or_removing_its_repositories(site: Site) -> None:
    """Remove says how many repositories the connection registered; by default they stay registered (and
    searchable), the config entry, the token file the form wrote and the connection's synced grants go; asked
    to, its repositories are removed too."""
    root = site.sign_in("root")
    form = {"kind": "github", "id": "acme-gh", "url": site.host.url, "token": site.host.pat("svc"), "scopes": "acme"}
    assert site.post(root, PAGE, form).status_code == 303
    assert site.post(root, f"{PAGE}/acme-gh/sync").status_code == 303
    token_file = site.runtime.settings.shared_dir / "codehosts" / "acme-gh.token"
    assert token_file.exists()
    repos = site.runtime.get(RepoService)
    names = ["127.0.0.1/acme/public", "127.0.0.1/acme/secret"]
    assert sorted(r.name for r in repos.all_repos(INTERNAL)) == names

    page = root.get(site.base + PAGE, timeout=30).text
    # The page's title is the title (it once swallowed the add form, CSRF token included).
    assert re.search(r"<title>Code hosts · site admin[^<]*</title>", page), page[:400]
    details = re.search(r'<details class="remove-connection".*?</details>', page, re.S)
    assert details, page
    offer = " ".join(details.group(0).split())
    listed = "2 repositories registered by acme-gh (127.0.0.1/acme/public, 127.0.0.1/acme/secret)"
    assert f"{listed} stay registered" in offer
    assert 'name="repos" value="remove"' in offer

    # Not for others; an unknown connection is a 404; nothing changed.
    alice = site.sign_in("alice")
    assert site.post(alice, f"{PAGE}/acme-gh/remove").status_code == 403
    assert site.post(root, f"{PAGE}/nope/remove").status_code == 404
    assert [e["id"] for e in site.entries()] == ["acme-gh"]

    removed = site.post(root, f"{PAGE}/acme-gh/remove", {"repos": "keep"})
    assert removed.status_code == 303, removed.text
    assert removed.headers["location"] == f"{PAGE}?done=removed&id=acme-gh&kept=2&removed=0"
    assert site.entries() == []
    assert site.runtime.config.code_host_connections == []  # reloaded at once
    assert not token_file.exists()
    assert sorted(r.name for r in repos.all_repos(INTERNAL)) == names
    shown = root.get(site.base + removed.headers["location"], timeout=30).text
    assert "Removed the connection acme-gh. Its 2 repositories stay registered and searchable" in shown
    assert '<tr data-connection="acme-gh">' not in shown
    # A forged notice shows nothing taken from the address.
    forged = root.get(site.base + PAGE, params={"done": "removed", "id": "<b>x", "kept": "1", "removed": "0"}).text
    assert "Removed the connection" not in forged

    # Added again under the same ID (it finds its repositories registered by the old source): remove them too.
    for name in names:
        repos.remove_repo(INTERNAL, name)
    assert site.post(root, PAGE, form).status_code == 303
    assert site.post(root, f"{PAGE}/acme-gh/sync").status_code == 303
    assert len(repos.all_repos(INTERNAL)) == 2
    removed = site.post(root, f"{PAGE}/acme-gh/remove", {"repos": "remove"})
    assert removed.headers["location"] == f"{PAGE}?done=removed&id=acme-gh&kept=0&removed=2"
    assert repos.all_repos(INTERNAL) == []
    assert site.entries() == []
    assert "Its 2 repositories were removed too." in root.get(site.base + removed.headers["location"]).text


def test_codewell_codehosts_remove_keeps_or_removes_the_repositories(
    tmp_path: Path, database_url: str, host: FakeCodeHost
) -> None:
    add_repo(host, tmp_path, 1, "acme/one", visibility="public")
    token_file = tmp_path / "token"  # written by hand: never deleted by a removal
    env = _cli_env(tmp_path, database_url, host, token_file)
    config = Path(env["CODEWELL_SITE_CONFIG"])
    with_connection = config.read_text()
    assert cliprocess.run("codehosts", "sync", "gh", env=env, timeout=120).returncode == 0
    removed = cliprocess.run("codehosts", "remove", "gh", "--json", env=env, timeout=120)
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout) == {"id": "gh", "label": "gh", "kept": ["127.0.0.1/acme/one"], "removed": []}
    assert json.loads(config.read_text())["codeHostConnections"] == []
    assert token_file.exists()
    listed = cliprocess.run("repos", "list", "--json", env=env, timeout=120)
    assert [r["name"] for r in json.loads(listed.stdout)["repos"]] == ["127.0.0.1/acme/one"]
    again = cliprocess.run("codehosts", "remove", "gh", env=env, timeout=120)
    assert again.returncode != 0
    assert "gh" in again.stderr

    # Added back and removed with its repositories.
    config.write_text(with_connection)
    cliprocess.run("repos", "remove", "127.0.0.1/acme/one", env=env, timeout=120)
    assert cliprocess.run("codehosts", "sync", "gh", env=env, timeout=120).returncode == 0
    gone = cliprocess.run("codehosts", "remove", "gh", "--remove-repos", env=env, timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.splitlines() == ["removed the connection gh", "its 1 repositories were removed too"]
    assert json.loads(cliprocess.run("repos", "list", "--json", env=env, timeout=120).stdout)["repos"] == []


def _cli_env(tmp_path: Path, database_url: str, host: FakeCodeHost, token_file: Path) -> dict[str, str]:
    """The environment of a `codewell codehosts ...` process whose site config holds one GitHub connection `gh`
    (org acme) reading the service user's token from `token_file` (written here)."""
    token_file.write_text(host.pat("svc") + "\n")
    config = tmp_path / "site.json"
    connection = {"id": "gh", "kind": "github", "url": host.url, "tokenFile": str(token_file), "orgs": ["acme"]}
    config.write_text(json.dumps({"codeHostConnections": [connection]}))
    return {
        **os.environ,
        "CODEWELL_DATA_DIR": str(tmp_path / "data"),
        "CODEWELL_SITE_CONFIG": str(config),
        "CODEWELL_DATABASE_URL": database_url,
    }
