"""Access answers cached per process (token owners, readable repositories, role permissions) are never stale:
a change committed by one process applies on the very next request of another (codewell/db/epochs.py).

Two runtimes on one database stand for two `codewell serve` processes (each its own caches); the CLI, a real
process, for an operator's change."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.accounts.service import AccountService
from codewell.accounts.tokens import TokenService
from codewell.app import create_app
from codewell.capabilities import CAPABILITIES
from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.db.epochs import CacheEpochs
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search.service import SearchService
from tests import cliprocess
from tests.factories import auth_headers, make_token, make_user
from tests.gitfixtures import make_repo, register_local_repo

pytestmark = pytest.mark.database


@pytest.fixture
def second(runtime: Runtime) -> Iterator[Runtime]:
    """Another process's worth of services and caches on the same database."""
    other = Runtime.open(runtime.settings)
    other.capabilities = CAPABILITIES
    yield other
    other.close()


@pytest.fixture
def other_client(second: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(second, background=False)) as test_client:
        yield test_client


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEWELL_DATA_DIR": str(settings.data_dir), "CODEWELL_DATABASE_URL": settings.database_url}
    result = cliprocess.run(*args, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_a_token_revoked_in_one_process_is_refused_at_once_in_another(
    runtime: Runtime, client: TestClient, other_client: TestClient
) -> None:
    alice = make_user(runtime, "alice")
    raw = make_token(runtime, alice)
    headers = auth_headers(raw)
    for _ in range(2):  # the second answer comes from the other process's cache
        assert other_client.get("/.api/users/alice", headers=headers).status_code == 200
    token_id = runtime.get(TokenService).list(INTERNAL, alice.id)[0].id
    admin = make_token(runtime, make_user(runtime, "admin", site_admin=True))
    assert client.delete(f"/.api/tokens/{token_id}", headers=auth_headers(admin)).status_code == 200
    refused = other_client.get("/.api/users/alice", headers=headers)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthenticated"


def test_a_token_revoked_by_the_cli_is_refused_at_once(runtime: Runtime, client: TestClient) -> None:
    alice = make_user(runtime, "alice")
    raw = make_token(runtime, alice)
    assert client.get("/.api/users/alice", headers=auth_headers(raw)).status_code == 200
    token_id = runtime.get(TokenService).list(INTERNAL, alice.id)[0].id
    _cli(runtime.settings, "tokens", "revoke", str(token_id))
    assert client.get("/.api/users/alice", headers=auth_headers(raw)).status_code == 401


def test_a_deleted_user_or_a_lost_admin_flag_applies_at_once_in_another_process(
    runtime: Runtime, other_client: TestClient
) -> None:
    make_user(runtime, "root", site_admin=True)  # the last site admin cannot be demoted
    boss = make_user(runtime, "boss", site_admin=True)
    bob = make_user(runtime, "bob")
    boss_token, bob_token = make_token(runtime, boss), make_token(runtime, bob)
    assert other_client.get("/.api/audit", headers=auth_headers(boss_token)).status_code == 200
    assert other_client.get("/.api/users/bob", headers=auth_headers(bob_token)).status_code == 200
    accounts = runtime.get(AccountService)
    accounts.set_site_admin(INTERNAL, boss.id, False)
    assert other_client.get("/.api/audit", headers=auth_headers(boss_token)).status_code == 403
    accounts.delete_user(INTERNAL, bob.id)
    assert other_client.get("/.api/users/bob", headers=auth_headers(bob_token)).status_code == 401


def test_grants_and_visibility_changed_in_one_process_apply_at_once_in_another(
    tmp_path: Path, runtime: Runtime, second: Runtime, other_client: TestClient
) -> None:
    secret = register_local_repo(
        runtime, make_repo(tmp_path / "priv", {"b.c": "int secret_word;\n"}), "local/priv", private=True
    )
    runtime.get(SearchService).index_many([secret])
    alice = make_user(runtime, "alice")
    headers = auth_headers(make_token(runtime, alice))

    def found() -> list[str]:
        response = other_client.get("/.api/search", params={"q": "secret_word"}, headers=headers)
        assert response.status_code == 200, response.text
        return [f["repository"] for f in response.json()["files"]]

    assert found() == []
    assert found() == []  # from the other process's cache now
    repos = runtime.get(RepoService)
    repos.set_repo_users(INTERNAL, "local/priv", [alice.id])
    assert found() == ["local/priv"]
    repos.set_repo_users(INTERNAL, "local/priv", [])
    assert found() == []
    # Granted by an operator in a third process (the CLI), then the grant removed again there.
    _cli(runtime.settings, "users", "repos", "alice", "--set", "local/priv")
    assert found() == ["local/priv"]
    _cli(runtime.settings, "users", "repos", "alice", "--set", "")
    assert found() == []
    # Visibility itself: the repository made public in one process is read at once by the other.
    repos.update_repo(INTERNAL, "local/priv", private=False)
    assert found() == ["local/priv"]
    repos.update_repo(INTERNAL, "local/priv", private=True)
    assert found() == []
    assert second.get(RepoService).readable_ids(second.get(AccountService).actor_for(alice, via="test")) == frozenset()


def test_bookkeeping_writes_keep_the_caches(runtime: Runtime, tmp_path: Path, client: TestClient) -> None:
    """A token's last use, a sync's state: writes that change no access answer bump no epoch (else every request
    or sync would empty every process's caches)."""
    epochs = runtime.get(CacheEpochs)
    alice = make_user(runtime, "alice")
    raw = make_token(runtime, alice)
    repo = register_local_repo(runtime, make_repo(tmp_path / "pub", {"a.c": "x\n"}), "local/pub")
    before = epochs.read()
    assert before.accounts is not None
    assert before.repos is not None
    assert client.get("/.api/users/alice", headers=auth_headers(raw)).status_code == 200  # records the last use
    runtime.get(RepoService).sync_repo(INTERNAL, repo.name)
    assert epochs.read() == before
    make_user(runtime, "carol")
    assert epochs.read().accounts != before.accounts
