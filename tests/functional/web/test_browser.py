"""A real browser (Debian's chromium through Playwright) follows a link the MCP tools print to a file in a private
repository: it signs in, lands on the file view with the lines highlighted, then searches from the home page and
opens a result. The page's CSP must hold: no violation, the page's own (nonce'd) script runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, sync_playwright

from codewell.core.actors import INTERNAL
from codewell.http import urls
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import CHROMIUM, CHROMIUM_ARGS, serve_app
from tests.factories import make_user
from tests.gitfixtures import make_repo, register_local_repo

PASSWORD = "correct horse battery staple"
CODE = "".join(f"def f{n}(x):\n    return x + {n}\n" for n in range(1, 80))


@pytest.fixture
def server(runtime: Runtime) -> Iterator[str]:
    with serve_app(runtime) as url:
        yield url


@pytest.mark.browser
def test_a_tool_link_opens_the_file_at_its_lines_after_sign_in(runtime: Runtime, server: str, tmp_path: Path) -> None:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    register_local_repo(runtime, make_repo(tmp_path / "app", {"app/main.py": CODE}), "acme/app", private=True)
    runtime.get(SearchService).index_repo(INTERNAL, "acme/app")
    sha = runtime.get(RepoService).resolve(INTERNAL, "acme/app").commit
    link = urls.blob_url(server, "acme/app", sha, "app/main.py", (101, 104))  # `%3FL101-104`, as tools print it
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            console: list[str] = []

            def collect(message: ConsoleMessage) -> None:
                console.append(message.text)

            page.on("console", collect)
            page.goto(link)
            assert "/sign-in?returnTo=" in page.url
            page.fill("#username", "root")
            page.fill("#password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_selector("tr.hit")
            assert page.locator("tr.hit").count() == 4
            assert page.locator("tr.hit").first.get_attribute("id") == "L101"
            # The nonce'd script scrolled the highlighted lines into view (line 101 is far below the fold).
            assert page.evaluate("window.scrollY") > 0
            assert page.get_attribute("#permalink", "href") == f"/acme/app@{sha}/-/blob/app/main.py?L101-104"

            page.goto(f"{server}/")
            page.fill("#q", "return x + 42")
            with page.expect_navigation():
                page.press("#q", "Enter")
            assert "/search?q=" in page.url
            with page.expect_navigation():
                page.click("td.num a >> nth=0")
            assert page.locator("tr.hit").count() == 1
            assert [m for m in console if "Content Security Policy" in m] == []
        finally:
            browser.close()
