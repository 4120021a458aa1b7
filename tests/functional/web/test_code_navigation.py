"""Code navigation in the web app over real HTTP: identifier links in the file view, the definition page (a
redirect or the ranked candidates), the references page, and a private repository's 404."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.jobs.runner import drain
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.browser import ARTIFACTS, AXE_VERSION, CHROMIUM, CHROMIUM_ARGS, axe_source, serve_app, sign_in
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

Headers = dict[str, str]
PASSWORD = "correct horse battery staple"
FILES = {
    "pkg/__init__.py": "",
    "pkg/impl.py": "def exported():\n    return 1\n\n\nclass Config:\n    def load(self):\n        return exported()\n",
    "app/main.py": (
        "from pkg.impl import Config, exported\n\n\n"
        "def run():\n    Config().load()\n    return exported() + exported()\n"
    ),
    "one/first.py": "def process(items):\n    return items\n",
    "two/second.py": "def process(items):\n    return list(items)\n",
    "app/loose.py": "def go(data):\n    return process(data)\n",
    "cmd/main.go": "package main\n\nfunc main() {\n\t_ = local()\n}\n",
    "cmd/local.go": "package main\n\nfunc local() int { return 1 }\n",
}


def _index(runtime: Runtime, name: str) -> None:
    """Index `name`, then run what the new index causes (codenav's symbols), as a job runner would."""
    repo = runtime.get(RepoService).get(INTERNAL, name)
    runtime.get(SearchService).index(repo)
    drain(runtime, repo_resource(repo.id))


@pytest.fixture
def world(tmp_path: Path, runtime: Runtime) -> dict[str, Headers]:
    register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")
    register_local_repo(runtime, make_repo(tmp_path / "secret", FILES), "acme/secret", private=True)
    _index(runtime, "acme/app")
    _index(runtime, "acme/secret")
    owner = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    other = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    return {"owner": owner, "other": other}


def _sha(runtime: Runtime, name: str) -> str:
    return runtime.get(RepoService).resolve(INTERNAL, name).commit


def _links(html: str) -> dict[tuple[str, str], str]:
    """(identifier, title) → href of the identifier links of a file view (the first of each)."""
    found: dict[tuple[str, str], str] = {}
    for href, title, name in re.findall(r'<a class="n\w* ident" href="([^"]+)" title="([^"]+)">(\w+)</a>', html):
        found.setdefault((name, title), unescape(href))
    return found


def test_a_call_site_links_to_its_definition_pinned_to_the_commit(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    sha = _sha(runtime, "acme/app")
    page = client.get("/acme/app/-/blob/app/main.py", headers=world["other"])
    assert page.status_code == 200
    links = _links(page.text)
    href = links[("exported", "Go to definition")]
    assert href.startswith(f"/acme/app@{sha}/-/definition?")
    assert "line=1" in href
    # `run` is defined right here: its link lists its references instead.
    assert ("run", "Find references") in links
    # Parameters' and builtins' names are not links; `self` never is.
    assert "self" not in {name for name, _ in links}

    landed = client.get(href, headers=world["other"], follow_redirects=False)
    assert landed.status_code == 303, landed.text
    assert landed.headers["location"] == f"/acme/app@{sha}/-/blob/pkg/impl.py?L1-2#L1"
    target = client.get(landed.headers["location"], headers=world["other"])
    assert 'id="L1" class="hit"' in target.text

    # A qualified use (`Config().load` has no owner name; `Config` has) resolves through the import.
    config = client.get(links[("Config", "Go to definition")], headers=world["other"], follow_redirects=False)
    assert config.headers["location"].startswith(f"/acme/app@{sha}/-/blob/pkg/impl.py?L5-")


def test_go_call_site_resolves_within_its_package(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    sha = _sha(runtime, "acme/app")
    links = _links(client.get(f"/acme/app@{sha}/-/blob/cmd/main.go", headers=world["other"]).text)
    landed = client.get(links[("local", "Go to definition")], headers=world["other"], follow_redirects=False)
    assert landed.status_code == 303
    assert landed.headers["location"] == f"/acme/app@{sha}/-/blob/cmd/local.go?L3-3#L3"


def test_an_ambiguous_name_lists_ranked_candidates_with_how_they_were_found(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    links = _links(client.get("/acme/app/-/blob/app/loose.py", headers=world["other"]).text)
    page = client.get(links[("process", "Go to definition")], headers=world["other"], follow_redirects=False)
    assert page.status_code == 200, page.headers
    assert "Definitions of <code>process</code>" in page.text
    assert "one/first.py:1" in page.text
    assert "two/second.py:1" in page.text
    assert "search-based" in page.text
    assert "Find references" in page.text


def test_references_page_lists_the_call_sites(client: TestClient, runtime: Runtime, world: dict[str, Headers]) -> None:
    sha = _sha(runtime, "acme/app")
    impl = client.get(f"/acme/app@{sha}/-/blob/pkg/impl.py", headers=world["other"]).text
    href = _links(impl)[("exported", "Find references")]
    page = client.get(href, headers=world["other"])
    assert page.status_code == 200, page.text
    assert f'href="/acme/app@{sha}/-/blob/app/main.py?L6#L6"' in page.text
    assert f'href="/acme/app@{sha}/-/blob/pkg/impl.py?L7#L7"' in page.text
    assert "return exported() + exported()" in page.text
    # From a use (not the definition's file) the page lists the references of what the use resolves to.
    from_use = client.get(
        f"/acme/app@{sha}/-/references?path=app/main.py&line=6&symbol=exported", headers=world["other"]
    )
    assert from_use.status_code == 200
    assert f"/acme/app@{sha}/-/blob/app/main.py?L6#L6" in from_use.text


def test_a_private_repository_answers_404_like_a_missing_one(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    sha = _sha(runtime, "acme/secret")
    query = "path=app/main.py&line=6&symbol=exported"
    for page in ("definition", "references"):
        own = client.get(f"/acme/secret@{sha}/-/{page}?{query}", headers=world["owner"], follow_redirects=False)
        assert own.status_code in (200, 303), own.text
        hidden = client.get(f"/acme/secret@{sha}/-/{page}?{query}", headers=world["other"])
        missing = client.get(f"/acme/nothing@{sha}/-/{page}?{query}", headers=world["other"])
        assert hidden.status_code == missing.status_code == 404
        assert "secret" not in hidden.text.replace("acme/secret", "")  # nothing beyond the name asked for
    bad = client.get(f"/acme/app@{sha}/-/definition?path=app/main.py", headers=world["other"])
    assert bad.status_code == 400


def test_a_5000_line_file_with_links_stays_fast(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    code = "".join(f"def f{n}(x):  # {n}\n    return f{max(n - 1, 0)}(x) + {n}\n" for n in range(2500))
    register_local_repo(runtime, make_repo(tmp_path / "big", {"big.py": code}), "acme/big")
    _index(runtime, "acme/big")
    headers = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    first = client.get("/acme/big/-/blob/big.py", headers=headers)
    assert first.text.count('<tr id="L') == 5000
    assert first.text.count('title="Go to definition"') >= 2500
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        again = client.get("/acme/big/-/blob/big.py?L4000-4001", headers=headers)
        timings.append(time.perf_counter() - started)
        assert 'id="L4000" class="hit"' in again.text
    print("5,000-line file view with links, s:", sorted(timings), "links:", again.text.count(' class="n ident"'))
    assert sorted(timings)[2] < 0.25, timings


@pytest.fixture
def browser_page(runtime: Runtime, tmp_path: Path) -> Iterator[tuple[str, Page]]:
    """The app over real HTTP with acme/app indexed, and a chromium tab signed in as a user who can read it."""
    make_user(runtime, "carol", password=PASSWORD)
    register_local_repo(runtime, make_repo(tmp_path / "app", FILES), "acme/app")
    with serve_app(runtime) as site, sync_playwright() as playwright:
        _index(runtime, "acme/app")  # once the app (whose setup wires codenav to search's indexing) exists
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            sign_in(tab, site, "carol", PASSWORD)
            yield site, tab
        finally:
            browser.close()


@pytest.mark.browser
def test_follow_a_link_to_a_definition_then_its_references_in_a_browser(browser_page: tuple[str, Page]) -> None:
    site, tab = browser_page
    tab.goto(f"{site}/acme/app/-/blob/app/main.py")
    with tab.expect_navigation():
        tab.locator('tr#L6 a.ident[title="Go to definition"]', has_text="exported").first.click()
    assert "/-/blob/pkg/impl.py?L1-2" in tab.url
    assert tab.locator("tr.hit").first.get_attribute("id") == "L1"
    tab.locator('tr#L1 a.ident[title="Find references"]', has_text="exported").click()
    expect(tab.locator("#refs-panel")).to_contain_text("return exported() + exported()")
    with tab.expect_navigation():
        tab.locator("#refs-panel a", has_text="open as a page").click()
    assert "/-/references?" in tab.url
    assert "return exported() + exported()" in tab.locator("main").inner_text()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "web-references.png"), full_page=True)
    axe = axe_source()
    found: dict[str, list[str]] = {}
    pages = [
        "/acme/app/-/blob/app/main.py",
        "/acme/app/-/definition?path=app/loose.py&line=2&symbol=process",
        "/acme/app/-/references?path=pkg/impl.py&line=1&symbol=exported",
        "/search?q=where+is+the+config+loaded&mode=nls",
    ]
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        for url in pages:
            tab.goto(f"{site}{url}")
            tab.evaluate(axe)
            result = tab.evaluate("axe.run(document, {resultTypes: ['violations']})")
            assert result["testEngine"]["version"] == AXE_VERSION
            bad = [
                f"{v['id']} ({v['impact']}): {v['nodes'][0]['target']}"
                for v in result["violations"]
                if v["impact"] in ("serious", "critical")
            ]
            if bad:
                found[f"{scheme} {url}"] = bad
    assert found == {}, json.dumps(found, indent=1)
