"""Bitbucket Cloud 2.0, Bitbucket Server 1.0 and Gerrit connections: discovery and permissions."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import pytest
import requests
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.accounts.service import User
from codewell.auth.identities import ExternalAccount, IdentityService
from codewell.auth.service import AuthService, ClientInfo
from codewell.core.actors import INTERNAL
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user, set_site_config
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import TOKEN_ENV, add_repo, service, visible

pytestmark = pytest.mark.database


def link(runtime: Runtime, user: User, host: FakeCodeHost, kind: str, account_id: str, token: dict[str, str]) -> None:
    """Link an external account as the sign-in would (the listener then syncs the user's permissions)."""
    account = ExternalAccount(kind, host.url, "client", account_id, user.username, token=token)
    runtime.get(IdentityService).link(user, account, ClientInfo())


def oauth_token(host: FakeCodeHost, login: str) -> dict[str, str]:
    token = secrets.token_hex(10)
    host.tokens[token] = login
    return {"access_token": token, "token_type": "bearer"}


@pytest.fixture
def people(host: FakeCodeHost, tmp_path: Path) -> FakeCodeHost:
    host.add(HostUser(11, "alice", "Alice", emails=[("alice@example.com", True)], http_password="alice-http"))
    host.add(HostUser(12, "bob", "Bob", emails=[("bob@example.com", True)], http_password="bob-http"))
    host.users["svc"].http_password = "svc-http"
    add_repo(host, tmp_path, 501, "ws/shared", visibility="public")
    add_repo(host, tmp_path, 502, "ws/secret", visibility="private", members={"alice": 30})
    return host


def configure(runtime: Runtime, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, **connection: object) -> None:
    monkeypatch.setenv(TOKEN_ENV, host.pat("svc"))
    entry = {"id": "main", "url": host.url, "tokenEnv": TOKEN_ENV, "authorization": True, **connection}
    set_site_config(runtime, {"codeHostConnections": [entry]})


@pytest.mark.usefixtures("client")
def test_bitbucket_cloud(runtime: Runtime, people: FakeCodeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(120):  # two pages at pagelen=100 (the `next` link in the body)
        add_repo(people, None, 600 + i, f"ws/extra{i:02d}", visibility="public")
    configure(runtime, people, monkeypatch, kind="codehost_c_cloud", username="svc", workspaces=["ws"])
    alice, bob = make_user(runtime, "alice"), make_user(runtime, "bob")
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is None
    assert report.found == 122
    assert visible(runtime, actor_of_user(runtime, alice)) >= {"ws/shared"}
    assert "ws/secret" not in visible(runtime, actor_of_user(runtime, alice))
    link(runtime, alice, people, "bitbucketcloud", "{00000011}", oauth_token(people, "alice"))
    assert "ws/secret" in visible(runtime, actor_of_user(runtime, alice))
    # Repo-centric: workspace permissions name alice's UUID.
    link(runtime, bob, people, "bitbucketcloud", "{00000012}", oauth_token(people, "bob"))
    assert runtime.get(RepoService).users_of_repo(INTERNAL, "127.0.0.1/ws/secret") == [alice.id]
    assert service(runtime).sync_repo_now(INTERNAL, "127.0.0.1/ws/secret") == 1
    assert "ws/secret" not in visible(runtime, actor_of_user(runtime, bob))


@pytest.mark.usefixtures("client")
def test_bitbucket_server(runtime: Runtime, people: FakeCodeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(130):  # two pages at limit=100 (isLastPage / nextPageStart)
        add_repo(people, None, 700 + i, f"ws/many{i:03d}", visibility="public")
    configure(runtime, people, monkeypatch, kind="bitbucketserver", projects=["ws"])
    alice = make_user(runtime, "alice")
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is None
    assert report.found == 132
    assert sum("/rest/api/1.0/projects/ws/repos" in r and "permissions" not in r for r in people.api_requests) == 2
    link(runtime, alice, people, "bitbucketserver", "11", oauth_token(people, "alice"))
    assert "ws/secret" in visible(runtime, actor_of_user(runtime, alice))
    people.repos["ws/secret"].members.clear()
    service(runtime).sync_connection(INTERNAL, "main")
    assert "ws/secret" not in visible(runtime, actor_of_user(runtime, alice))


@pytest.mark.usefixtures("client")
def test_gerrit_strips_the_xssi_prefix_and_syncs_user_centric(
    runtime: Runtime, people: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, client: TestClient
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "svc-http")
    entry = {"id": "main", "kind": "codehost_d", "url": people.url, "tokenEnv": TOKEN_ENV, "username": "svc"}
    set_site_config(runtime, {"codeHostConnections": [{**entry, "authorization": True}]})
    alice, bob = make_user(runtime, "alice"), make_user(runtime, "bob")
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is None
    assert report.found == 2
    link(runtime, alice, people, "gerrit", "11", {"username": "alice", "password": "alice-http"})
    link(runtime, bob, people, "gerrit", "12", {"username": "bob", "password": "bob-http"})
    assert visible(runtime, actor_of_user(runtime, alice)) == {"ws/shared", "ws/secret"}
    # Gerrit projects are private here (its listing has no anonymous flag): bob reads what Gerrit lists for him.
    assert visible(runtime, actor_of_user(runtime, bob)) == {"ws/shared"}
    assert visible(runtime, actor_of_user(runtime, make_user(runtime, "carol"))) == set()


def test_gerrit_projects_are_mirrored_from_its_authenticated_clone_urls(
    runtime: Runtime, people: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "svc-http")
    entry = {"id": "main", "kind": "gerrit", "url": people.url, "tokenEnv": TOKEN_ENV, "username": "svc"}
    set_site_config(runtime, {"codeHostConnections": [entry]})
    assert service(runtime).sync_connection(INTERNAL, "main").error is None
    repos = runtime.get(RepoService)
    name = "127.0.0.1/ws/secret"
    assert repos.get(INTERNAL, name).clone_url == f"{people.url}a/ws/secret"
    outcome = repos.sync_repo(INTERNAL, name)
    assert outcome.ok, outcome.error
    assert repos.read_file(INTERNAL, name, "README.md").lines == ["# ws_secret"]
    # git authenticated as the connection's user with its HTTP password (basic auth, as Gerrit's /a/ wants).
    sent = {base64.b64decode(h[6:]).decode() for h in people.git_requests if h.startswith("Basic ")}
    assert sent == {"svc:svc-http"}
    assert "svc-http" not in repos.get(INTERNAL, name).clone_url
    # The clone URL answers only with credentials, and only for a user who may read the project.
    refs = f"{people.url}a/ws/secret/info/refs?service=git-upload-pack"
    assert requests.get(refs, timeout=10).status_code == 401
    assert requests.get(refs, auth=("bob", "bob-http"), timeout=10).status_code == 404
    assert requests.get(refs, auth=("alice", "alice-http"), timeout=10).status_code == 200
    # A wrong HTTP password fails the fetch with an error that does not carry it.
    people.users["svc"].http_password = "rotated"
    failed = repos.sync_repo(INTERNAL, name)
    assert not failed.ok
    assert failed.error is not None
    assert "svc-http" not in failed.error


@pytest.mark.usefixtures("client")
def test_unlinking_one_of_two_identities_resyncs_with_the_other_and_leaves_other_hosts_alone(
    runtime: Runtime, people: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "svc-http")
    entry = {"id": "main", "kind": "gerrit", "url": people.url, "tokenEnv": TOKEN_ENV, "username": "svc"}
    other = {**entry, "id": "other", "url": "http://127.0.0.1:9/", "prefix": "other"}
    set_site_config(runtime, {"auth.providers": [{"type": "builtin"}]})
    set_site_config(runtime, {"codeHostConnections": [{**entry, "authorization": True}, other]})
    alice = make_user(runtime, "alice", password="correct horse battery staple")
    assert service(runtime).sync_connection(INTERNAL, "main").error is None
    link(runtime, alice, people, "gerrit", "11", {"username": "alice", "password": "alice-http"})
    link(runtime, alice, people, "gerrit", "12", {"username": "bob", "password": "bob-http"})
    actor = actor_of_user(runtime, alice)
    assert visible(runtime, actor) == {"ws/shared", "ws/secret"}
    # An explicit grant is an override the unlink never touches.
    repos = runtime.get(RepoService)
    repos.set_user_repos(INTERNAL, alice.id, ["127.0.0.1/ws/secret"])
    first = next(i for i in runtime.get(AuthService).list_identities(actor) if i.account_id == "11")
    runtime.get(AuthService).unlink_identity(actor, first.id)
    assert visible(runtime, actor) == {"ws/shared", "ws/secret"}  # the explicit grant
    repos.set_user_repos(INTERNAL, alice.id, [])
    assert visible(runtime, actor) == {"ws/shared"}
    # Still linked through the other identity: synced again with it at once (it reads ws/shared only).
    (status,) = service(runtime).user_status(actor, alice.id)
    assert status.linked
    assert status.last_synced_at is not None
    assert status.repo_count == 1
    second = next(i for i in runtime.get(AuthService).list_identities(actor) if i.account_id == "12")
    runtime.get(AuthService).unlink_identity(actor, second.id)
    (status,) = service(runtime).user_status(actor, alice.id)
    assert not status.linked
    assert status.repo_count == 0
    assert visible(runtime, actor) == set()
    # Only the connection of the unlinked identities' host was touched (the other has another URL).
    cleared = runtime.get(AuditService).list(INTERNAL, entity="codehosts.permissions", action="cleared")
    assert [e.details["connection"] for e in cleared] == ["main", "main"]
