"""History pages over HTTP with real git repositories: commit log (repository and path, paged), one commit with
its diff, compare, the links from file and tree views, and every history URL the MCP tools print."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.history import compare_page, render
from codewell.history.service import LOG_PAGE_DEFAULT, HistoryService
from codewell.http import urls
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import commit, git, make_repo, register_local_repo

Headers = dict[str, str]
EXTRA_COMMITS = LOG_PAGE_DEFAULT + 3  # more than one log page


@pytest.fixture
def world(tmp_path: Path, runtime: Runtime, client: TestClient) -> dict[str, object]:
    """A private repository with a long history (one file touched every commit, one touched twice, a rename,
    a hostile line in a diff, a branch with a slash) and headers of its reader and of another user."""
    path = make_repo(tmp_path / "hist", {"README.md": "# hist\n", "src/app.py": "X = 0\n", "old.txt": "old\n"})
    shas = {"root": git(path, "rev-parse", "HEAD").strip()}
    for n in range(1, EXTRA_COMMITS + 1):
        commit(path, {"counter.txt": f"{n}\n"}, message=f"count to {n}")
    shas["app"] = commit(path, {"src/app.py": "X = 1\n"}, message="change app")
    shas["rename"] = commit(path, rename={"old.txt": "new.txt"}, message="rename old to new")
    shas["hostile"] = commit(path, {"src/app.py": 'X = "<script>alert(1)</script>"\n'}, message="<b>bold</b> subject")
    git(path, "checkout", "-q", "-b", "release/1.0")
    shas["release"] = commit(path, {"src/app.py": "X = 2\n"}, message="release fix")
    git(path, "checkout", "-q", "main")
    register_local_repo(runtime, path, "acme/hist", private=True)
    owner = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    other = auth_headers(make_token(runtime, make_user(runtime, "bob")))
    return {"owner": owner, "other": other, "shas": shas}


def test_commit_log_is_paged_newest_first_and_a_path_log_lists_only_its_commits(
    client: TestClient, world: dict[str, object]
) -> None:
    owner: Headers = world["owner"]  # type: ignore[assignment]
    shas: dict[str, str] = world["shas"]  # type: ignore[assignment]
    first = client.get("/acme/hist/-/commits", headers=owner)
    assert first.status_code == 200
    assert first.text.index("&lt;b&gt;bold&lt;/b&gt; subject") < first.text.index("rename old to new")
    assert "<b>bold</b>" not in first.text
    assert first.text.count('href="/acme/hist/-/commit/') == LOG_PAGE_DEFAULT
    assert 'href="/acme/hist@main/-/commits?page=2"' in first.text
    assert "release fix" not in first.text  # another branch
    second = client.get("/acme/hist@main/-/commits?page=2", headers=owner)
    assert f'href="/acme/hist/-/commit/{shas["root"]}"' in second.text  # the oldest commit ends the log
    assert 'href="/acme/hist@main/-/commits?page=1"' in second.text
    assert "?page=3" not in second.text
    app_log = client.get("/acme/hist/-/commits/src/app.py", headers=owner)
    assert app_log.text.count('href="/acme/hist/-/commit/') == 3  # root, "change app", the hostile change
    assert "count to" not in app_log.text
    branch_log = client.get("/acme/hist@release/1.0/-/commits/src/app.py", headers=owner)
    assert "release fix" in branch_log.text
    assert client.get("/acme/hist/-/commits/no/such/file", headers=owner).status_code == 404
    assert client.get("/acme/hist/-/commits?page=0", headers=owner).status_code == 400


def test_commit_page_shows_the_escaped_diff_with_links_to_both_sides(
    client: TestClient, world: dict[str, object]
) -> None:
    owner: Headers = world["owner"]  # type: ignore[assignment]
    shas: dict[str, str] = world["shas"]  # type: ignore[assignment]
    page = client.get(f"/acme/hist/-/commit/{shas['hostile']}", headers=owner)
    assert page.status_code == 200
    assert "+X = &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in page.text
    assert page.text.count("<script") == page.text.count('<script src="/.static/')  # none from the diff
    assert '<tr class="del"><td class="num">1</td><td class="num"></td><td>-X = 1</td></tr>' in page.text
    assert f'href="/acme/hist@{shas["hostile"]}/-/blob/src/app.py"' in page.text  # the file after
    assert f'href="/acme/hist@{shas["rename"]}/-/blob/src/app.py"' in page.text  # before: at the parent
    assert f'href="/acme/hist@{shas["hostile"]}/-/commits/src/app.py"' in page.text  # its history
    renamed = client.get(f"/acme/hist/-/commit/{shas['rename']}", headers=owner)
    assert "old.txt → new.txt" in renamed.text
    assert "renamed" in renamed.text
    root = client.get(f"/acme/hist/-/commit/{shas['root'][:10]}", headers=owner)  # short SHAs resolve
    assert root.status_code == 200
    assert "3 files changed" in root.text
    assert client.get("/acme/hist/-/commit/0123456789abcdef", headers=owner).status_code == 404


def test_compare_page_opens_at_the_address_compare_revisions_prints(
    client: TestClient, runtime: Runtime, world: dict[str, object]
) -> None:
    owner: Headers = world["owner"]  # type: ignore[assignment]
    url = urls.compare_url("", "acme/hist", "main", "release/1.0")
    assert "release%2F1.0" in url
    page = client.get(url, headers=owner)
    assert page.status_code == 200
    assert "-X = &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in page.text
    assert "+X = 2" in page.text
    assert "1 file changed" in page.text
    assert client.get("/acme/hist/-/compare/main", headers=owner).status_code == 400


def test_tree_and_file_views_link_to_their_history(client: TestClient, world: dict[str, object]) -> None:
    owner: Headers = world["owner"]  # type: ignore[assignment]
    blob = client.get("/acme/hist@main/-/blob/src/app.py", headers=owner)
    assert 'href="/acme/hist@main/-/commits/src/app.py"' in blob.text
    tree = client.get("/acme/hist@main/-/tree/src", headers=owner)
    assert 'href="/acme/hist@main/-/commits/src"' in tree.text
    for link in ('href="/acme/hist@main/-/commits/src/app.py"', 'href="/acme/hist@main/-/commits/src"'):
        target = link.split('"')[1]
        assert client.get(target, headers=owner).status_code == 200


def test_every_history_url_the_tools_print_opens_for_the_reader_and_is_404_for_others(
    client: TestClient, runtime: Runtime, world: dict[str, object]
) -> None:
    owner: Headers = world["owner"]  # type: ignore[assignment]
    other: Headers = world["other"]  # type: ignore[assignment]
    history = runtime.get(HistoryService)
    history.index_repo(runtime.get(RepoService).get(INTERNAL, "acme/hist"))
    external = runtime.external_url
    found = history.commit_search(INTERNAL, ["acme/hist"], count=100)
    printed = [c["url"] for c in render.commits_json(found, external, "")["commits"]]
    diffs = history.diff_search(INTERNAL, "alert", ["acme/hist"])
    printed += [d["url"] for d in render.diffs_json(diffs, external, "")["results"]]
    comparison = history.compare(INTERNAL, "acme/hist", "main", "release/1.0")
    text, _ = compare_page.comparison_answer(comparison, external)
    printed += [line.removeprefix("URL: ") for line in text.splitlines() if line.startswith("URL: ")]
    assert len(printed) >= EXTRA_COMMITS + 5
    for url in printed:
        assert url.startswith(external)
        path = url.removeprefix(external)
        assert client.get(path, headers=owner).status_code == 200, path
        hidden = client.get(path, headers=other)
        missing = client.get(path.replace("acme/hist", "acme/missing"), headers=other)
        assert hidden.status_code == missing.status_code == 404, path
        assert hidden.text.replace("acme/hist", "X") == missing.text.replace("acme/missing", "X")


def test_blame_names_the_commit_that_last_changed_each_line(client: TestClient, world: dict[str, object]) -> None:
    owner: Headers = world["owner"]  # type: ignore[assignment]
    other: Headers = world["other"]  # type: ignore[assignment]
    shas: dict[str, str] = world["shas"]  # type: ignore[assignment]
    blob = client.get("/acme/hist@main/-/blob/src/app.py", headers=owner)
    assert 'href="/acme/hist@main/-/blame/src/app.py"' in blob.text
    page = client.get("/acme/hist@main/-/blame/src/app.py", headers=owner)
    assert page.status_code == 200
    assert f'href="/acme/hist/-/commit/{shas["hostile"]}"' in page.text
    assert "X = &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in page.text
    branch = client.get("/acme/hist@release/1.0/-/blame/src/app.py", headers=owner)
    assert f'href="/acme/hist/-/commit/{shas["release"]}"' in branch.text
    readme = client.get("/acme/hist/-/blame/README.md", headers=owner)
    assert f'href="/acme/hist/-/commit/{shas["root"]}"' in readme.text
    assert client.get("/acme/hist/-/blame/README.md", headers=other).status_code == 404
    assert client.get("/acme/hist/-/blame/nope.txt", headers=owner).status_code == 404
