"""Repository permissions end to end: grants set through the accounts API/CLI decide what list_repos,
read_file and search return; hidden repositories read exactly like missing ones."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from codewell.accounts.service import AccountService
from codewell.cli.main import cli
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

pytestmark = pytest.mark.database


@pytest.fixture
def world(tmp_path: Path, runtime: Runtime, client: TestClient) -> dict[str, dict[str, str]]:
    """A public and a private repository, and headers for an admin, a granted user and an ungranted one."""
    public = make_repo(tmp_path / "pub", {"main.c": "int visible_marker = 1;\n"})
    private = make_repo(tmp_path / "priv", {"secret.c": "int hidden_marker = 2;\n"})
    register_local_repo(runtime, public, "local/pub")
    register_local_repo(runtime, private, "local/priv", private=True)
    return {
        "admin": auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True))),
        "alice": auth_headers(make_token(runtime, make_user(runtime, "alice"))),
        "bob": auth_headers(make_token(runtime, make_user(runtime, "bob"))),
    }


def repo_names(client: TestClient, headers: dict[str, str]) -> list[str]:
    response = client.get("/.api/repos", headers=headers)
    assert response.status_code == 200, response.text
    return sorted(r["name"] for r in response.json()["repos"])


def search_repos(client: TestClient, headers: dict[str, str], query: str) -> set[str]:
    """Repositories with matches for `query`, waiting briefly for the background indexer."""
    body: dict[str, Any] = {}
    for _ in range(100):
        response = client.get("/.api/search", params={"q": query}, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        if body["files"] or not body.get("skipped"):
            break
        time.sleep(0.1)
    return {f["repository"] for f in body["files"]}


def test_grants_decide_what_each_user_reads(client: TestClient, world: dict[str, dict[str, str]]) -> None:
    admin, alice, bob = world["admin"], world["alice"], world["bob"]
    assert repo_names(client, bob) == ["local/pub"]
    assert repo_names(client, alice) == ["local/pub"]
    assert repo_names(client, admin) == ["local/priv", "local/pub"]

    granted = client.put("/.api/users/alice/repos", json={"repos": ["local/priv"]}, headers=admin)
    assert granted.status_code == 200, granted.text
    assert granted.json() == {"repos": ["local/priv"]}
    assert repo_names(client, alice) == ["local/priv", "local/pub"]
    assert repo_names(client, bob) == ["local/pub"]

    file_path = "/.api/repos/local/priv/-/file?path=secret.c"
    assert "hidden_marker" in client.get(file_path, headers=alice).text
    hidden = client.get(file_path, headers=bob)
    missing = client.get("/.api/repos/local/nope/-/file?path=secret.c", headers=bob)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"]["message"].replace("local/priv", "X") == missing.json()["error"]["message"].replace(
        "local/nope", "X"
    )

    assert search_repos(client, alice, "hidden_marker") == {"local/priv"}
    assert search_repos(client, bob, "hidden_marker") == set()
    assert search_repos(client, bob, "visible_marker") == {"local/pub"}

    # Only admins change grants; revoking takes effect on the next request.
    assert client.put("/.api/users/bob/repos", json={"repos": ["local/priv"]}, headers=alice).status_code == 403
    assert client.put("/.api/users/alice/repos", json={"repos": []}, headers=admin).json() == {"repos": []}
    assert repo_names(client, alice) == ["local/pub"]
    assert client.get(file_path, headers=alice).status_code == 404


def test_deleting_a_user_removes_its_grants(runtime: Runtime, world: dict[str, dict[str, str]]) -> None:
    repos = runtime.get(RepoService)
    accounts = runtime.get(AccountService)
    alice = accounts.get_by_username("alice")
    repos.set_user_repos(INTERNAL, alice.id, ["local/priv"])
    assert repos.users_of_repo(INTERNAL, "local/priv") == [alice.id]
    accounts.delete_user(INTERNAL, alice.id)
    assert repos.users_of_repo(INTERNAL, "local/priv") == []


def test_cli_sets_a_users_repositories(settings: Settings, runtime: Runtime, world: dict[str, dict[str, str]]) -> None:
    base = ["--data-dir", str(settings.data_dir), "--database-url", settings.database_url]
    result = CliRunner().invoke(cli, [*base, "users", "repos", "bob", "--set", "local/priv"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "local/priv"
    bob = runtime.get(AccountService).get_by_username("bob")
    assert [r.name for r in runtime.get(RepoService).repos_of_user(INTERNAL, bob.id)] == ["local/priv"]
    missing = CliRunner().invoke(cli, [*base, "users", "repos", "bob", "--set", "local/nope"])
    assert missing.exit_code == 1
