"""GitHub connections end to end: discovery through REST v3, mirroring over smart HTTP, permissions both ways."""

from __future__ import annotations

import logging
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from codewell.accounts.audit import AuditService
from codewell.auth import service as auth_service
from codewell.core.actors import INTERNAL
from codewell.licensing.plans import PERMISSION_SYNC, TRIAL_DAYS
from codewell.repos import git as git_module
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, auth_headers, make_token, make_user
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import add_repo, connect, service, sign_in_at_host, visible
from tests.unit.licensing.testkeys import Clock, issue, licensing

pytestmark = pytest.mark.database

AFTER_TRIAL = timedelta(days=TRIAL_DAYS, minutes=1)


@pytest.fixture
def acme(host: FakeCodeHost, tmp_path: Path) -> FakeCodeHost:
    host.add(HostUser(11, "alice", "Alice", emails=[("alice@example.com", True)]))
    host.add(HostUser(12, "bob", "Bob", emails=[("bob@example.com", True)]))
    add_repo(host, tmp_path, 101, "acme/public", visibility="public")
    add_repo(host, tmp_path, 102, "acme/secret", visibility="private", members={"alice": 30})
    add_repo(host, None, 103, "acme/old", visibility="public", archived=True)
    add_repo(host, None, 104, "acme/forked", visibility="public", fork=True)
    add_repo(host, None, 201, "locked/hidden", visibility="private", members={"alice": 30})
    host.restricted_orgs.add("locked")
    return host


def test_private_repo_visible_after_linking_and_gone_after_upstream_revocation(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme", "locked"], forks=False)
    alice = make_user(runtime, "alice", email="alice@example.com")
    bob = make_user(runtime, "bob", email="bob@example.com")
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is None
    # Archived and forked repositories are left out (archived: false by default, forks: false here).
    assert sorted(report.added) == [f"127.0.0.1/{p}" for p in ("acme/public", "acme/secret", "locked/hidden")]
    # Not linked yet: public only.
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public"}

    sign_in_at_host(client, runtime, "alice", acme)
    # Linked: the sign-in synced alice at once. The org whose OAuth App restrictions keep the app out stays
    # invisible, and her status says why.
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public", "acme/secret"}
    (status,) = service(runtime).user_status(actor_of_user(runtime, alice), alice.id)
    assert status.linked
    assert status.repo_count == 1
    assert status.error is not None
    assert "org locked" in status.error
    assert "OAuth application" in status.error
    # bob has no linked account: none of the host's private repositories.
    assert visible(runtime, actor_of_user(runtime, bob)) == {"acme/public"}
    (bob_status,) = service(runtime).user_status(actor_of_user(runtime, bob), bob.id)
    assert not bob_status.linked
    assert "no linked account" in bob_status.summary

    # Revoked upstream: the next sync removes it.
    acme.repos["acme/secret"].members.clear()
    service(runtime).sync_connection(INTERNAL, "main")
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public"}


def test_repo_centric_sync_maps_collaborators_through_linked_identities(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    alice = make_user(runtime, "alice", email="alice@example.com")
    service(runtime).sync_connection(INTERNAL, "main")
    sign_in_at_host(client, runtime, "alice", acme)
    name = "127.0.0.1/acme/secret"
    assert runtime.get(RepoService).users_of_repo(INTERNAL, name) == [alice.id]
    # The user-centric side is cleared by hand; the repo-centric "sync now" puts alice back from collaborators.
    runtime.get(RepoService).set_user_repos(INTERNAL, alice.id, [], source="codehost:main")
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public", "acme/forked"}
    assert service(runtime).sync_repo_now(INTERNAL, name) == 1
    assert runtime.get(RepoService).users_of_repo(INTERNAL, name) == [alice.id]


def test_host_down_or_rate_limited_loses_nothing_and_never_widens(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    alice = make_user(runtime, "alice", email="alice@example.com")
    bob = make_user(runtime, "bob", email="bob@example.com")
    service(runtime).sync_connection(INTERNAL, "main")
    sign_in_at_host(client, runtime, "alice", acme)
    before = visible(runtime, actor_of_user(runtime, alice))
    assert "acme/secret" in before

    acme.down = True
    acme.repos["acme/secret"].members["bob"] = 30  # would widen bob's view if read
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is not None
    assert "503" in report.error
    assert service(runtime).sync_users_permissions(runtime.config.code_host_connections[0]) == 0
    assert visible(runtime, actor_of_user(runtime, alice)) == before
    assert visible(runtime, actor_of_user(runtime, bob)) == {"acme/public", "acme/forked"}
    (status,) = service(runtime).status(INTERNAL)
    assert status.error is not None
    assert "503" in status.error
    assert status.repos_found == 3
    (alice_status,) = service(runtime).user_status(INTERNAL, alice.id)
    assert alice_status.error is not None
    assert "503" in alice_status.error

    # Rate limited for longer than we wait: the same.
    acme.down = False
    acme.rate_limited, acme.rate_limit_reset_seconds = 1000, 3600
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is not None
    assert "rate limit" in report.error
    assert visible(runtime, actor_of_user(runtime, alice)) == before

    # A short rate limit is waited out (X-RateLimit-Reset) and the sync completes.
    acme.rate_limited, acme.rate_limit_reset_seconds = 2, 1
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is None


def test_conditional_requests_reuse_etags(
    runtime: Runtime, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    service(runtime).sync_connection(INTERNAL, "main", permissions=False)
    assert acme.not_modified == 0
    service(runtime).sync_connection(INTERNAL, "main", permissions=False)
    assert acme.not_modified >= 1
    assert any("If-None-Match" not in r for r in acme.api_requests)  # smoke: requests were recorded


def test_repos_removed_upstream_after_the_grace_period_with_an_audit_entry(
    runtime: Runtime, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"], removalGraceSeconds=3600)
    service(runtime).sync_connection(INTERNAL, "main")
    del acme.repos["acme/public"]
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.pending_removal == ["127.0.0.1/acme/public"]
    assert report.removed == []
    assert "acme/public" in visible(runtime, INTERNAL)

    connect(runtime, acme, monkeypatch, orgs=["acme"], removalGraceSeconds=0)
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.removed == ["127.0.0.1/acme/public"]
    assert "acme/public" not in visible(runtime, INTERNAL)
    entries = runtime.get(AuditService).list(INTERNAL, entity="codehosts.repo", action="removed")
    assert [e.details["repo"] for e in entries] == ["127.0.0.1/acme/public"]


def test_org_the_token_cannot_read_is_a_warning_and_removes_nothing(
    runtime: Runtime, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme", "nosuchorg"], removalGraceSeconds=0)
    report = service(runtime).sync_connection(INTERNAL, "main")
    assert report.error is None
    assert any("org nosuchorg" in w and "404" in w for w in report.warnings)
    (status,) = service(runtime).status(INTERNAL)
    assert any("nosuchorg" in w for w in status.warnings)


def test_mirroring_keeps_the_token_out_of_argv_urls_and_logs(
    runtime: Runtime,
    acme: FakeCodeHost,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    token = next(iter(acme.pats))
    argv: list[list[str]] = []
    real_popen = subprocess.Popen

    def recording_popen(args: Any, *a: Any, **kw: Any) -> Any:
        argv.append([str(x) for x in args])
        return real_popen(args, *a, **kw)

    monkeypatch.setattr(git_module.subprocess, "Popen", recording_popen)
    caplog.set_level(logging.DEBUG)
    service(runtime).sync_connection(INTERNAL, "main")
    repos = runtime.get(RepoService)
    outcome = repos.sync_repo(INTERNAL, "127.0.0.1/acme/secret")
    assert outcome.ok, outcome.error
    assert repos.read_file(INTERNAL, "127.0.0.1/acme/secret", "README.md").lines == ["# acme_secret"]
    # The host saw the token (basic auth); argv, the stored clone URL and every log record did not.
    assert any(h.startswith("Basic ") for h in acme.git_requests)
    assert argv
    assert all(token not in " ".join(a) for a in argv)
    assert token not in repos.get(INTERNAL, "127.0.0.1/acme/secret").clone_url
    assert all(token not in record.getMessage() for record in caplog.records)
    # A failing fetch (host down) reports an error without the token either.
    acme.down = True
    failed = repos.sync_repo(INTERNAL, "127.0.0.1/acme/secret")
    assert not failed.ok
    assert failed.error is not None
    assert token not in failed.error


def test_expired_oauth_token_is_refreshed(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme.token_lifetime = 90
    # Tokens expiring within the hour count as expired here: every use refreshes first.
    monkeypatch.setattr(auth_service, "TOKEN_REFRESH_MARGIN_SECONDS", 3600)
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    alice = make_user(runtime, "alice", email="alice@example.com")
    service(runtime).sync_connection(INTERNAL, "main")
    sign_in_at_host(client, runtime, "alice", acme)
    assert any(r.get("grant_type") == "refresh_token" for r in acme.token_requests)
    assert "acme/secret" in visible(runtime, actor_of_user(runtime, alice))
    # A refresh token the host no longer honours: the error is shown and nothing already synced is lost.
    acme.refresh_tokens.clear()
    statuses = service(runtime).sync_user_now(actor_of_user(runtime, alice), alice.id)
    assert statuses[0].error is not None
    assert "refresh" in statuses[0].error
    assert "acme/secret" in visible(runtime, actor_of_user(runtime, alice))


def test_pagination_follows_link_headers(runtime: Runtime, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(250):
        add_repo(host, None, 1000 + i, f"big/r{i:03d}", visibility="public")
    connect(runtime, host, monkeypatch, orgs=["big"])
    report = service(runtime).sync_connection(INTERNAL, "main", permissions=False)
    assert report.found == 250
    assert sum("/orgs/big/repos" in r for r in host.api_requests) == 3  # per_page=100


def test_explicit_grants_override_the_sync_and_are_audited(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(runtime, acme, monkeypatch, orgs=["acme"])
    admin = make_user(runtime, "root", site_admin=True)
    alice = make_user(runtime, "alice", email="alice@example.com")
    bob = make_user(runtime, "bob", email="bob@example.com")
    service(runtime).sync_connection(INTERNAL, "main")
    sign_in_at_host(client, runtime, "alice", acme)
    headers = auth_headers(make_token(runtime, admin))
    for username in ("alice", "bob"):  # alice's row came from the host; the explicit grant takes it over
        response = client.put(
            f"/.api/users/{username}/repos", json={"repos": ["127.0.0.1/acme/secret"]}, headers=headers
        )
        assert response.status_code == 200, response.text
    acme.repos["acme/secret"].members.clear()  # revoked upstream for alice; bob never had it there
    service(runtime).sync_connection(INTERNAL, "main")
    assert "acme/secret" in visible(runtime, actor_of_user(runtime, alice))
    assert "acme/secret" in visible(runtime, actor_of_user(runtime, bob))
    entries = runtime.get(AuditService).list(INTERNAL, entity="repos.grants", action="set")
    assert sorted(e.details["user"] for e in entries) == ["alice", "bob"]


def test_without_the_permission_sync_feature_synced_permissions_stop_granting(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    licensing(runtime, clock)
    connect(runtime, acme, monkeypatch, orgs=["acme"], forks=False)
    alice = make_user(runtime, "alice", email="alice@example.com")
    assert service(runtime).sync_connection(INTERNAL, "main").error is None
    sign_in_at_host(client, runtime, "alice", acme)
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public", "acme/secret"}

    # The trial ends and the free plan lacks `permission-sync`: the next scheduled pass drops what the
    # connection synced (fails closed) and syncs nothing new; the repositories themselves stay.
    clock.offset = AFTER_TRIAL
    assert not service(runtime).permissions_enabled(service(runtime).connections()[0])
    service(runtime).run_due()
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public"}
    assert "127.0.0.1/acme/secret" in {r.name for r in runtime.get(RepoService).all_repos(INTERNAL)}

    # A key with the feature brings the synced permissions back from the host.
    licensing(runtime, clock).set_key(
        INTERNAL, issue(runtime.db.instance_id(), plan="team", features=frozenset({PERMISSION_SYNC}))
    )
    service(runtime).sync_users_permissions(service(runtime).connections()[0], [alice.id])
    assert visible(runtime, actor_of_user(runtime, alice)) == {"acme/public", "acme/secret"}
