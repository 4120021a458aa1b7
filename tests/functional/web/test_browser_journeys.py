"""Journeys in a real browser (Debian's chromium through Playwright, the app over real HTTP): the `/` shortcut
and htmx search suggestions under the page's CSP, and reading history from a file view. (axe-core on every page,
light and dark: test_every_page_accessible.py.) Screenshots go to tests/.artifacts/ (git-ignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import ARTIFACTS, serve_app, signed_in_tab
from tests.factories import make_user
from tests.gitfixtures import commit, make_repo, register_local_repo

PASSWORD = "correct horse battery staple"


@pytest.fixture
def site(runtime: Runtime, tmp_path: Path) -> Iterator[str]:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    path = make_repo(tmp_path / "app", {"app/main.py": "def helper(x):\n    return x * 2\n", "README.md": "# app\n"})
    commit(path, {"app/main.py": "def helper(x):\n    return x * 3\n"}, message="triple the helper")
    register_local_repo(runtime, path, "acme/app")
    runtime.get(SearchService).index_repo(INTERNAL, "acme/app")
    with serve_app(runtime) as url:
        yield url


@pytest.fixture
def page(site: str) -> Iterator[tuple[Page, list[str]]]:
    with signed_in_tab(site, "root", PASSWORD) as (tab, console):
        yield tab, console


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-{name}.png"), full_page=True)


@pytest.mark.browser
def test_slash_focuses_search_and_htmx_suggests_filters_under_the_csp(site: str, page: tuple[Page, list[str]]) -> None:
    tab, console = page
    tab.goto(f"{site}/acme/app/-/blob/app/main.py")
    tab.keyboard.press("/")
    assert tab.evaluate("document.activeElement.id") == "nav-q"
    tab.goto(f"{site}/")
    tab.click("h1")  # away from the autofocused box: the shortcut brings focus back
    tab.keyboard.press("/")
    assert tab.evaluate("document.activeElement.id") == "q"
    tab.keyboard.type("helper repo:acm")
    tab.wait_for_selector("#suggestions a:has-text('acme/app')")
    suggestion = tab.locator("#suggestions a").first
    assert suggestion.inner_text() == "repo:^acme/app$"
    _shot(tab, "suggestions")
    with tab.expect_navigation():
        suggestion.click()
    assert tab.locator("section.result").count() == 1
    assert [m for m in console if "Content Security Policy" in m] == []


@pytest.mark.browser
def test_read_history_from_a_file_view(site: str, page: tuple[Page, list[str]]) -> None:
    tab, console = page
    tab.goto(f"{site}/acme/app/-/blob/app/main.py")
    with tab.expect_navigation():
        tab.click("text=History")
    assert "/-/commits/app/main.py" in tab.url
    with tab.expect_navigation():
        tab.click("text=triple the helper")
    assert tab.locator("tr.del").first.inner_text().endswith("-    return x * 2")
    assert tab.locator("tr.add").first.inner_text().endswith("+    return x * 3")
    _shot(tab, "commit")
    with tab.expect_navigation():
        tab.click("text=View file")
    assert "/-/blob/app/main.py" in tab.url
    assert [m for m in console if "Content Security Policy" in m] == []
