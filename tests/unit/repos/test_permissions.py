"""Who may read which repository: one rule, and hidden repositories read exactly like missing ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewell.accounts.service import AccountService
from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from tests.gitfixtures import register_local_repo
from tests.unit.repos.conftest import make_actor

pytestmark = pytest.mark.database


@pytest.fixture
def two_repos(runtime: Runtime, sample_source: Path) -> RepoService:
    register_local_repo(runtime, sample_source, "local/public")
    register_local_repo(runtime, sample_source, "local/secret", private=True)
    return runtime.get(RepoService)


def _error_of(call: object) -> tuple[type[Exception], str, str | None]:
    assert callable(call)
    try:
        call()
    except (NotFound, PermissionDenied, InvalidInput) as exc:
        return type(exc), exc.message.replace("local/secret", "X").replace("local/missing", "X"), exc.hint
    raise AssertionError("no error raised")


def test_anonymous_and_other_users_cannot_tell_a_private_repo_from_a_missing_one(
    runtime: Runtime, two_repos: RepoService
) -> None:
    bob = make_actor(runtime, "bob")
    for actor in (ANONYMOUS, bob):
        for method in ("get", "resolve", "list_files", "list_refs"):
            hidden = _error_of(lambda m=method, a=actor: getattr(two_repos, m)(a, "local/secret"))
            missing = _error_of(lambda m=method, a=actor: getattr(two_repos, m)(a, "local/missing"))
            assert hidden == missing
            assert hidden[0] is NotFound
        hidden = _error_of(lambda a=actor: two_repos.read_file(a, "local/secret", "README.md"))
        assert hidden == _error_of(lambda a=actor: two_repos.read_file(a, "local/missing", "README.md"))
        assert [r.name for r in two_repos.list_repos(actor, "local").repos] == ["local/public"]
        assert [r.name for r in two_repos.readable(actor)] == ["local/public"]
        assert len(two_repos.readable_ids(actor)) == 1


def test_granted_users_and_site_admins_read_private_repos(runtime: Runtime, two_repos: RepoService) -> None:
    alice = make_actor(runtime, "alice")
    admin = make_actor(runtime, "root", site_admin=True)
    assert two_repos.get(admin, "local/secret").private
    two_repos.set_repo_users(INTERNAL, "local/secret", [alice.user_id or 0])
    assert two_repos.read_file(alice, "local/secret", "README.md").lines[0] == "# Sample"
    assert [r.name for r in two_repos.list_repos(alice, "").repos] == ["local/public", "local/secret"]
    assert two_repos.users_of_repo(admin, "local/secret") == [alice.user_id]
    assert [r.name for r in two_repos.repos_of_user(alice, alice.user_id or 0)] == ["local/secret"]
    # Replacing the grants of a source revokes the old ones.
    two_repos.set_user_repos(INTERNAL, alice.user_id or 0, [])
    with pytest.raises(NotFound):
        two_repos.get(alice, "local/secret")


def test_grants_go_away_with_the_user(runtime: Runtime, two_repos: RepoService) -> None:

    carol = make_actor(runtime, "carol")
    two_repos.set_repo_users(INTERNAL, "local/secret", [carol.user_id or 0])
    runtime.get(AccountService).delete_user(INTERNAL, carol.user_id or 0)
    assert two_repos.users_of_repo(INTERNAL, "local/secret") == []


def test_granting_to_unknown_users_or_repos_is_not_found(two_repos: RepoService) -> None:
    with pytest.raises(NotFound, match="user not found"):
        two_repos.set_repo_users(INTERNAL, "local/secret", [987654])
    with pytest.raises(NotFound, match="repository 'local/nope' not found"):
        two_repos.set_user_repos(INTERNAL, 1, ["local/nope"])


def test_admin_operations_need_a_site_admin_whether_or_not_the_repo_exists(
    runtime: Runtime, two_repos: RepoService
) -> None:
    bob = make_actor(runtime, "bob")
    for actor in (ANONYMOUS, bob):
        for name in ("local/public", "local/secret", "local/missing"):
            with pytest.raises(PermissionDenied, match="only site admins"):
                two_repos.sync_repo(actor, name)
            with pytest.raises(PermissionDenied):
                two_repos.remove_repo(actor, name)
            with pytest.raises(PermissionDenied):
                two_repos.set_repo_users(actor, name, [])
        with pytest.raises(PermissionDenied):
            two_repos.add_repo(actor, "https://example.com/x.git")
        with pytest.raises(PermissionDenied):
            two_repos.users_of_repo(actor, "local/public")
    # A user may list their own grants, not someone else's.
    assert two_repos.repos_of_user(bob, bob.user_id or 0) == []
    with pytest.raises(PermissionDenied):
        two_repos.repos_of_user(bob, (bob.user_id or 0) + 1)


def test_list_repos_matches_substrings_case_insensitively_with_limits(runtime: Runtime, sample_source: Path) -> None:
    service = runtime.get(RepoService)
    for name in ("github.com/Org/Alpha", "github.com/org/beta_1", "gitlab.com/x/alphabet"):
        service.add_repo(INTERNAL, f"https://{name}.git", private=False)
    assert [r.name for r in service.list_repos(ANONYMOUS, "ALPHA").repos] == [
        "github.com/Org/Alpha",
        "gitlab.com/x/alphabet",
    ]
    # `_` and `%` are literal characters, not SQL wildcards.
    assert [r.name for r in service.list_repos(ANONYMOUS, "a_1").repos] == ["github.com/org/beta_1"]
    assert service.list_repos(ANONYMOUS, "%").repos == []
    page = service.list_repos(ANONYMOUS, "", limit=2)
    assert len(page.repos) == 2
    assert page.has_more
    assert not service.list_repos(ANONYMOUS, "", limit=3).has_more
    for bad in (0, 10001):
        with pytest.raises(InvalidInput, match="between 1 and 10000"):
            service.list_repos(ANONYMOUS, "", limit=bad)


def test_did_you_mean_never_names_a_repository_the_caller_may_not_read(runtime: Runtime, sample_source: Path) -> None:
    service = runtime.get(RepoService)
    register_local_repo(runtime, sample_source, "local/secret", private=True)
    register_local_repo(runtime, sample_source, "github.com/org/tool")
    register_local_repo(runtime, sample_source, "gitlab.com/org/tool")
    with pytest.raises(NotFound) as hidden:
        service.get(ANONYMOUS, "secret")
    assert "local/secret" not in f"{hidden.value.message} {hidden.value.hint}"
    assert service.suggest(INTERNAL, "secret") == "local/secret"
    # Two candidates: no guess.
    assert service.suggest(INTERNAL, "tool") is None
    assert service.suggest(INTERNAL, "org/tool") is None
    assert service.suggest(INTERNAL, "gitlab.com/ORG/tool") == "gitlab.com/org/tool"
    # Names longer than any repository name are simply not found (no LIKE pattern is built).
    assert service.suggest(INTERNAL, "x" * 60_000) is None
