"""Fixtures of the repos tests: the standard sample repository, registered and mirrored."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.core.actors import INTERNAL, Actor
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from tests.gitfixtures import register_local_repo, sample_repo


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample work tree (built once per session; tests must not modify it)."""
    return sample_repo(tmp_path_factory.mktemp("sample") / "sample")


@pytest.fixture
def service(runtime: Runtime) -> RepoService:
    return runtime.get(RepoService)


@pytest.fixture
def sample(runtime: Runtime, sample_source: Path) -> Repo:
    return register_local_repo(runtime, sample_source, "local/sample")


def make_actor(runtime: Runtime, username: str, *, site_admin: bool = False) -> Actor:
    """A real user (accounts service) and the actor a request by that user acts as."""
    from codewell.accounts.service import AccountService

    accounts = runtime.get(AccountService)
    user = accounts.create_user(INTERNAL, username, site_admin=site_admin)
    return accounts.actor_for(user, via="session")
