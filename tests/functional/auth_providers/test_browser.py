"""A real browser (Debian's chromium through Playwright) signs in through the sign-in page with an OAuth
provider: codewell's page → the provider's authorization endpoint → codewell's callback → signed in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import sync_playwright

from codewell.accounts.service import AccountService
from codewell.runtime import Runtime
from tests.browser import CHROMIUM, CHROMIUM_ARGS, free_port, serve_app
from tests.factories import set_site_config
from tests.fakes.codehosts import FakeCodeHost, HostUser


@pytest.fixture
def served(runtime: Runtime, host: FakeCodeHost) -> Iterator[str]:
    """The app over real HTTP, its externalURL pointing at itself, with GitHub (the fake) and builtin."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    set_site_config(
        runtime,
        {
            "externalURL": url,
            "auth.providers": [
                {"type": "builtin"},
                {
                    "type": "github",
                    "url": host.url,
                    "clientID": host.client_id,
                    "clientSecret": host.client_secret,
                    "allowSignup": True,
                    "displayName": "Corp GitHub",
                },
            ],
        },
    )
    with serve_app(runtime, port):
        yield url


@pytest.mark.browser
def test_sign_in_with_a_provider_in_the_browser(runtime: Runtime, host: FakeCodeHost, served: str) -> None:
    host.add(HostUser(4242, "octo-cat", "Octo Cat", emails=[("octo@corp.example", True)]))
    host.signed_in = "octo-cat"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{served}/settings/tokens")
            assert "/sign-in?returnTo=" in page.url
            page.click("text=Continue with Corp GitHub")
            page.wait_for_url(f"{served}/settings/tokens")
            assert "octo-cat" in page.inner_text("header")
        finally:
            browser.close()
    assert runtime.get(AccountService).get_by_username("octo-cat").display_name == "Octo Cat"
    assert host.token_requests[-1]["code_verifier"]
