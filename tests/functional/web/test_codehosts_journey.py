"""A site admin connects a code host from the browser (issue #32, item 6): the add form, a mistake said at its
field, the test's checks, "Sync now" and the repositories it found; axe-core finds no serious or critical
violation on the page in any of those states, light and dark. The host is the loopback fake speaking GitHub's
REST API and serving git."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.browser import (
    axe_source,
    serious_violations,
    serve_app,
    signed_in_tab,
)
from tests.factories import make_user
from tests.fakes.codehosts import FakeCodeHost, FakeRepo, HostUser
from tests.gitfixtures import make_bare, make_repo

PASSWORD = "correct horse battery staple"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeCodeHost]:
    with FakeCodeHost() as fake:
        fake.add(HostUser(1, "svc", "Service"))
        fake.admins.add("svc")
        for repo_id, path, visibility in ((101, "acme/api", "public"), (102, "acme/billing", "private")):
            source = make_repo(tmp_path / "src" / path, {"README.md": f"# {path}\n"})
            git_dir = make_bare(tmp_path / "served" / f"{path.replace('/', '_')}.git", source)
            fake.add_repo(FakeRepo(repo_id, path, visibility=visibility, git_dir=git_dir))
        yield fake


@pytest.fixture
def site(runtime: Runtime, host: FakeCodeHost) -> Iterator[str]:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    with serve_app(runtime) as url:
        yield url


def _no_violations(tab: Page, axe: str, found: dict[str, list[str]], state: str) -> None:
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        bad = serious_violations(tab, axe)
        if bad:
            found[f"{state}, {scheme}"] = bad


@pytest.mark.browser
def test_a_site_admin_connects_tests_and_syncs_a_code_host(runtime: Runtime, host: FakeCodeHost, site: str) -> None:
    token = host.pat("svc")
    host.token_scopes[token] = "repo, read:org"
    axe = axe_source()
    found: dict[str, list[str]] = {}
    with signed_in_tab(site, "root", PASSWORD) as (tab, console):
        tab.goto(f"{site}/site-admin/code-hosts")
        expect(tab.locator("#no-codehosts")).to_be_visible()
        _no_violations(tab, axe, found, "empty")

        # A Gerrit connection without its username: refused, said at the field, the token not sent back.
        tab.select_option("#ch-kind", "gerrit")
        tab.fill("#ch-id", "review")
        tab.fill("#ch-url", host.url)
        tab.fill("#ch-token", token)
        with tab.expect_navigation():
            tab.click("#new-codehost button[type=submit]")
        expect(tab.locator("p.error[role=alert]")).to_contain_text("username is required for kind gerrit")
        expect(tab.locator("#ch-id")).to_have_value("review")
        expect(tab.locator("#ch-token")).to_have_value("")
        _no_violations(tab, axe, found, "refused")

        tab.select_option("#ch-kind", "github")
        tab.fill("#ch-id", "acme")
        tab.fill("#ch-name", "Acme GitHub")
        tab.fill("#ch-token", token)
        tab.fill("#ch-scopes", "acme")
        with tab.expect_navigation():
            tab.click("#new-codehost button[type=submit]")
        expect(tab.locator("#codehosts-notice")).to_contain_text("Added Acme GitHub")
        row = tab.locator('tr[data-connection="acme"]')
        expect(row).to_contain_text("0 found")

        with tab.expect_navigation():
            tab.click("button[aria-label='Test Acme GitHub']")
        probe = tab.locator("#codehost-probe")
        expect(probe).to_have_attribute("data-ok", "true")
        expect(probe.locator("[data-check='token accepted']")).to_contain_text("signed in as svc")
        expect(probe.locator("[data-check='scopes']")).to_contain_text("read:org, repo")
        expect(probe.locator("[data-check='repositories']")).to_contain_text(
            "2 visible (1 private): acme/api, acme/billing"
        )
        _no_violations(tab, axe, found, "tested")
        assert runtime.get(RepoService).all_repos(INTERNAL) == []  # the test registered nothing

        with tab.expect_navigation():
            tab.click("button[aria-label='Sync Acme GitHub now']")
        expect(tab.locator("#codehosts-notice")).to_contain_text("Synced Acme GitHub")
        expect(tab.locator('tr[data-connection="acme"] [data-field="repos-found"]')).to_have_text("2 found")
        _no_violations(tab, axe, found, "synced")
        names = sorted(r.name for r in runtime.get(RepoService).all_repos(INTERNAL))
        assert names == ["127.0.0.1/acme/api", "127.0.0.1/acme/billing"]

        # Remove: the offer says what happens to the two repositories; removing them too is a choice.
        remove = tab.locator('tr[data-connection="acme"] [data-field="remove"]')
        remove.locator("summary").click()
        expect(remove).to_contain_text("2 repositories registered by Acme GitHub")
        _no_violations(tab, axe, found, "remove offered")
        remove.get_by_label("Remove them too").check()
        with tab.expect_navigation():
            tab.click("button[aria-label='Remove connection Acme GitHub']")
        expect(tab.locator("#codehosts-notice")).to_have_text(
            "Removed the connection acme. Its 2 repositories were removed too."
        )
        expect(tab.locator("#no-codehosts")).to_be_visible()
        _no_violations(tab, axe, found, "removed")
        assert runtime.get(RepoService).all_repos(INTERNAL) == []
        assert found == {}
        assert [m for m in console if "Content Security Policy" in m] == []
