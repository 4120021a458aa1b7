"""axe-core on every page of the site, light and dark (issue #32: "zero serious or critical violations on every
page"). The pages are taken from the app's own routes: a page added without a row below fails
`test_every_html_page_is_listed`, so the check grows with the site. Pages with their own journeys (error pages,
the consent page, the search toggles, the code host form, whole files with their panels) are checked there too,
in the states those journeys reach."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from starlette.routing import Route

from codewell.app import create_app
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import CHROMIUM, CHROMIUM_ARGS, axe_source, serious_violations, serve_app, sign_in
from tests.factories import make_user, set_site_config
from tests.gitfixtures import commit, make_repo, register_local_repo

PASSWORD = "correct horse battery staple"
REPO = "acme/app"

# Route (as the app declares it, converters dropped) → the address visited, signed in as a site admin.
SIGNED_IN_PAGES = {
    "/": "/",
    "/search": "/search?q=helper",
    "/repositories": "/repositories",
    "/deepsearch": "/deepsearch",
    "/{repo}": f"/{REPO}",
    "/{repo}/-/tree{path}": f"/{REPO}/-/tree/app",
    "/{repo}/-/blob/{path}": f"/{REPO}/-/blob/app/main.py?L1-2",
    "/{repo}/-/definition": f"/{REPO}/-/definition?path=app/main.py&line=5&symbol=helper",
    "/{repo}/-/references": f"/{REPO}/-/references?path=app/main.py&line=1&symbol=helper",
    "/{repo}/-/commits{path}": f"/{REPO}/-/commits",
    "/{repo}/-/commit/{sha}": f"/{REPO}/-/commit/main",
    "/{repo}/-/compare/{spec}": f"/{REPO}/-/compare/main~1...main",
    "/{repo}/-/blame/{path}": f"/{REPO}/-/blame/app/main.py",
    "/settings": "/settings",
    "/settings/mcp": "/settings/mcp",
    "/settings/tokens": "/settings/tokens",
    "/settings/emails": "/settings/emails",
    "/settings/accounts": "/settings/accounts",
    "/settings/code-hosts": "/settings/code-hosts",
    "/analytics/tokens": "/analytics/tokens",
    "/analytics/credits": "/analytics/credits",
    "/site-admin": "/site-admin",
    "/site-admin/repositories": "/site-admin/repositories",
    "/site-admin/configuration": "/site-admin/configuration",
    "/site-admin/mcp": "/site-admin/mcp",
    "/site-admin/users": "/site-admin/users",
    "/site-admin/roles": "/site-admin/roles",
    "/site-admin/audit": "/site-admin/audit",
    "/site-admin/code-hosts": "/site-admin/code-hosts",
    "/site-admin/jobs": "/site-admin/jobs",
    "/site-admin/license": "/site-admin/license",
    "/site-admin/oauth-clients": "/site-admin/oauth-clients",
}
ANONYMOUS_PAGES = {"/sign-in": "/sign-in", "/sign-up": "/sign-up", "/password-reset": "/password-reset?code=nope"}
# GET routes that are no page of their own, or a page that needs state this module does not build.
NOT_PAGES = {
    "/{repo}/-/raw/{path}": "the file's bytes",
    "/{repo}/-/files": "JSON for the file finder",
    "/search/suggest": "an htmx fragment inside the search page",
    "/deepsearch/{token}": "an answered conversation: tests/functional/web/test_journeys_deepsearch.py",
    "/deepsearch/shared/{token}": "a shared conversation: tests/functional/web/test_journeys_deepsearch.py",
    "/deepsearch/{token}/delete": "the confirmation of a conversation's deletion (needs a conversation)",
}


def _html_get_routes(runtime: Runtime) -> set[str]:
    """Every GET route of the app outside the APIs, the OAuth/auth endpoints and the operational ones."""
    found = set()
    for route in create_app(runtime, background=False).routes:
        if not isinstance(route, Route) or "GET" not in (route.methods or set()):
            continue
        path = re.sub(r":[a-z]+\}", "}", route.path)
        if path.startswith(("/.", "/analytics/api/")) or path in ("/healthz", "/readyz", "/metrics"):
            continue
        found.add(path)
    return found


def test_every_html_page_is_listed(runtime: Runtime) -> None:
    listed = set(SIGNED_IN_PAGES) | set(ANONYMOUS_PAGES) | set(NOT_PAGES)
    routes = _html_get_routes(runtime)
    assert routes - listed == set(), "pages without an address in this module: add them so axe checks them"
    assert listed - routes == set(), "addresses of pages the app no longer has"


@pytest.fixture
def site(runtime: Runtime, tmp_path: Path) -> Iterator[str]:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    set_site_config(runtime, {"auth.providers": [{"type": "builtin", "allowSignup": True}]})
    source = make_repo(
        tmp_path / "app",
        {"app/main.py": "def helper(x):\n    return x * 2\n\n\nprint(helper(2))\n", "README.md": "# app\n"},
    )
    commit(source, {"app/main.py": "def helper(x):\n    return x * 3\n\n\nprint(helper(2))\n"}, message="triple")
    register_local_repo(runtime, source, REPO)
    runtime.get(SearchService).index_repo(INTERNAL, REPO)
    with serve_app(runtime) as url:
        yield url


@pytest.mark.browser
def test_every_page_has_no_serious_accessibility_violations_light_and_dark(site: str) -> None:
    axe = axe_source()
    found: dict[str, list[str]] = {}
    statuses: dict[str, int] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for signed_in, pages in ((False, ANONYMOUS_PAGES), (True, SIGNED_IN_PAGES)):
                tab = browser.new_page()
                if signed_in:
                    sign_in(tab, site, "root", PASSWORD)
                for url in pages.values():
                    response = tab.goto(f"{site}{url}")
                    assert response is not None
                    statuses[url] = response.status
                    for scheme in ("light", "dark"):
                        tab.emulate_media(color_scheme=scheme)
                        bad = serious_violations(tab, axe)
                        if bad:
                            found[f"{scheme} {url}"] = bad
                tab.close()
        finally:
            browser.close()
    # Each address showed its page (a 400 is the reset page's own answer to a wrong code), not an error page.
    assert {url: s for url, s in statuses.items() if s != 200} == {"/password-reset?code=nope": 400}
    assert found == {}, json.dumps(found, indent=1)
