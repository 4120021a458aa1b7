"""Error pages for people (issue #32, item 5), in a real browser: a missing file, a missing repository, a page
the user may not open and an unknown address all show the site's layout (header, navigation, light and dark)
worded for people with next steps, axe-core finds no serious or critical violation, and JSON clients keep
their JSON errors on the same URLs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
import uvicorn
from playwright.sync_api import Page
from starlette.exceptions import HTTPException

from codewell.accounts.service import AccountService
from codewell.accounts.tokens import SCOPE_USER_ALL, TokenService
from codewell.app import create_app
from codewell.core.actors import INTERNAL
from codewell.http.errors import http_exception_handler
from codewell.runtime import Runtime
from tests.browser import (
    axe_source,
    free_port,
    serious_violations,
    signed_in_tab,
)
from tests.factories import make_user
from tests.gitfixtures import make_repo, register_local_repo

PASSWORD = "correct horse battery staple"


@pytest.fixture
def site(runtime: Runtime, tmp_path: Path) -> Iterator[str]:
    make_user(runtime, "dev", password=PASSWORD)
    register_local_repo(runtime, make_repo(tmp_path / "app", {"main.py": "print('hi')\n"}), "acme/app")
    # app.py registers the handler of Starlette's own 404/405 (the lead's edit, see the H5 report); until then
    # the test adds it to the app it serves (adding it twice is harmless).
    app = create_app(runtime, background=False)
    app.add_exception_handler(HTTPException, http_exception_handler)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def _check_page(tab: Page, status: int, title: str) -> None:
    assert tab.locator("header a.brand").inner_text() == "codewell"  # the site's layout, not bare text
    assert tab.locator("#error-title").inner_text() == title
    assert tab.locator(".error-status").inner_text() == f"Error {status}"
    assert tab.locator(".error-actions a", has_text="Browse the repositories").count() == 1
    body = tab.locator("main").inner_text()
    assert "list_files" not in body  # agents' wording stays with agents
    assert "startLine" not in body


@pytest.mark.browser
def test_error_pages_have_the_site_layout_next_steps_and_no_serious_violations(site: str) -> None:
    axe = axe_source()
    with signed_in_tab(site, "dev", PASSWORD) as (tab, console):
        pages = {
            f"{site}/-/no/such/page": (404, "Page not found"),
            f"{site}/acme/app/-/blob/missing.py": (404, "Page not found"),
            f"{site}/acme/nothing-here": (404, "Page not found"),
            f"{site}/site-admin": (403, "You do not have access to this page"),
        }
        found: dict[str, list[str]] = {}
        for url, (status, title) in pages.items():
            for scheme in ("light", "dark"):
                tab.emulate_media(color_scheme=scheme)
                response = tab.goto(url)
                assert response is not None
                assert response.status == status, url
                _check_page(tab, status, title)
                assert tab.locator("header").get_by_role("link", name="dev").count() == 1  # signed in
                background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
                assert (background == "rgb(255, 255, 255)") == (scheme == "light"), (scheme, background)
                bad = serious_violations(tab, axe)
                if bad:
                    found[f"{url} {scheme}"] = bad
        assert found == {}
        assert [m for m in console if "Content Security Policy" in m] == []


def test_json_clients_and_curl_keep_their_error_shapes(runtime: Runtime, site: str) -> None:
    user = runtime.get(AccountService).get_by_username("dev")
    raw, _ = runtime.get(TokenService).create_token(INTERNAL, user.id, "t", (SCOPE_USER_ALL,), None)
    auth = {"Authorization": f"token {raw}"}
    api = httpx.get(f"{site}/.api/repos/acme/nothing-here", headers=auth, timeout=10)
    assert api.status_code == 404
    assert api.json()["error"]["code"] == "not_found"
    html = httpx.get(f"{site}/acme/nothing-here", headers={**auth, "Accept": "application/json"}, timeout=10)
    assert html.status_code == 404
    assert html.json()["error"]["code"] == "not_found"  # a page's URL, asked for JSON: JSON
    asked = httpx.get(f"{site}/-/no/such/page", headers={**auth, "Accept": "application/json"}, timeout=10)
    assert asked.status_code == 404
    assert asked.json() == {"error": {"code": "not_found", "message": "no route for GET /-/no/such/page"}}
    curl = httpx.get(f"{site}/-/no/such/page", headers={**auth, "Accept": "*/*"}, timeout=10)
    assert curl.status_code == 404
    assert curl.headers["content-type"].startswith("text/plain")
    assert curl.text == "Not Found"  # Starlette's own words, as before


def test_a_refusal_before_any_route_is_a_page_for_browsers_too(site: str) -> None:
    """The authentication middleware's refusals (a form posted without a session) use the same mapping."""
    page = httpx.post(f"{site}/repositories", headers={"Accept": "text/html"}, timeout=10)
    assert page.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    assert '<h1 id="error-title">Sign in to see this page</h1>' in page.text
    assert '<a class="brand" href="/">codewell</a>' in page.text
    text = httpx.post(f"{site}/repositories", headers={"Accept": "*/*"}, timeout=10)
    assert text.status_code == 401
    assert text.text.startswith("Not signed in.")
    api = httpx.post(f"{site}/.api/repos", timeout=10)
    assert api.json()["error"]["code"] == "unauthenticated"
