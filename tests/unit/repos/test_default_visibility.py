"""`repos.defaultVisibility` (issue #33 item 8): a repository registered without saying who reads it is private
unless the site chose "everyone"; an explicit choice always wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.config import parse_site_config
from codewell.config.store import DEFAULT_SITE_CONFIG_TEXT
from codewell.core.actors import INTERNAL
from codewell.core.errors import NotFound
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.factories import set_site_config
from tests.gitfixtures import make_repo
from tests.unit.repos.conftest import make_actor

pytestmark = pytest.mark.database


def test_a_new_site_config_makes_unmarked_repositories_private_and_refuses_sign_up() -> None:
    fresh = parse_site_config(DEFAULT_SITE_CONFIG_TEXT)
    assert fresh.repos_default_visibility == "private"
    assert fresh.auth_providers == [{"type": "builtin", "allowSignup": False}]
    # A file that does not mention the options gets the same safe defaults.
    assert parse_site_config("{}").repos_default_visibility == "private"


def test_an_added_repository_follows_the_site_default_unless_told(
    runtime: Runtime, service: RepoService, tmp_path: Path
) -> None:
    alice = make_actor(runtime, "alice")
    unmarked = service.add_repo(INTERNAL, "https://example.invalid/org/unmarked.git")
    public = service.add_repo(INTERNAL, "https://example.invalid/org/public.git", private=False)
    assert unmarked.private
    assert not public.private
    with pytest.raises(NotFound):
        service.get(alice, unmarked.name)
    assert service.get(alice, public.name).name == public.name

    set_site_config(runtime, {"repos.defaultVisibility": "everyone"})
    shared = service.add_repo(INTERNAL, "https://example.invalid/org/shared.git")
    secret = service.add_repo(INTERNAL, "https://example.invalid/org/secret.git", private=True)
    assert not shared.private
    assert secret.private
    # Changing the default changes no repository registered before.
    assert service.get(INTERNAL, unmarked.name).private
    assert {r.name for r in service.readable(alice)} == {public.name, shared.name}


def test_site_config_sources_without_private_follow_the_default(
    runtime: Runtime, service: RepoService, tmp_path: Path
) -> None:
    make_repo(tmp_path / "code" / "svc", {"main.go": "package main\n"})
    make_repo(tmp_path / "open" / "lib", {"lib.go": "package lib\n"})
    sources = [
        {"kind": "local", "path": str(tmp_path / "code"), "prefix": "corp"},
        {"kind": "local", "path": str(tmp_path / "open"), "prefix": "oss", "private": False},
    ]
    set_site_config(runtime, {"repositories": sources})
    service.reconcile()
    assert service.get(INTERNAL, "corp/svc").private
    assert not service.get(INTERNAL, "oss/lib").private
    set_site_config(runtime, {"repos.defaultVisibility": "everyone"})
    service.reconcile()
    # A source without `private` follows the site's choice on the next reconcile; an explicit one keeps its own.
    assert not service.get(INTERNAL, "corp/svc").private
    assert not service.get(INTERNAL, "oss/lib").private
