"""The search page in a real browser (Debian's chromium through Playwright, the app over real HTTP): the regex and
case toggles search again at once and stay in the address, a filter from the result set narrows the search, the
search box shows underscores whole, and the page has no serious accessibility violations (light and dark).
Screenshots go to tests/.artifacts/ (git-ignored)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page

from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import (
    ARTIFACTS,
    axe_source,
    serious_violations,
    serve_app,
    signed_in_tab,
)
from tests.factories import make_user
from tests.gitfixtures import make_repo, register_local_repo

PASSWORD = "correct horse battery staple"
GO = "package cli\n\n// Execute runs the command.\nfunc (c *Command) Execute() error {\n\treturn c.run()\n}\n"
DOC = "Call Execute on a Command to run it: func and c are the words.\n"


@pytest.fixture
def site(runtime: Runtime, tmp_path: Path) -> Iterator[str]:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    cli = make_repo(tmp_path / "cli", {"cmd/command.go": GO, "docs/guide.md": DOC})
    register_local_repo(runtime, cli, "acme/cli")
    register_local_repo(runtime, make_repo(tmp_path / "web", {"app/run.py": "def execute(c):\n    pass\n"}), "acme/web")
    for name in ("acme/cli", "acme/web"):
        runtime.get(SearchService).index_repo(INTERNAL, name)
    with serve_app(runtime) as url:
        yield url


@pytest.fixture
def page(site: str) -> Iterator[tuple[Page, list[str]]]:
    with signed_in_tab(site, "root", PASSWORD) as (tab, console):
        yield tab, console


def _params(tab: Page) -> dict[str, list[str]]:
    return parse_qs(urlparse(tab.url).query)


def _results(tab: Page) -> list[str]:
    return [str(t).replace("\xa0", " ") for t in tab.locator("section.result h3").all_inner_texts()]


@pytest.mark.browser
def test_regex_and_case_toggles_search_again_and_stay_in_the_address(site: str, page: tuple[Page, list[str]]) -> None:
    tab, console = page
    tab.goto(f"{site}/")
    tab.fill("#q", r"func \(c \*Command\) Execute")
    with tab.expect_navigation():
        tab.press("#q", "Enter")
    assert _results(tab) == []  # a keyword search for those characters as typed: nothing
    with tab.expect_navigation():
        tab.click("#toggle-regexp")  # codewell.js submits the form when a toggle changes
    assert _params(tab)["patternType"] == ["regexp"]
    assert _results(tab) == ["acme/cli › cmd/command.go"]
    assert tab.is_checked("#toggle-regexp")
    # The match is marked inside the highlighted line, with a context line above and below.
    assert tab.locator("section.result tr.match mark").count() >= 1
    assert tab.locator("section.result tr").count() == 3
    _shot(tab, "search-regexp")

    tab.fill("#q", "execute")
    tab.uncheck("#toggle-regexp")  # submits with the new query
    tab.wait_for_url("**/search?q=execute*")
    assert sorted(_results(tab)) == ["acme/cli › cmd/command.go", "acme/cli › docs/guide.md", "acme/web › app/run.py"]
    with tab.expect_navigation():
        tab.click("#toggle-case")
    assert _params(tab)["case"] == ["yes"]
    assert "patternType" not in _params(tab)
    assert _results(tab) == ["acme/web › app/run.py"]  # only the lower-case one
    assert [m for m in console if "Content Security Policy" in m] == []


@pytest.mark.browser
def test_a_filter_from_the_result_set_narrows_the_search(site: str, page: tuple[Page, list[str]]) -> None:
    tab, _ = page
    tab.goto(f"{site}/search?q=execute")
    assert len(_results(tab)) == 3
    facets = tab.locator("aside.facets")
    assert facets.locator("h2").all_inner_texts() == ["Repositories", "Languages", "Paths"]
    with tab.expect_navigation():
        facets.get_by_role("link", name="Go", exact=True).click()
    assert _params(tab)["q"] == ["execute lang:go"]
    assert tab.input_value("#q") == "execute lang:go"
    assert _results(tab) == ["acme/cli › cmd/command.go"]
    with tab.expect_navigation():
        tab.locator("aside.facets").get_by_role("link", name="acme/cli").click()
    assert _params(tab)["q"] == [r"execute lang:go repo:^acme/cli$"]
    assert _results(tab) == ["acme/cli › cmd/command.go"]
    _shot(tab, "search-filtered")


@pytest.mark.browser
def test_the_search_box_shows_underscores_whole(site: str, page: tuple[Page, list[str]]) -> None:
    tab, _ = page
    tab.goto(f"{site}/search?q=resolve_command")
    for box in ("#q", "#nav-q"):
        metrics = tab.evaluate(
            """(sel) => { const el = document.querySelector(sel); const s = getComputedStyle(el);
                 return {line: parseFloat(s.lineHeight), font: parseFloat(s.fontSize),
                         inner: el.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom)}; }""",
            box,
        )
        # A `normal` line height in a monospace font left the underscore below the clipped content box.
        assert metrics["line"] >= 1.4 * metrics["font"], (box, metrics)
        assert metrics["inner"] >= metrics["line"] - 0.5, (box, metrics)


@pytest.mark.browser
def test_the_search_page_has_no_serious_accessibility_violations(site: str, page: tuple[Page, list[str]]) -> None:
    axe = axe_source()
    tab, _ = page
    found: dict[str, list[str]] = {}
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        for url in ("/search?q=execute&context=2", "/search?q=a(&patternType=regexp", "/search?q=execute&word=yes"):
            tab.goto(f"{site}{url}")
            bad = serious_violations(tab, axe)
            if bad:
                found[f"{scheme} {url}"] = bad
        _shot(tab, f"search-{scheme}")
    assert found == {}, json.dumps(found, indent=1)


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-{name}.png"), full_page=True)
