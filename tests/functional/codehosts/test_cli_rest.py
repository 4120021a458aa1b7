"""`codewell codehosts status|sync` as a process, the REST routes, the schedule and config validation."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.config import parse_site_config
from codewell.core.actors import INTERNAL
from codewell.core.errors import ConfigError
from codewell.db.base import utcnow
from codewell.runtime import Runtime
from tests import cliprocess
from tests.factories import actor_of_user, auth_headers, make_token, make_user
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import TOKEN_ENV, add_repo, connect, service, sign_in_at_host, visible

pytestmark = pytest.mark.database


def run(data: Path, config: Path, token: str, *args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CODEWELL_DATA_DIR": str(data),
        "CODEWELL_SITE_CONFIG": str(config),
        "CODEWELL_DATABASE_URL": database_url,
        TOKEN_ENV: token,
        "COLUMNS": "200",
    }
    return cliprocess.run(*args, env=env, timeout=120)


def test_cli_sync_and_status(tmp_path: Path, database_url: str, host: FakeCodeHost) -> None:
    add_repo(host, None, 1, "acme/one", visibility="public")
    add_repo(host, None, 2, "acme/two", visibility="private")
    token_file = tmp_path / "token"
    token_file.write_text(host.pat("svc") + "\n")
    config = tmp_path / "site.json"
    connection = {"id": "gh", "kind": "github", "url": host.url, "tokenFile": str(token_file), "orgs": ["acme"]}
    config.write_text(json.dumps({"codeHostConnections": [connection]}))
    data = tmp_path / "data"
    synced = run(data, config, "", "codehosts", "sync", database_url=database_url)
    assert synced.returncode == 0, synced.stderr
    assert "gh: 2 found, 2 added" in synced.stdout
    status = run(data, config, "", "codehosts", "status", "--json", database_url=database_url)
    (entry,) = json.loads(status.stdout)
    assert entry["id"] == "gh"
    assert entry["repos_found"] == 2
    assert entry["error"] is None
    # The token file is gone: the error is named, the exit code says so, and the repositories stay.
    token_file.unlink()
    failed = run(data, config, "", "codehosts", "sync", "gh", database_url=database_url)
    assert failed.returncode != 0
    assert "cannot read tokenFile" in failed.stderr
    listed = run(data, config, "", "repos", "list", database_url=database_url)
    assert listed.stdout.split() == ["127.0.0.1/acme/one", "127.0.0.1/acme/two"]


def test_rest_status_and_user_sync(
    runtime: Runtime, client: TestClient, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    host.add(HostUser(11, "alice", "Alice", emails=[("alice@example.com", True)]))
    add_repo(host, None, 2, "acme/secret", visibility="private", members={"alice": 30})
    connect(runtime, host, monkeypatch, orgs=["acme"])
    admin = make_user(runtime, "root", site_admin=True)
    alice = make_user(runtime, "alice", email="alice@example.com")
    admin_headers = auth_headers(make_token(runtime, admin))
    alice_headers = auth_headers(make_token(runtime, alice))
    synced = client.post("/.api/codehosts/main/sync", headers=admin_headers)
    assert synced.status_code == 200, synced.text
    assert synced.json()["found"] == 1
    status = client.get("/.api/codehosts", headers=admin_headers).json()["connections"]
    assert status[0]["repos_found"] == 1
    assert client.get("/.api/codehosts", headers=alice_headers).status_code == 403
    mine = client.get(f"/.api/codehosts/users/{alice.id}", headers=alice_headers).json()["connections"]
    assert mine[0]["linked"] is False
    sign_in_at_host(client, runtime, "alice", host)
    again = client.post(f"/.api/codehosts/users/{alice.id}/sync", headers=alice_headers).json()["connections"]
    assert again[0]["linked"] is True
    assert again[0]["repo_count"] == 1
    assert again[0]["summary"].startswith("last synced")
    # Someone else's status is refused; an unknown connection is a 404.
    assert client.get(f"/.api/codehosts/users/{admin.id}", headers=alice_headers).status_code == 403
    assert client.post("/.api/codehosts/nope/sync", headers=admin_headers).status_code == 404


def test_schedule_runs_what_is_due(
    runtime: Runtime, client: TestClient, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.add(HostUser(11, "alice", "Alice", emails=[("alice@example.com", True)]))
    add_repo(host, None, 2, "acme/secret", visibility="private", members={"alice": 30})
    connect(runtime, host, monkeypatch, orgs=["acme"], syncIntervalSeconds=600)
    alice = make_user(runtime, "alice", email="alice@example.com")
    service(runtime).run_due()  # first run: discovery
    sign_in_at_host(client, runtime, "alice", host)
    assert "acme/secret" in visible(runtime, actor_of_user(runtime, alice))
    host.repos["acme/secret"].members.clear()
    calls = len(host.api_requests)
    service(runtime).run_due()  # nothing due yet
    assert len(host.api_requests) == calls
    assert "acme/secret" in visible(runtime, actor_of_user(runtime, alice))
    service(runtime).run_due(utcnow() + timedelta(seconds=601))  # the periodic sync revokes it
    assert "acme/secret" not in visible(runtime, actor_of_user(runtime, alice))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "github"}, "codeHostConnections[0].id: Field required"),
        ({"id": "x", "kind": "svn", "tokenEnv": "T"}, "codeHostConnections[0].kind"),
        ({"id": "x", "kind": "gitlab"}, "codeHostConnections[0]: a token is required"),
        ({"id": "x", "kind": "gitlab", "tokenEnv": "T", "orgs": ["a"]}, "orgs is not used by kind gitlab"),
        ({"id": "x", "kind": "github", "tokenEnv": "T", "groups": ["a"]}, "groups is not used by kind github"),
        ({"id": "x", "kind": "bitbucketserver", "tokenEnv": "T"}, "url is required for kind bitbucketserver"),
        ({"id": "x", "kind": "gerrit", "url": "https://g/", "tokenEnv": "T"}, "username is required"),
        ({"id": "x", "kind": "github", "tokenEnv": "T", "exclude": [{"pattern": "("}]}, "exclude[0]"),
        ({"id": "x", "kind": "github", "tokenEnv": "T", "syncIntervalSeconds": 1}, "syncIntervalSeconds"),
        ({"id": "X Y", "kind": "github", "tokenEnv": "T"}, "codeHostConnections[0].id"),
    ],
)
def test_config_errors_name_the_key_path(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_site_config(json.dumps({"codeHostConnections": [entry]}))
    assert message in caught.value.message


def test_config_aliases_and_duplicates() -> None:
    config = parse_site_config(
        json.dumps({"codeHostConnections": [{"id": "a", "kind": "codehost_b", "tokenEnv": "T", "groups": ["g"]}]})
    )
    (connection,) = config.code_host_connections
    assert (connection.kind, connection.url) == ("gitlab", "https://gitlab.com/")
    twice = [{"id": "a", "kind": "github", "tokenEnv": "T"}] * 2
    with pytest.raises(ConfigError) as caught:
        parse_site_config(json.dumps({"codeHostConnections": twice}))
    assert "[1].id 'a' duplicates [0]" in caught.value.message
    assert INTERNAL.site_admin
