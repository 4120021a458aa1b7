"""The shared layout and the hub pages over HTTP: one nav on every page, page notices, the stylesheet, search
suggestions, the repositories list, your account and MCP client setup, and the site admin's repositories,
configuration and MCP pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.http.templates import Notice, PageNotices
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

Headers = dict[str, str]


@pytest.fixture
def world(tmp_path: Path, runtime: Runtime, client: TestClient) -> dict[str, Headers]:
    register_local_repo(runtime, make_repo(tmp_path / "priv", {"a.py": "A = 1\n"}), "acme/secret", private=True)
    register_local_repo(
        runtime, make_repo(tmp_path / "pub", {"b.py": "B = 1\n"}, branches=["dev"], tags=["v1.0"]), "acme/pub"
    )
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    user = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    return {"admin": admin, "user": user}


PAGES = [
    "/",
    "/search?q=B",
    "/repositories",
    "/acme/pub",
    "/acme/pub/-/blob/b.py",
    "/acme/pub/-/commits",
    "/settings",
    "/settings/mcp",
    "/settings/tokens",
    "/settings/emails",
]
ADMIN_PAGES = [
    "/site-admin",
    "/site-admin/repositories",
    "/site-admin/jobs",
    "/site-admin/configuration",
    "/site-admin/mcp",
    "/site-admin/users",
    "/site-admin/license",
]


def _csrf(client: TestClient, headers: Headers) -> str:
    """The CSRF token of the client's pre-session cookie (token-authenticated requests have no session)."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/settings", headers=headers).text)
    assert found
    return found.group(1)


def _main_nav(html: str) -> str:
    found = re.search(r'<nav aria-label="Main">(.*?)</nav>', html, re.S)
    assert found, "no main nav"
    return found.group(1)


def test_every_page_has_the_one_nav_and_stylesheet_and_admins_alone_see_site_admin(
    client: TestClient, world: dict[str, Headers]
) -> None:
    for url in PAGES:
        mine, theirs = client.get(url, headers=world["admin"]), client.get(url, headers=world["user"])
        assert mine.status_code == theirs.status_code == 200, url
        for page in (mine, theirs):
            nav = _main_nav(page.text)
            for link in ('action="/search"', 'href="/repositories"', 'href="/deepsearch"', 'href="/settings"'):
                assert link in nav, (url, link)
            assert page.text.count('<link rel="stylesheet"') == 1
            assert '<main id="main"' in page.text
            assert 'href="#main"' in page.text
            assert 'for="nav-q"' in page.text  # the nav's search box has a label
        assert 'href="/site-admin"' in _main_nav(mine.text)
        assert 'href="/site-admin"' not in _main_nav(theirs.text)
    for url in ADMIN_PAGES:
        page = client.get(url, headers=world["admin"])
        assert page.status_code == 200, url
        admin_nav = re.search(r'<nav class="subnav" aria-label="Site admin">(.*?)</nav>', page.text, re.S)
        assert admin_nav, url
        for link in (
            "/site-admin/repositories",
            "/site-admin/configuration",
            "/site-admin/mcp",
            "/site-admin/users",
            "/site-admin/roles",
            "/site-admin/audit",
            "/site-admin/oauth-clients",
            "/site-admin/license",
            "/analytics/credits",
        ):
            assert f'href="{link}"' in admin_nav.group(1), (url, link)
    signin = client.get("/sign-in")
    assert '<link rel="stylesheet" href="/.static/codewell.css">' in signin.text


def test_static_files_are_public_cacheable_and_the_stylesheet_carries_dark_mode_and_token_classes(
    client: TestClient,
) -> None:
    css = client.get("/.static/codewell.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    assert "prefers-color-scheme: dark" in css.text
    assert ":focus-visible" in css.text
    assert ".hl .k " in css.text  # Pygments' keyword class, scoped
    again = client.get("/.static/codewell.css", headers={"if-none-match": css.headers["etag"]})
    assert again.status_code == 304
    htmx = client.get("/.static/htmx.min.js")
    assert htmx.status_code == 200
    assert "htmx" in htmx.text[:2000]
    assert client.get("/.static/pages.py").status_code == 404
    assert client.get("/.static/nope.js").status_code == 404


def test_page_notices_registered_by_a_capability_show_on_every_page_and_a_failing_source_breaks_none(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    def expiry(request: Request) -> list[Notice]:
        return [Notice("License expires in 3 days <soon>", "warning", "/site-admin/license", "Renew")]

    def broken(request: Request) -> list[Notice]:
        raise RuntimeError("boom")

    notices = runtime.get(PageNotices)
    notices.add(broken)
    notices.add(expiry)
    notices.add(expiry)  # idempotent
    for url in [*PAGES, "/site-admin/users"]:
        page = client.get(url, headers=world["admin"])
        assert page.status_code == 200, url
        assert page.text.count("License expires in 3 days &lt;soon&gt;") == 1, url
        assert 'class="page-notice notice-warning"' in page.text
        assert '<a href="/site-admin/license">Renew</a>' in page.text
    assert "License expires" in client.get("/sign-in").text


def test_search_suggestions_complete_filters_with_readable_repositories_only(
    client: TestClient, world: dict[str, Headers]
) -> None:
    filters = client.get("/search/suggest", params={"q": "mutex "}, headers=world["user"])
    assert all(f">{name}</a>" in filters.text for name in ("repo:", "file:", "lang:"))
    assert 'href="/search?q=mutex%20repo%3A"' in filters.text
    mine = client.get("/search/suggest", params={"q": "x repo:acme"}, headers=world["admin"])
    theirs = client.get("/search/suggest", params={"q": "x repo:acme"}, headers=world["user"])
    assert "repo:^acme/secret$" in mine.text
    assert "repo:^acme/pub$" in mine.text
    assert "secret" not in theirs.text
    assert "repo:^acme/pub$" in theirs.text
    langs = client.get("/search/suggest", params={"q": "lang:py"}, headers=world["user"])
    assert ">lang:python</a>" in langs.text
    home = client.get("/", headers=world["user"])
    assert 'hx-get="/search/suggest"' in home.text
    assert '<details id="syntax-help">' in home.text


def test_branch_and_tag_picker_links_each_ref_at_the_same_place(client: TestClient, world: dict[str, Headers]) -> None:
    blob = client.get("/acme/pub/-/blob/b.py", headers=world["user"])
    for ref in ("main", "dev", "v1.0"):
        assert f'href="/acme/pub@{ref}/-/blob/b.py"' in blob.text
    tree = client.get("/acme/pub", headers=world["user"])
    assert 'href="/acme/pub@dev/-/tree"' in tree.text


def test_repositories_page_lists_readable_repositories_with_sync_state(
    client: TestClient, world: dict[str, Headers]
) -> None:
    mine = client.get("/repositories", headers=world["admin"])
    theirs = client.get("/repositories", headers=world["user"])
    assert 'href="/acme/secret"' in mine.text
    assert "ready" in mine.text
    assert "acme/secret" not in theirs.text
    assert 'href="/acme/pub"' in theirs.text
    filtered = client.get("/repositories", params={"q": "pub"}, headers=world["admin"])
    assert "acme/secret" not in filtered.text


def test_mcp_setup_page_fills_in_this_instances_url_for_four_clients(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    page = client.get("/settings/mcp", headers=world["user"])
    endpoint = runtime.external_url + "/.api/mcp"
    for client_name in ("Claude Code", "Cursor", "VS Code", "Codex"):
        assert f">{client_name}</h2>" in page.text
    assert f"claude mcp add --transport http codewell {endpoint}" in page.text
    assert f"&#34;url&#34;: &#34;{endpoint}&#34;" in page.text  # Cursor and VS Code JSON (escaped)
    assert f"url = &#34;{endpoint}&#34;" in page.text  # Codex TOML
    hub = client.get("/settings", headers=world["user"])
    for link in ("/settings/tokens", "/settings/emails", "/settings/mcp"):
        assert f'href="{link}"' in hub.text


def test_admin_repositories_add_sync_and_remove_with_errors_shown(
    client: TestClient, runtime: Runtime, world: dict[str, Headers], tmp_path: Path
) -> None:
    token = _csrf(client, world["admin"])
    page = client.get("/site-admin/repositories", headers=world["admin"])
    assert "acme/secret" in page.text
    assert "Sync now" in page.text
    source = make_repo(tmp_path / "added", {"c.py": "C = 1\n"})
    added = client.post(
        "/site-admin/repositories",
        data={"csrf_token": token, "action": "add", "url": str(source), "name": "acme/added"},
        headers=world["admin"],
        follow_redirects=False,
    )
    assert added.status_code == 303
    assert runtime.get(RepoService).get(INTERNAL, "acme/added").name == "acme/added"
    after = client.get(added.headers["location"], headers=world["admin"])
    assert "Added acme/added" in after.text
    duplicate = client.post(
        "/site-admin/repositories",
        data={"csrf_token": token, "action": "add", "url": str(source), "name": "acme/added"},
        headers=world["admin"],
    )
    assert duplicate.status_code in (400, 409)
    assert 'role="alert"' in duplicate.text
    assert f'value="{source}"' in duplicate.text
    synced = client.post(
        "/site-admin/repositories",
        data={"csrf_token": token, "action": "sync", "name": "acme/added"},
        headers=world["admin"],
        follow_redirects=False,
    )
    assert synced.status_code == 303
    removed = client.post(
        "/site-admin/repositories",
        data={"csrf_token": token, "action": "remove", "name": "acme/added"},
        headers=world["admin"],
        follow_redirects=False,
    )
    assert removed.status_code == 303
    assert "acme/added" not in [r.name for r in runtime.get(RepoService).all_repos(INTERNAL)]
    refused = client.post(
        "/site-admin/repositories",
        data={"csrf_token": token, "action": "remove", "name": "acme/pub"},
        headers=world["user"],
    )
    assert refused.status_code == 403


def test_config_edit_shows_errors_at_their_key_paths_and_saves_nothing_when_invalid(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    token = _csrf(client, world["admin"])
    path = runtime.site_config.path
    before = path.read_text()
    page = client.get("/site-admin/configuration", headers=world["admin"])
    assert page.status_code == 200
    assert "</textarea>" in page.text
    bad = '{\n  // a comment\n  "auth.public": "maybe",\n  "mcp.enabeld": true\n}\n'
    refused = client.post(
        "/site-admin/configuration", data={"csrf_token": token, "config": bad}, headers=world["admin"]
    )
    assert refused.status_code == 400
    assert '<code class="field-error">auth.public</code>' in refused.text
    assert "(line 3)" in refused.text
    assert '<code class="field-error">mcp.enabeld</code>: unknown option (line 4)' in refused.text
    assert "// a comment" in refused.text  # the text as typed stays in the form
    assert path.read_text() == before
    syntax = client.post("/site-admin/configuration", data={"csrf_token": token, "config": "{"}, headers=world["admin"])
    assert syntax.status_code == 400
    assert "(syntax)" in syntax.text
    good = '{\n  // kept\n  "auth.public": true\n}\n'
    saved = client.post(
        "/site-admin/configuration",
        data={"csrf_token": token, "config": good},
        headers=world["admin"],
        follow_redirects=False,
    )
    assert saved.status_code == 303
    assert path.read_text() == good
    assert runtime.config.auth_public is True


def test_mcp_page_lists_the_tools_and_switches_them_in_the_site_config(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    token = _csrf(client, world["admin"])
    page = client.get("/site-admin/mcp", headers=world["admin"])
    tools = sorted(t.name for c in runtime.capabilities for t in c.tools)
    assert all(f"<code>{name}</code>" in page.text for name in tools)
    keep = [t for t in tools if t != "keyword_search"]
    saved = client.post(
        "/site-admin/mcp",
        data={"csrf_token": token, "mcp": "on", "enabled": keep},
        headers=world["admin"],
        follow_redirects=False,
    )
    assert saved.status_code == 303
    assert runtime.config.mcp_tools_disabled == ["keyword_search"]
    assert runtime.config.mcp_enabled
    off = client.post(
        "/site-admin/mcp", data={"csrf_token": token, "enabled": tools}, headers=world["admin"], follow_redirects=False
    )
    assert off.status_code == 303
    assert runtime.config.mcp_enabled is False
    assert runtime.config.mcp_tools_disabled == []
    unknown = client.post(
        "/site-admin/mcp", data={"csrf_token": token, "mcp": "on", "enabled": "nope"}, headers=world["admin"]
    )
    assert unknown.status_code == 400
    assert runtime.config.mcp_enabled is False
