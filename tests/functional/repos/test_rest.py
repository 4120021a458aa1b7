"""The /.api/repos REST API over real HTTP semantics (Starlette TestClient over the whole app)."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from codewell.core.actors import INTERNAL
from codewell.jobs.service import JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.gitfixtures import register_local_repo


def user_headers(runtime: Runtime, username: str, *, site_admin: bool = False) -> dict[str, str]:
    return auth_headers(make_token(runtime, make_user(runtime, username, site_admin=site_admin)))


def test_browse_a_repository_whose_name_has_slashes(client: TestClient, runtime: Runtime, sample_source: Path) -> None:
    register_local_repo(runtime, sample_source, "local/team/sample")
    client.headers.update(user_headers(runtime, "alice"))
    listing = client.get("/.api/repos", params={"query": "team"}).json()
    assert [r["name"] for r in listing["repos"]] == ["local/team/sample"]
    assert listing["hasMoreResults"] is False
    assert client.get("/.api/repos/local/team/sample").json()["syncState"] == "ready"
    files = client.get("/.api/repos/local/team/sample/-/files", params={"path": "src"}).json()
    assert [e["path"] for e in files["entries"]] == ["src/app.py", "src/util.py"]
    assert len(files["commit"]) == 40
    content = client.get(
        "/.api/repos/local/team/sample/-/file", params={"path": "src/app.py", "startLine": 4, "revision": "v1.0"}
    ).json()
    assert content["content"] == "def main():\n    return util.helper()\n"
    assert content["startLine"] == 4
    refs = client.get("/.api/repos/local/team/sample/-/refs", params={"tagsOnly": "true"}).json()
    assert [r["shortName"] for r in refs["refs"]] == ["v1.0", "v2.0", "v3.0"]


def test_errors_use_the_json_envelope_with_specific_codes(
    client: TestClient, runtime: Runtime, sample_source: Path
) -> None:
    register_local_repo(runtime, sample_source, "local/sample")
    client.headers.update(user_headers(runtime, "alice"))
    cases = [
        ("/.api/repos/local/sample/-/file?path=src", 400, "invalid_input", "is a directory"),
        ("/.api/repos/local/sample/-/file?path=../x", 400, "invalid_input", "'..'"),
        ("/.api/repos/local/sample/-/file?path=README.md&startLine=x", 400, "invalid_input", "whole number"),
        ("/.api/repos/local/sample/-/file?path=README.md&startLine=99", 400, "invalid_input", "past the end"),
        ("/.api/repos/local/sample/-/file?path=nope.txt", 404, "not_found", "not found"),
        ("/.api/repos/local/sample/-/files?revision=nope", 404, "not_found", "revision 'nope' not found"),
        ("/.api/repos/local/sample/-/refs?limit=0", 400, "invalid_input", "between 1 and 500"),
        ("/.api/repos/local/nope/-/files", 404, "not_found", "repository 'local/nope' not found"),
        ("/.api/repos?limit=10001", 400, "invalid_input", "between 1 and 10000"),
    ]
    for url, status, code, message in cases:
        response = client.get(url)
        assert response.status_code == status, url
        error = response.json()["error"]
        assert error["code"] == code, url
        assert message in error["message"], url
        assert error["hint"], url


def test_private_repos_read_as_missing_for_users_without_a_grant_and_for_anonymous(
    client: TestClient, runtime: Runtime, sample_source: Path
) -> None:
    register_local_repo(runtime, sample_source, "local/secret", private=True)
    set_site_config(runtime, {"auth.public": True})
    for headers in (user_headers(runtime, "bob"), {}):
        hidden = client.get("/.api/repos/local/secret/-/file", params={"path": "README.md"}, headers=headers)
        missing = client.get("/.api/repos/local/absent/-/file", params={"path": "README.md"}, headers=headers)
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["error"]["message"].replace("secret", "absent") == missing.json()["error"]["message"]
        assert client.get("/.api/repos", headers=headers).json()["repos"] == []
    admin = user_headers(runtime, "root", site_admin=True)
    assert client.get("/.api/repos/local/secret/-/file?path=README.md", headers=admin).status_code == 200


def test_sync_add_and_remove_need_a_site_admin(client: TestClient, runtime: Runtime, sample_source: Path) -> None:
    register_local_repo(runtime, sample_source, "local/sample")
    bob = user_headers(runtime, "bob")
    assert client.post("/.api/repos/local/sample/-/sync", headers=bob).status_code == 403
    assert client.post("/.api/repos", json={"url": "https://example.com/a.git"}, headers=bob).status_code == 403
    assert client.delete("/.api/repos/local/sample", headers=bob).status_code == 403
    assert client.put("/.api/repos/local/sample", headers=bob).status_code == 405
    admin = user_headers(runtime, "root", site_admin=True)
    synced = client.post("/.api/repos/local/sample/-/sync", headers=admin).json()
    assert synced["ok"] is True
    assert synced["changed"] is False
    assert synced["syncState"] == "ready"
    assert 'codewell_repo_syncs_total{result="unchanged"}' in client.get("/metrics", headers=admin).text
    queued = client.post("/.api/repos/local/sample/-/sync?wait=false", headers=admin)
    assert queued.status_code == 202
    assert queued.json()["queued"] is True
    sample = runtime.get(RepoService).get(INTERNAL, "local/sample")
    waiting = runtime.get(JobService).list_jobs(INTERNAL, kind="repos.sync", state="queued")
    assert [job.resource for job in waiting] == [repo_resource(sample.id)]
    assert client.post("/.api/repos/local/sample/-/sync?wait=false", headers=bob).status_code == 403
    added = client.post("/.api/repos", json={"url": "https://example.com/org/a.git", "private": True}, headers=admin)
    assert added.status_code == 201
    assert added.json()["name"] == "example.com/org/a"
    assert added.json()["private"]
    assert client.post("/.api/repos", json={"url": 5}, headers=admin).status_code == 400
    assert client.delete("/.api/repos/example.com/org/a", headers=admin).json() == {"removed": "example.com/org/a"}
    assert client.get("/.api/repos/example.com/org/a", headers=admin).status_code == 404


def test_rest_lookups_suggest_and_bound_the_query(client: TestClient, runtime: Runtime, sample_source: Path) -> None:
    register_local_repo(runtime, sample_source, "local/team/sample")
    client.headers.update(user_headers(runtime, "alice"))
    missing = client.get("/.api/repos/sample/-/files")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "repository 'sample' not found; did you mean local/team/sample?"
    # Before: SQLite's "LIKE or GLOB pattern too complex" surfaced as an internal error.
    long = client.get("/.api/repos", params={"query": "x" * 60_000})
    assert long.status_code == 400
    assert "repository names have at most 512" in long.json()["error"]["message"]
