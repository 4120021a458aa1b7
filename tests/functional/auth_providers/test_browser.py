"""A real browser (Debian's chromium through Playwright) signs in through the sign-in page with an OAuth
provider: codewell's page → the provider's authorization endpoint → codewell's callback → signed in."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from playwright.sync_api import sync_playwright

from codewell.accounts.service import AccountService
from codewell.app import create_app
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.accounts.test_browser import CHROMIUM, CHROMIUM_ARGS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(runtime: Runtime, host: FakeCodeHost) -> Iterator[str]:
    """The app over real HTTP, its externalURL pointing at itself, with GitHub (the fake) and builtin."""
    port = _free_port()
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
    config = uvicorn.Config(create_app(runtime, background=False), host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield url
    server.should_exit = True
    thread.join(timeout=10)


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
