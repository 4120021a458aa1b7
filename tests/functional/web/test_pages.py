"""The web pages over HTTP with real git repositories: home, search, repository, tree, file view and raw view."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.http import urls
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

HOSTILE = '<script>alert("x")</script>\n'
CODE = "".join(f"def f{n}(x):\n    return x + {n}\n" for n in range(1, 11))
Headers = dict[str, str]


@pytest.fixture
def world(tmp_path: Path, runtime: Runtime, client: TestClient) -> dict[str, Headers]:
    """A private repository (readable by the site admin only) and a public one; headers for both users."""
    private = make_repo(
        tmp_path / "priv",
        {
            "README.md": "# Project\n<img src=x onerror=alert(1)>\n",
            "src/app.py": CODE,
            "src/evil.html": HOSTILE,
            "logo.bin": b"\x00\x01\x02binary",
        },
        branches={"feature/x": {"src/new.py": "NEW = 1\n"}},
    )
    register_local_repo(runtime, private, "acme/secret", private=True)
    register_local_repo(runtime, make_repo(tmp_path / "pub", {"pub.py": "PUBLIC_MARK = 1\n"}), "acme/pub")
    owner = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    other = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    return {"owner": owner, "other": other}


def _sha(runtime: Runtime, name: str) -> str:
    return runtime.get(RepoService).resolve(INTERNAL, name).commit


def _private_urls(runtime: Runtime) -> list[str]:
    """Every kind of address of the private repository, as `codewell.http.urls` prints them (tools' format)."""
    sha = _sha(runtime, "acme/secret")
    return [
        urls.repo_url("", "acme/secret"),
        urls.tree_url("", "acme/secret", sha),
        urls.tree_url("", "acme/secret", sha, "src"),
        urls.tree_url("", "acme/secret", "feature/x", "src"),
        urls.blob_url("", "acme/secret", sha, "src/app.py"),
        urls.blob_url("", "acme/secret", sha, "src/app.py", (3, 4)),
        urls.blob_url("", "acme/secret", "main", "README.md"),
        urls.blob_url("", "acme/secret", "feature/x", "src/new.py"),
        urls.raw_url("", "acme/secret", sha, "src/app.py"),
        "/acme/secret/-/blob/src/app.py",
        "/acme/secret@main",
    ]


def test_every_page_of_a_private_repository_opens_for_its_reader_and_is_404_for_others(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    for url in _private_urls(runtime):
        assert client.get(url, headers=world["owner"]).status_code == 200, url
        hidden = client.get(url, headers=world["other"])
        missing = client.get(url.replace("acme/secret", "acme/missing"), headers=world["other"])
        # Exactly like a repository that does not exist: same status, same body (the name asked is echoed).
        assert hidden.status_code == missing.status_code == 404, url
        assert hidden.text.replace("acme/secret", "X") == missing.text.replace("acme/missing", "X")


def test_file_view_highlights_the_asked_lines_in_both_address_forms(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    sha = _sha(runtime, "acme/secret")
    encoded = client.get(urls.blob_url("", "acme/secret", sha, "src/app.py", (3, 4)), headers=world["owner"])
    query = client.get(f"/acme/secret@{sha}/-/blob/src/app.py?L3-4", headers=world["owner"])
    for page in (encoded, query):
        assert page.status_code == 200
        assert 'id="L3" class="hit"' in page.text
        assert 'id="L4" class="hit"' in page.text
        assert 'id="L2">' in page.text
        assert 'id="L5">' in page.text
        assert '<span class="k">def</span>' in page.text  # Pygments' Python lexer ran
        assert f'href="/acme/secret@{sha}/-/blob/src/app.py?L3-4"' in page.text  # the permalink, pinned
        assert f'href="/acme/secret@{sha}/-/raw/src/app.py"' in page.text


def test_hostile_repository_content_is_escaped(client: TestClient, runtime: Runtime, world: dict[str, Headers]) -> None:
    page = client.get("/acme/secret/-/blob/src/evil.html", headers=world["owner"])
    assert page.status_code == 200
    # The only script elements are the page's own (our static files, one nonce'd); the file's tag is text,
    # split into Pygments tokens.
    ours = page.text.count('<script src="/.static/') + page.text.count("<script nonce=")
    assert page.text.count("<script") == ours == 3
    assert '<span class="nt">script</span>' in page.text
    readme = client.get("/acme/secret", headers=world["owner"])
    assert "<img src=x" not in readme.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in readme.text
    raw = client.get(urls.raw_url("", "acme/secret", "main", "src/evil.html"), headers=world["owner"])
    assert raw.text == HOSTILE
    assert raw.headers["content-type"].startswith("text/plain")
    assert "sandbox" in raw.headers["content-security-policy"]


def test_tree_lists_directories_and_files_with_links(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    page = client.get("/acme/secret@feature/x/-/tree/src", headers=world["owner"])
    assert page.status_code == 200
    assert 'href="/acme/secret@feature/x/-/blob/src/new.py"' in page.text
    root = client.get("/acme/secret", headers=world["owner"])
    assert 'href="/acme/secret@main/-/tree/src"' in root.text
    binary = client.get("/acme/secret/-/blob/logo.bin", headers=world["owner"])
    assert binary.status_code == 200
    assert "Binary file" in binary.text


def test_home_lists_only_readable_repositories_and_anonymous_users_sign_in(
    client: TestClient, world: dict[str, Headers]
) -> None:
    mine = client.get("/", headers=world["owner"])
    theirs = client.get("/", headers=world["other"])
    assert 'href="/acme/secret"' in mine.text
    assert 'href="/acme/pub"' in mine.text
    assert "acme/secret" not in theirs.text
    assert 'href="/acme/pub"' in theirs.text
    anonymous = client.get("/search?q=x", follow_redirects=False)
    assert anonymous.status_code == 302
    assert anonymous.headers["location"].startswith("/sign-in?returnTo=")


def test_search_page_shows_escaped_highlighted_matches_linking_to_the_lines(
    client: TestClient, runtime: Runtime, world: dict[str, Headers]
) -> None:
    for name in ("acme/secret", "acme/pub"):
        runtime.get(SearchService).index_repo(INTERNAL, name)
    sha = _sha(runtime, "acme/secret")
    page = client.get("/search", params={"q": "alert"}, headers=world["owner"])
    assert page.status_code == 200
    # Highlighted (each token escaped), the match marked inside its token.
    assert (
        '<span class="nt">script</span><span class="p">&gt;</span><span class="nx"><mark>alert</mark></span>'
        in page.text
    )
    assert "<script>alert" not in page.text
    assert f'href="/acme/secret@{sha}/-/blob/src/evil.html?L1#L1"' in page.text
    assert "2 matches in 2 files" in page.text  # README.md and src/evil.html
    hidden = client.get("/search", params={"q": "alert"}, headers=world["other"])
    assert "acme/secret" not in hidden.text
    assert "0 matches in 0 files" in hidden.text
    ordered = client.get("/search", params={"q": "return x"}, headers=world["owner"])
    results = runtime.get(SearchService).search(INTERNAL, "return x")
    expected = [f"/acme/secret@{sha}/-/blob/{f.path}" + '"' for f in results.files]
    positions = [ordered.text.index(link) for link in expected]
    assert positions == sorted(positions)  # the service's (keyword_search's) order
    bad = client.get("/search", params={"q": "/(unclosed/"}, headers=world["owner"])
    assert bad.status_code == 400
    assert 'role="alert"' in bad.text


def test_repository_routes_shadow_no_other_route(client: TestClient, world: dict[str, Headers]) -> None:
    # `/.x` paths are never repository pages: the router's own 404, even for anonymous callers (not a sign-in).
    nope = client.get("/.api/nope", headers=world["owner"])
    assert nope.json() == {"error": {"code": "not_found", "message": "no route for GET /.api/nope"}}
    assert client.get("/.api/nope").status_code == 404
    assert client.get("/settings/tokens", headers=world["owner"]).status_code == 200
    assert client.get("/healthz").status_code == 200
