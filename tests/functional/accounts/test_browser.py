"""A real browser (Debian's chromium through Playwright) signs in, creates an access token on the settings
page, sees it once, and revokes it; the token works in between and stops working after."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx2 as httpx
import pytest
from playwright.sync_api import sync_playwright

from codewell.runtime import Runtime
from tests.browser import CHROMIUM, CHROMIUM_ARGS, serve_app
from tests.factories import make_user

PASSWORD = "correct horse battery staple"


@pytest.fixture
def server(runtime: Runtime) -> Iterator[str]:
    with serve_app(runtime) as url:
        yield url


@pytest.mark.browser
def test_sign_in_create_and_revoke_a_token_in_the_browser(runtime: Runtime, server: str) -> None:
    make_user(runtime, "alice", password=PASSWORD)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            # An anonymous visit to the settings page leads to sign-in and back.
            page.goto(f"{server}/settings/tokens")
            assert "/sign-in?returnTo=" in page.url
            page.fill("#username", "alice")
            page.fill("#password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server}/settings/tokens")
            assert "No access tokens." in page.inner_text("#tokens")

            page.fill("#note", "browser test")
            page.check("input[value=mcp]")
            page.select_option("#expires", "30")
            with page.expect_navigation():
                page.click("text=Generate token")
            raw = page.inner_text("[data-testid=new-token]").strip()
            assert re.fullmatch(r"cwp_[0-9a-f]{40}", raw)
            assert "browser test" in page.inner_text("#tokens")
            me = httpx.get(f"{server}/.api/users/me", headers={"Authorization": f"token {raw}"})
            assert me.json()["username"] == "alice"

            page.goto(f"{server}/settings/tokens")  # shown once: gone on the next visit
            assert raw not in page.content()
            with page.expect_navigation():
                page.click("#tokens button:has-text('Revoke')")
            assert "No access tokens." in page.inner_text("#tokens")
            gone = httpx.get(f"{server}/.api/users/me", headers={"Authorization": f"token {raw}"})
            assert gone.status_code == 401
        finally:
            browser.close()
