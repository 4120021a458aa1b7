"""The OAuth consent page and the authorization error page (issue #32, item 5), in a real browser: both in the
site's layout, worded for people, no serious or critical axe-core violation light and dark, and Allow still
completes the flow (the client's callback gets a code and its state)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2 as httpx
import pytest
from playwright.sync_api import Route

from codewell.oauth.grants import pkce_challenge
from codewell.runtime import Runtime
from tests.browser import (
    axe_source,
    serious_violations,
    serve_app,
    signed_in_tab,
)
from tests.factories import make_user

PASSWORD = "correct horse battery staple"
CALLBACK = "http://127.0.0.1:33418/callback"


@pytest.fixture
def site(runtime: Runtime) -> Iterator[str]:
    make_user(runtime, "dev", password=PASSWORD)
    with serve_app(runtime) as url:
        yield url


def _authorize_url(site: str, client_id: str, **overrides: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "code_challenge": pkce_challenge("v" * 64),
        "code_challenge_method": "S256",
        "state": "st4te",
        "scope": "mcp",
        **overrides,
    }
    return f"{site}/.auth/idp/oauth/authorize?{urlencode(params)}"


@pytest.mark.browser
def test_consent_and_authorization_error_pages_have_the_site_layout(site: str) -> None:
    registered = httpx.post(
        f"{site}/.auth/idp/oauth/register", json={"client_name": "Helpful Agent", "redirect_uris": [CALLBACK]}
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    axe = axe_source()
    with signed_in_tab(site, "dev", PASSWORD) as (tab, console):
        found: dict[str, list[str]] = {}
        # An authorization error: a redirect URI the client never registered stays on our page.
        for scheme in ("light", "dark"):
            tab.emulate_media(color_scheme=scheme)
            response = tab.goto(_authorize_url(site, client_id, redirect_uri="http://127.0.0.1:1/elsewhere"))
            assert response is not None
            assert response.status == 400
            assert tab.locator("header a.brand").inner_text() == "codewell"
            assert tab.locator("#error-title").inner_text() == "The application's sign-in request did not work"
            assert "invalid_request" in tab.locator(".error-message").inner_text()
            assert "connect it to codewell again" in tab.locator("main").inner_text()
            if bad := serious_violations(tab, axe):
                found[f"error {scheme}"] = bad
        # The consent page.
        for scheme in ("light", "dark"):
            tab.emulate_media(color_scheme=scheme)
            response = tab.goto(_authorize_url(site, client_id))
            assert response is not None
            assert response.status == 200
            assert tab.locator("header a.brand").inner_text() == "codewell"
            assert tab.locator("h1").inner_text() == "Allow Helpful Agent to use codewell as you?"
            main = tab.locator("main").inner_text()
            assert "You are signed in as dev." in main
            assert "read only the repositories you can read" in main
            assert "127.0.0.1:33418" in main
            if bad := serious_violations(tab, axe):
                found[f"consent {scheme}"] = bad
        assert found == {}
        # Allow: the client's callback receives a code and its state.
        called: list[str] = []

        def callback(route: Route) -> None:
            called.append(route.request.url)
            route.fulfill(status=200, body="connected", content_type="text/plain")

        tab.route(f"{CALLBACK}**", callback)
        tab.click("#approve")
        tab.wait_for_url(f"{CALLBACK}**")
        query = parse_qs(urlsplit(called[0]).query)
        assert query["state"] == ["st4te"]
        assert query["code"][0]
        assert [m for m in console if "Content Security Policy" in m] == []
