"""A loopback code host with repositories (served over git smart HTTP), a connection to it and sign-in helpers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from starlette.testclient import TestClient

from codewell.codehosts.service import CodeHostService
from codewell.core.actors import Actor
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.fakes.codehosts import FakeCodeHost, FakeRepo, HostUser
from tests.gitfixtures import make_bare, make_repo

TOKEN_ENV = "CODEWELL_TEST_CODEHOST_TOKEN"


@pytest.fixture
def host() -> Iterator[FakeCodeHost]:
    with FakeCodeHost() as fake:
        fake.add(HostUser(1, "svc", "Service", emails=[("svc@host.example", True)]))
        fake.admins.add("svc")
        yield fake


def bare_repo(tmp_path: Path, name: str) -> Path:
    source = make_repo(tmp_path / "src" / name, {"README.md": f"# {name}\n", "main.py": "print('hi')\n"})
    return make_bare(tmp_path / "served" / f"{name}.git", source)


def add_repo(host: FakeCodeHost, tmp_path: Path | None, repo_id: int, path: str, **kw: Any) -> FakeRepo:
    git_dir = bare_repo(tmp_path, path.replace("/", "_")) if tmp_path is not None else None
    return host.add_repo(FakeRepo(repo_id, path, git_dir=git_dir, **kw))


def connect(
    runtime: Runtime, host: FakeCodeHost, monkeypatch: pytest.MonkeyPatch, kind: str = "github", **extra: Any
) -> dict[str, Any]:
    """Configure the sign-in provider and one connection (id `main`) to `host` with a personal token of svc."""
    monkeypatch.setenv(TOKEN_ENV, host.pat("svc"))
    connection = {"id": "main", "kind": kind, "url": host.url, "tokenEnv": TOKEN_ENV, "authorization": True, **extra}
    provider = {"type": kind, "url": host.url, "clientID": host.client_id, "clientSecret": host.client_secret}
    set_site_config(runtime, {"auth.providers": [{"type": "builtin", "allowSignup": True}, provider]})
    set_site_config(runtime, {"codeHostConnections": [connection]})
    return connection


def sign_in_at_host(client: TestClient, runtime: Runtime, login: str, host: FakeCodeHost) -> None:
    """Sign in with the host's OAuth (the user's account is linked, then permission sync runs)."""
    provider = next(p for p in runtime.config.providers if p.kind in ("github", "gitlab"))
    host.signed_in = login
    response = client.get(
        f"/.auth/{provider.kind}/login", params={"pc": provider.id, "returnTo": "/"}, follow_redirects=False
    )
    assert response.status_code == 302, response.text
    approved = requests.get(response.headers["location"], allow_redirects=False, timeout=10)
    assert approved.status_code == 302, approved.text
    callback = urlsplit(approved.headers["location"])
    done = client.get(f"{callback.path}?{callback.query}", follow_redirects=False)
    assert done.status_code == 303, done.text


def visible(runtime: Runtime, actor: Actor) -> set[str]:
    return {r.name.split("/", 1)[1] for r in runtime.get(RepoService).readable(actor)}


def service(runtime: Runtime) -> CodeHostService:
    return runtime.get(CodeHostService)
