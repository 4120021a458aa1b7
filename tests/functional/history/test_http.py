"""The history REST API over real HTTP handling (TestClient over the whole app), real git and database."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.accounts.service import AccountService
from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.unit.history.builders import RepoBuilder, build_release, register


@pytest.fixture
def repos(runtime: Runtime, client: TestClient, tmp_path: Path) -> RepoBuilder:
    public = RepoBuilder(tmp_path / "public")
    public.commit("Add parser", {"parser.py": "def parse():\n    pass\n"}, date="2024-01-01T00:00:00Z")
    public.git("tag", "v1")
    public.commit(
        "Fix parser bug",
        {"parser.py": "def parse():\n    return 42\n"},
        author="Bob <bob@x.org>",
        date="2024-02-01T00:00:00Z",
    )
    private = RepoBuilder(tmp_path / "private")
    private.commit("Fix private parser", {"p.py": "return 42\n"}, author="Bob <bob@x.org>")
    register(runtime, public.path, "git.example/public")
    register(runtime, private.path, "git.example/private", private=True)
    # A signed-in user without a grant on the private repository.
    client.headers.update(auth_headers(make_token(runtime, make_user(runtime, "reader"))))
    return public


def test_commit_search_over_http(client: TestClient, repos: RepoBuilder) -> None:
    response = client.get("/.api/history/commits", params={"repos": ["/git.example/"], "messageTerms": "parser"})
    assert response.status_code == 200
    body = response.json()
    # A user without a grant: the private repository is neither searched nor named.
    assert [c["title"] for c in body["commits"]] == ["Fix parser bug", "Add parser"]
    assert body["commits"][0]["repository"] == "git.example/public"
    assert body["commits"][0]["author"] == "Bob <bob@x.org>"
    assert body["commits"][0]["url"].endswith(f"/git.example/public/-/commit/{body['commits'][0]['commit']}")
    assert body["limitHit"] is False


def test_unknown_and_private_repos_read_the_same(client: TestClient, repos: RepoBuilder) -> None:
    response = client.get("/.api/history/commits", params={"repos": ["git.example/private", "git.example/none"]})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert "git.example/private, git.example/none" in error["message"]
    partial = client.get("/.api/history/commits", params={"repos": ["git.example/public", "git.example/private"]})
    assert partial.json()["unknownRepos"] == ["git.example/private"]


def test_bad_input_is_a_clear_400(client: TestClient, repos: RepoBuilder) -> None:
    cases = [
        ({"repos": "git.example/public", "after": "2024-05-01", "before": "2024-01-01"}, "later than"),
        ({"repos": "git.example/public", "after": "whenever"}, "cannot parse `after`"),
        ({"repos": "git.example/public", "count": "500"}, "`count`"),
        ({"repos": "git.example/public", "count": "many"}, "`count` must be an integer"),
        ({"repos": "git.example/public", "revisions": "nope"}, "revision not found"),
        ({"repos": "git.example/public", "bogus": "1"}, "unknown parameter"),
    ]
    for params, message in cases:
        response = client.get("/.api/history/commits", params=params)
        assert response.status_code == 400, params
        assert message in response.json()["error"]["message"]
        assert response.json()["error"]["hint"]


def test_diff_search_compare_and_contributors(client: TestClient, repos: RepoBuilder) -> None:
    diff = client.get("/.api/history/diffs", params={"pattern": r"return \d+", "repos": "git.example/public"}).json()
    assert [r["commit"][:7] for r in diff["results"]] == [repos.git("rev-parse", "--short=7", "HEAD")]
    assert ">+    return 42" in diff["results"][0]["diffHunk"]
    assert diff["results"][0]["matchRanges"]
    bad = client.get("/.api/history/diffs", params={"pattern": "(", "repos": "git.example/public"})
    assert bad.status_code == 400
    compare = client.get("/.api/history/compare", params={"repo": "git.example/public", "base": "v1", "head": "main"})
    body = compare.json()
    assert (body["totalAdded"], body["totalDeleted"], body["totalModified"]) == (1, 1, 1)
    assert body["files"][0]["path"] == "parser.py"
    assert body["files"][0]["hunks"][0]["body"] == " def parse():\n-    pass\n+    return 42\n"
    hidden = client.get("/.api/history/compare", params={"repo": "git.example/private", "base": "HEAD", "head": "HEAD"})
    assert hidden.status_code == 404
    contributors = client.get("/.api/history/contributors", params={"authors": "bob@x.org"}).json()
    assert contributors == {
        "repositories": [
            {
                "repoName": "git.example/public",
                "repoCommitCount": 1,
                "repoMostRecentCommitDate": "2024-02-01T00:00:00+00:00",
            }
        ]
    }


def test_a_grant_makes_the_private_repository_visible(runtime: Runtime, client: TestClient, repos: RepoBuilder) -> None:
    reader = runtime.get(RepoService)
    params = {"repos": "/git.example/", "messageTerms": "private"}
    assert client.get("/.api/history/commits", params=params).json()["commits"] == []

    reader.set_repo_users(INTERNAL, "git.example/private", [runtime.get(AccountService).get_by_username("reader").id])
    assert [c["title"] for c in client.get("/.api/history/commits", params=params).json()["commits"]] == [
        "Fix private parser"
    ]
    contributors = client.get("/.api/history/contributors", params={"authors": "bob"}).json()["repositories"]
    assert sorted(r["repoName"] for r in contributors) == ["git.example/private", "git.example/public"]


def test_anonymous_callers_are_refused(client: TestClient, repos: RepoBuilder) -> None:
    del client.headers["Authorization"]
    assert client.get("/.api/history/commits", params={"repos": "git.example/public"}).status_code == 401


def test_rest_compare_keeps_every_hunk_of_the_page(client: TestClient, runtime: Runtime, tmp_path: Path) -> None:
    # The MCP tool cuts hunks to its output budget; REST answers the whole page (clients page with `first`).
    build_release(runtime, tmp_path)
    client.headers.update(auth_headers(make_token(runtime, make_user(runtime, "reader"))))
    params = {"repo": "rel.example/r", "base": "v1", "head": "v2", "first": "2"}
    body = client.get("/.api/history/compare", params=params).json()
    assert [f["path"] for f in body["files"]] == ["big/a.txt", "big/b.txt"]
    assert [len(f["hunks"]) for f in body["files"]] == [90, 90]
    assert all("omittedHunks" not in f for f in body["files"])
