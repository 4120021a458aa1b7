"""Fixtures of the repos tests: the standard sample repository, registered and mirrored."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.core.actors import Actor
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from tests.factories import actor_of_user, make_user
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
    """A real user (accounts service) and the actor a session of that user acts as."""
    return actor_of_user(runtime, make_user(runtime, username, site_admin=site_admin))
