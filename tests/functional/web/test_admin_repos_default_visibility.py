"""/site-admin/repositories shows `repos.defaultVisibility` and what it means, and its add form defaults to it:
a form submitted as the browser would (the checkbox as the page rendered it) registers a repository that the
site's default governs (issue #33, item 8)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.gitfixtures import make_repo

pytestmark = pytest.mark.database

Headers = dict[str, str]


def _section(page: str) -> str:
    found = re.search(r'<section id="default-visibility"[^>]*>(.*?)</section>', page, re.S)
    assert found, "no default visibility section"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


def _private_box_checked(page: str) -> bool:
    found = re.search(r'<input type="checkbox" name="private"([^>]*)>', page)
    assert found, "no private checkbox"
    return "checked" in found.group(1)


def _add_as_the_browser_would(client: TestClient, headers: Headers, page: str, url: Path, name: str) -> None:
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token
    form = {"csrf_token": token.group(1), "action": "add", "url": str(url), "name": name}
    if _private_box_checked(page):
        form["private"] = "on"
    added = client.post("/site-admin/repositories", data=form, headers=headers, follow_redirects=False)
    assert added.status_code == 303, added.text


def test_the_page_shows_the_private_default_and_the_form_adds_private_repositories(
    client: TestClient, runtime: Runtime, tmp_path: Path
) -> None:
    assert runtime.config.repos_default_visibility == "private"  # a new site config's value
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    bob = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    page = client.get("/site-admin/repositories", headers=admin)
    assert page.status_code == 200
    said = _section(page.text)
    assert said.startswith("Default visibility: private unless granted")
    assert 'repos.defaultVisibility is "private"' in said
    assert "only site admins and the users granted it" in said
    assert _private_box_checked(page.text)
    assert 'href="/site-admin/configuration"' in page.text

    _add_as_the_browser_would(client, admin, page.text, make_repo(tmp_path / "src", {"a.py": "A = 1\n"}), "acme/new")
    assert runtime.get(RepoService).get(INTERNAL, "acme/new").private
    assert client.get("/.api/repos/acme/new", headers=bob).status_code == 404


def test_the_page_follows_a_site_that_chose_everyone(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    bob = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    set_site_config(runtime, {"repos.defaultVisibility": "everyone"})
    page = client.get("/site-admin/repositories", headers=admin).text
    said = _section(page)
    assert said.startswith("Default visibility: every signed-in user")
    assert 'repos.defaultVisibility is "everyone"' in said
    assert "anonymous" not in said
    assert not _private_box_checked(page)
    _add_as_the_browser_would(client, admin, page, make_repo(tmp_path / "src", {"a.py": "A = 1\n"}), "acme/open")
    assert not runtime.get(RepoService).get(INTERNAL, "acme/open").private
    assert client.get("/.api/repos/acme/open", headers=bob).status_code == 200

    set_site_config(runtime, {"auth.public": True})
    said = _section(client.get("/site-admin/repositories", headers=admin).text)
    assert "and by anonymous visitors too (auth.public is on)" in said
