"""Code host tokens reach git only in the environment of the git process fetching from that host (issue #33 item 6).

Two loopback hosts with different tokens; every git child is caught as it starts and its `/proc/<pid>/environ` read
while it runs: a clone from one host carries that host's credential and no other, and the server's own environment
holds no token before, during or after the syncs.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codewell.core.actors import INTERNAL
from codewell.repos import git as git_module
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.fakes.codehosts import FakeCodeHost, HostUser
from tests.functional.codehosts.conftest import add_repo, service

pytestmark = pytest.mark.database


def _host(tmp_path: Path, login: str, repo_path: str) -> Iterator[FakeCodeHost]:
    with FakeCodeHost() as fake:
        fake.add(HostUser(1, login, login.title(), emails=[(f"{login}@host.example", True)]))
        fake.admins.add(login)
        add_repo(fake, tmp_path / login, 101, repo_path, visibility="private")
        yield fake


@pytest.fixture
def alpha(tmp_path: Path) -> Iterator[FakeCodeHost]:
    yield from _host(tmp_path, "alpha-svc", "alpha/code")


@pytest.fixture
def beta(tmp_path: Path) -> Iterator[FakeCodeHost]:
    yield from _host(tmp_path, "beta-svc", "beta/code")


def _connection(host: FakeCodeHost, tmp_path: Path, connection_id: str, login: str) -> tuple[dict[str, Any], str]:
    # A token file, not tokenEnv: the server's environment then starts with no token at all, so any token found
    # in it later was put there by codewell.
    token = host.pat(login)
    token_file = tmp_path / f"{connection_id}.token"
    token_file.write_text(token + "\n")
    entry = {
        "id": connection_id,
        "kind": "github",
        "url": host.url,
        "tokenFile": str(token_file),
        "prefix": connection_id,
        "orgs": [connection_id],
    }
    return entry, token


def _basic(userpass: str) -> str:
    return "Basic " + base64.b64encode(userpass.encode()).decode()


def _watch_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `git` first on PATH that saves its arguments and `/proc/self/environ` (exactly the environment it was
    started with), then runs the real git: every git child, however short-lived, is recorded."""
    real = shutil.which("git")
    assert real is not None
    records = tmp_path / "git-children"
    records.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{records}/$$.args"\n'
        f'cat /proc/$$/environ > "{records}/$$.environ"\n'
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return records


def _children(records: Path) -> list[tuple[list[str], dict[str, str]]]:
    children = []
    for args_file in sorted(records.glob("*.args")):
        raw = args_file.with_suffix(".environ").read_bytes()
        pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
        children.append((args_file.read_text().splitlines(), {name: value for name, _, value in pairs}))
    return children


def test_each_git_child_carries_only_its_own_hosts_credential(
    runtime: Runtime,
    alpha: FakeCodeHost,
    beta: FakeCodeHost,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha_entry, alpha_token = _connection(alpha, tmp_path, "alpha", "alpha-svc")
    beta_entry, beta_token = _connection(beta, tmp_path, "beta", "beta-svc")
    set_site_config(runtime, {"codeHostConnections": [alpha_entry, beta_entry]})
    tokens = {alpha_token, beta_token}
    records = _watch_git(tmp_path, monkeypatch)
    assert service(runtime).sync_connection(INTERNAL, "alpha").error is None
    assert service(runtime).sync_connection(INTERNAL, "beta").error is None
    repos = runtime.get(RepoService)
    for name in ("alpha/alpha/code", "beta/beta/code"):
        outcome = repos.sync_repo(INTERNAL, name)
        assert outcome.ok, outcome.error
    # A second round fetches (the mirrors exist now): fetches are credentialed the same way.
    for name in ("alpha/alpha/code", "beta/beta/code"):
        assert repos.sync_repo(INTERNAL, name).ok

    # Each host received its own connection's credential and never the other's.
    alpha_sent = {h for h in alpha.git_requests if h}
    beta_sent = {h for h in beta.git_requests if h}
    assert alpha_sent == {_basic(f"x-access-token:{alpha_token}")}
    assert beta_sent == {_basic(f"x-access-token:{beta_token}")}

    # The hosts' own `git http-backend` runs through the wrapper too: only codewell's children are checked.
    children = [(argv, env) for argv, env in _children(records) if argv[0] != "http-backend"]
    network = [(argv, env) for argv, env in children if argv[0] in ("clone", "fetch")]
    assert len(network) == 4
    for argv, env in network:
        from_alpha = any(alpha.url in arg for arg in argv)
        own_token, other_token = (alpha_token, beta_token) if from_alpha else (beta_token, alpha_token)
        values = "\n".join(env.values())
        assert env.get("GIT_CONFIG_VALUE_0") == f"Authorization: {_basic(f'x-access-token:{own_token}')}"
        assert other_token not in values
        assert _basic(f"x-access-token:{other_token}").split()[1] not in values
        assert own_token not in values  # only inside the encoded header, never in the clear
    # Every git child (clone, fetch, the plumbing after them) had a small environment: no server variable.
    credential_config = {"GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"}
    for _argv, env in children:
        assert set(env) <= git_module.INHERITED_ENV | set(git_module.child_env({})) | credential_config
        assert not any(name.startswith("CODEWELL_") for name in env)

    # The server process never put a token into its own environment.
    assert not any(token in value for value in os.environ.values() for token in tokens)
    assert not any(name.startswith("CODEWELL_CODEHOST_") for name in os.environ)


def test_a_rotated_token_file_counts_at_the_next_fetch_and_a_missing_one_fails_clearly(
    runtime: Runtime, alpha: FakeCodeHost, tmp_path: Path
) -> None:
    entry, first = _connection(alpha, tmp_path, "alpha", "alpha-svc")
    set_site_config(runtime, {"codeHostConnections": [entry]})
    assert service(runtime).sync_connection(INTERNAL, "alpha").error is None
    repos = runtime.get(RepoService)
    assert repos.sync_repo(INTERNAL, "alpha/alpha/code").ok
    rotated = alpha.pat("alpha-svc")
    Path(entry["tokenFile"]).write_text(rotated)
    alpha.git_requests.clear()
    assert repos.sync_repo(INTERNAL, "alpha/alpha/code").ok
    assert {h for h in alpha.git_requests if h} == {_basic(f"x-access-token:{rotated}")}
    Path(entry["tokenFile"]).unlink()
    failed = repos.sync_repo(INTERNAL, "alpha/alpha/code")
    assert not failed.ok
    assert failed.error is not None
    assert failed.error.startswith("code host connection alpha: cannot read tokenFile")
    assert first not in failed.error


def test_a_hand_added_repository_naming_a_connections_credentials_gets_no_token(
    runtime: Runtime, alpha: FakeCodeHost, tmp_path: Path
) -> None:
    entry, token = _connection(alpha, tmp_path, "alpha", "alpha-svc")
    set_site_config(runtime, {"codeHostConnections": [entry]})
    repos = runtime.get(RepoService)
    repos.add_repo(INTERNAL, f"{alpha.url}git/alpha/code.git", credentials_env="CODEWELL_CODEHOST_ALPHA_GIT")
    outcome = repos.sync_repo(INTERNAL, "127.0.0.1/git/alpha/code")
    # The name is only a name: the connection answers for its own repositories, and no such variable exists.
    assert not outcome.ok
    assert outcome.error == "environment variable CODEWELL_CODEHOST_ALPHA_GIT (credentialsEnv) is not set"
    assert not any(token in h for h in alpha.git_requests)
