"""A real browser (Debian's chromium through Playwright) signs in, creates an access token on the settings
page, sees it once, and revokes it; the token works in between and stops working after."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator

import httpx2 as httpx
import pytest
import uvicorn
from playwright.sync_api import sync_playwright

from codewell.app import create_app
from codewell.runtime import Runtime
from tests.factories import make_user

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "correct horse battery staple"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(runtime: Runtime) -> Iterator[str]:
    """The whole app served over real HTTP on loopback (in a thread of this process)."""
    port = _free_port()
    config = uvicorn.Config(create_app(runtime, background=False), host="127.0.0.1", port=port, log_config=None)
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not instance.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    instance.should_exit = True
    thread.join(timeout=10)


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
