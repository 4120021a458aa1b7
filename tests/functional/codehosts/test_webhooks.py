"""Push webhooks of every host kind over real HTTP: verified by real HMACs or shared secrets, a sync requested.

Each test discovers the host's repositories and mirrors one (real git over the fake host's smart HTTP), so that
no sync of it is queued; a verified push webhook then queues one (`RepoService.request_sync`). `queued_syncs` is the
one place that says what "a sync was requested" looks like in repos.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from prometheus_client import REGISTRY
from starlette.testclient import TestClient

from codewell.codehosts.webhooks import MAX_BODY_BYTES, sign
from codewell.config import parse_site_config
from codewell.core.actors import INTERNAL
from codewell.core.errors import ConfigError
from codewell.jobs.service import JobService
from codewell.repos.service import SYNC_JOB, RepoService
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user, set_site_config
from tests.fakes.codehosts import FakeCodeHost, FakeRepo
from tests.functional.codehosts.conftest import TOKEN_ENV, add_repo, service

SECRET_ENV = "CODEWELL_TEST_WEBHOOK_SECRET"
SECRET = "s3cret-of-main"
OTHER_ENV = "CODEWELL_TEST_WEBHOOK_SECRET_OTHER"
OTHER_SECRET = "s3cret-of-other"


def queued_syncs(runtime: Runtime) -> list[str]:
    """Names of the repositories with a queued `repos.sync` job (one entry per job: a replay must not add one)."""
    names = {f"repo:{repo.id}": repo.name for repo in runtime.get(RepoService).all_repos(INTERNAL)}
    jobs = runtime.get(JobService).list_jobs(INTERNAL, kind=SYNC_JOB, state="queued", limit=1000)
    return sorted(names[job.resource] for job in jobs if job.resource in names)


def sync_requested(runtime: Runtime, name: str) -> bool:
    """Whether repos was asked to sync `name`: a `repos.sync` job is queued for it (RepoService.request_sync)."""
    return name in queued_syncs(runtime)


def webhook_count(host: str, result: str) -> float:
    return REGISTRY.get_sample_value("codewell_codehost_webhooks_total", {"host": host, "result": result}) or 0.0


@dataclass(frozen=True)
class Kind:
    """One host kind: its connection entry and how it sends a push webhook."""

    kind: str
    address: str  # under /.api/webhooks/
    connection: dict[str, Any]

    def push(self, repo: FakeRepo, secret: str | None) -> tuple[bytes, dict[str, str], dict[str, str]]:
        """(body, headers, query) of a push of `repo` as this host sends it, proved with `secret` (None: unproved)."""
        owner, _, slug = repo.path.rpartition("/")
        headers = {"Content-Type": "application/json"}
        query: dict[str, str] = {}
        if self.kind == "github":
            data: dict[str, Any] = {"ref": "refs/heads/main", "repository": {"id": repo.id, "full_name": repo.path}}
            headers["X-GitHub-Event"] = "push"
        elif self.kind == "gitlab":
            project = {"id": repo.id, "path_with_namespace": repo.path}
            data = {"object_kind": "push", "project_id": repo.id, "project": project}
            headers["X-Gitlab-Event"] = "Push Hook"
        elif self.kind == "bitbucketserver":
            data = {
                "eventKey": "repo:refs_changed",
                "repository": {"id": repo.id, "slug": slug, "project": {"key": owner}},
            }
            headers["X-Event-Key"] = "repo:refs_changed"
        elif self.kind == "bitbucketcloud":
            data = {"repository": {"uuid": f"{{repo-{repo.id}}}", "full_name": repo.path}, "push": {"changes": []}}
            headers["X-Event-Key"] = "repo:push"
        else:
            data = {"type": "ref-updated", "refUpdate": {"project": repo.path, "refName": "refs/heads/main"}}
        body = json.dumps(data).encode()
        if secret is not None:
            if self.kind in ("github",):
                headers["X-Hub-Signature-256"] = sign(secret, body)
            elif self.kind == "bitbucketserver":
                headers["X-Hub-Signature"] = sign(secret, body)
            elif self.kind == "gitlab":
                headers["X-Gitlab-Token"] = secret
            else:  # Bitbucket Cloud (webhooks without a secret of their own) and Gerrit: in the URL
                query["secret"] = secret
        return body, headers, query


KINDS = [
    Kind("github", "github", {}),
    Kind("gitlab", "gitlab", {"groups": ["acme"]}),
    Kind("bitbucketserver", "bitbucket-server", {"projects": ["acme"]}),
    Kind("bitbucketcloud", "bitbucket-cloud", {"username": "svc", "workspaces": ["acme"]}),
    Kind("gerrit", "gerrit", {"username": "svc"}),
]


@pytest.fixture
def acme(host: FakeCodeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCodeHost:
    add_repo(host, tmp_path, 101, "acme/app", visibility="public")
    add_repo(host, None, 102, "acme/lib", visibility="public")
    host.users["svc"].http_password = "svc-http"
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(OTHER_ENV, OTHER_SECRET)
    return host


def configure(runtime: Runtime, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, kind: Kind, **extra: Any) -> None:
    monkeypatch.setenv(TOKEN_ENV, "svc-http" if kind.kind == "gerrit" else host.pat("svc"))
    entry = {"id": "main", "kind": kind.kind, "url": host.url, "tokenEnv": TOKEN_ENV, "webhookSecretEnv": SECRET_ENV}
    set_site_config(runtime, {"codeHostConnections": [{**entry, **kind.connection, **extra}]})


def mirrored(runtime: Runtime, name: str) -> None:
    """Discover, then mirror `name` once (its queued sync runs): afterwards no sync of it is queued."""
    report = service(runtime).sync_connection(INTERNAL, "main", permissions=False)
    assert report.error is None, report.error
    outcome = runtime.get(RepoService).sync_repo(INTERNAL, name)
    assert outcome.ok, outcome.error
    assert not sync_requested(runtime, name)


def post(client: TestClient, kind: Kind, body: bytes, headers: dict[str, str], query: dict[str, str]) -> Any:
    return client.post(f"/.api/webhooks/{kind.address}", content=body, headers=headers, params=query)


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
def test_a_verified_push_requests_a_sync_and_an_unverified_one_nothing(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, kind: Kind
) -> None:
    configure(runtime, acme, monkeypatch, kind)
    name = "127.0.0.1/acme/app"
    mirrored(runtime, name)
    repo = acme.repos["acme/app"]
    # Unproved, and proved with another secret: 401 with one message for both, and nothing requested.
    for secret in (None, "wrong-secret"):
        body, headers, query = kind.push(repo, secret)
        refused = post(client, kind, body, headers, query)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthenticated"
        assert "signature or secret is missing or wrong" in refused.json()["error"]["message"]
        assert "acme" not in refused.text
        assert not sync_requested(runtime, name)
    before, queued = webhook_count(kind.address, "accepted"), queued_syncs(runtime)
    body, headers, query = kind.push(repo, SECRET)
    accepted = post(client, kind, body, headers, query)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json() == {"status": "accepted"}
    assert sync_requested(runtime, name)
    assert queued_syncs(runtime) == sorted([*queued, name])  # the pushed repository only
    assert webhook_count(kind.address, "accepted") == before + 1
    # A replay is harmless: accepted again, the one queued sync of the repository is reused.
    assert post(client, kind, body, headers, query).status_code == 202
    assert queued_syncs(runtime) == sorted([*queued, name])


def test_another_connections_secret_reaches_only_that_connections_repositories(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    github, gitlab = KINDS[0], KINDS[1]
    monkeypatch.setenv(TOKEN_ENV, acme.pat("svc"))
    main = {"id": "main", "kind": "github", "url": acme.url, "tokenEnv": TOKEN_ENV, "webhookSecretEnv": SECRET_ENV}
    other = {**main, "id": "other", "prefix": "other", "repos": ["acme/lib"], "webhookSecretEnv": OTHER_ENV}
    lab = {**main, "id": "lab", "kind": "gitlab", "prefix": "lab", "repos": ["acme/lib"], "webhookSecretEnv": OTHER_ENV}
    set_site_config(runtime, {"codeHostConnections": [main, other, lab]})
    name = "127.0.0.1/acme/app"
    mirrored(runtime, name)
    assert service(runtime).sync_connection(INTERNAL, "other", permissions=False).added == ["other/acme/lib"]
    repo = acme.repos["acme/app"]
    # Signed with `other`'s secret: verified as `other`, which did not register acme/app: accepted, ignored.
    body, headers, query = github.push(repo, OTHER_SECRET)
    ignored = post(client, github, body, headers, query)
    assert ignored.status_code == 202
    assert ignored.json() == {"status": "accepted"}  # the same answer as a sync: nothing tells what is registered
    assert not sync_requested(runtime, name)
    # A GitLab connection's token is no proof at the GitHub address, nor a GitHub secret at GitLab's.
    body, headers, query = gitlab.push(repo, OTHER_SECRET)
    assert post(client, github, body, {**headers, "X-GitHub-Event": "push"}, query).status_code == 401
    body, headers, query = gitlab.push(repo, SECRET)
    assert post(client, gitlab, body, headers, query).status_code == 401
    # A repository no connection registered: accepted alike, nothing requested.
    unknown = FakeRepo(999, "acme/nowhere")
    body, headers, query = github.push(unknown, SECRET)
    queued = queued_syncs(runtime)
    assert post(client, github, body, headers, query).json() == {"status": "accepted"}
    assert queued_syncs(runtime) == queued
    # The right secret: one log line naming the connection and the repository, never the secret.
    caplog.set_level(logging.INFO, logger="codewell.codehosts.service")
    body, headers, query = github.push(repo, SECRET)
    assert post(client, github, body, headers, query).status_code == 202
    assert sync_requested(runtime, name)
    lines = [r.getMessage() for r in caplog.records if "webhook" in r.getMessage()]
    assert lines == [f"code host webhook: connection main, repository {name}: sync requested"]
    assert SECRET not in caplog.text


def test_pings_other_events_and_renamed_paths(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    github = KINDS[0]
    configure(runtime, acme, monkeypatch, github)
    name = "127.0.0.1/acme/app"
    mirrored(runtime, name)
    ping = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "ping"}
    answered = post(client, github, ping, {**headers, "X-Hub-Signature-256": sign(SECRET, ping)}, {})
    assert answered.status_code == 200
    assert answered.json() == {"event": "ping"}
    assert post(client, github, ping, headers, {}).status_code == 401  # a ping proves itself too
    # Another event of a known repository: accepted, no sync.
    body, push_headers, _ = github.push(acme.repos["acme/app"], SECRET)
    issue = {**push_headers, "X-GitHub-Event": "issues"}
    assert post(client, github, body, issue, {}).status_code == 202
    assert not sync_requested(runtime, name)
    # Found by its path at the host, whatever the case, when the payload's ID is not the one discovered.
    recased = json.dumps({"repository": {"id": 555, "full_name": "ACME/App"}}).encode()
    signed = {**push_headers, "X-Hub-Signature-256": sign(SECRET, recased)}
    assert post(client, github, recased, signed, {}).status_code == 202
    assert sync_requested(runtime, name)
    assert runtime.get(RepoService).sync_repo(INTERNAL, name).ok
    assert not sync_requested(runtime, name)
    # Found by the host's repository ID when the path changed (a rename not yet discovered).
    renamed = json.dumps({"repository": {"id": 101, "full_name": "acme/renamed"}}).encode()
    signed = {**push_headers, "X-Hub-Signature-256": sign(SECRET, renamed)}
    assert post(client, github, renamed, signed, {}).status_code == 202
    assert sync_requested(runtime, name)


def test_bitbucket_cloud_signed_webhooks_and_bitbucket_server_ping(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud = KINDS[3]
    configure(runtime, acme, monkeypatch, cloud)
    name = "127.0.0.1/acme/app"
    mirrored(runtime, name)
    body, headers, _ = cloud.push(acme.repos["acme/app"], None)
    # A signature, when present, must verify: the URL secret does not rescue a wrong one.
    wrong = {**headers, "X-Hub-Signature": sign("wrong", body)}
    assert post(client, cloud, body, wrong, {"secret": SECRET}).status_code == 401
    assert not sync_requested(runtime, name)
    signed = {**headers, "X-Hub-Signature": sign(SECRET, body)}
    assert post(client, cloud, body, signed, {}).status_code == 202
    assert sync_requested(runtime, name)

    server = KINDS[2]
    configure(runtime, acme, monkeypatch, server)
    ping = b'{"test": true}'
    headers = {"X-Event-Key": "diagnostics:ping", "X-Hub-Signature": sign(SECRET, ping)}
    assert post(client, server, ping, headers, {}).json() == {"event": "ping"}


def test_malformed_oversized_and_unconfigured(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    github = KINDS[0]
    configure(runtime, acme, monkeypatch, github)
    headers = {"X-GitHub-Event": "push", "Content-Type": "application/json"}
    for bad in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        answer = post(client, github, bad, {**headers, "X-Hub-Signature-256": sign(SECRET, bad)}, {})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "invalid_input"
    # Unverified garbage is refused as unverified: the body of an unproved caller is never parsed.
    assert post(client, github, b"{not json", headers, {}).status_code == 401
    # Over the limit: refused from the declared length, and from the stream when no length is declared.
    before = webhook_count("github", "too_large")
    big = b"x" * (MAX_BODY_BYTES + 1)
    oversized = post(client, github, big, {**headers, "X-Hub-Signature-256": sign(SECRET, big)}, {})
    assert oversized.status_code == 413
    assert oversized.json()["error"]["code"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:
        for _ in range(6):
            yield b" " * (1024 * 1024)

    streamed = client.post("/.api/webhooks/github", content=chunks(), headers=headers)
    assert streamed.status_code == 413
    assert webhook_count("github", "too_large") == before + 2
    # A connection without a webhook secret accepts no webhook, not even one "signed" with an empty secret.
    configure(runtime, acme, monkeypatch, github, webhookSecretEnv=None)
    body, push_headers, _ = github.push(acme.repos["acme/app"], "")
    assert post(client, github, body, push_headers, {}).status_code == 401
    monkeypatch.setenv(SECRET_ENV, "")
    configure(runtime, acme, monkeypatch, github)
    assert post(client, github, body, push_headers, {}).status_code == 401


def test_secret_from_a_file_and_config_errors(
    runtime: Runtime, client: TestClient, acme: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gitlab = KINDS[1]
    secret_file = tmp_path / "webhook-secret"
    secret_file.write_text("from-a-file\n")
    configure(runtime, acme, monkeypatch, gitlab, webhookSecretEnv=None, webhookSecretFile=str(secret_file))
    name = "127.0.0.1/acme/app"
    mirrored(runtime, name)
    # The status (REST and the site-admin page) prints where to point the host, and whether a secret is set.
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    (status,) = client.get("/.api/codehosts", headers=admin).json()["connections"]
    assert status["webhook_url"] == f"{runtime.external_url}/.api/webhooks/gitlab"
    assert status["webhook_secret_set"] is True
    assert "from-a-file" not in json.dumps(status)
    body, headers, query = gitlab.push(acme.repos["acme/app"], "from-a-file")
    address = urlsplit(status["webhook_url"]).path
    assert client.post(address, content=body, headers=headers, params=query).status_code == 202
    assert sync_requested(runtime, name)
    secret_file.unlink()  # unreadable: no secret, no webhook
    assert client.post(address, content=body, headers=headers, params=query).status_code == 401
    (status,) = client.get("/.api/codehosts", headers=admin).json()["connections"]
    assert status["webhook_secret_set"] is False
    both = {"id": "x", "kind": "gitlab", "tokenEnv": "T", "webhookSecretEnv": "A", "webhookSecretFile": "/s"}
    with pytest.raises(ConfigError) as caught:
        parse_site_config(json.dumps({"codeHostConnections": [both]}))
    assert "set either webhookSecretEnv or webhookSecretFile" in caught.value.message
    with pytest.raises(ConfigError):
        parse_site_config(
            json.dumps({"codeHostConnections": [{**both, "webhookSecretFile": None, "webhookSecretEnv": "1X"}]})
        )
