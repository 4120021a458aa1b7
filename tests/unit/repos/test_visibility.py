"""The readable set as one query: ids, refs and pages agree with the visibility rule, and grants apply at once."""

from __future__ import annotations

import pytest

from codewell.core.actors import ANONYMOUS, INTERNAL
from codewell.core.settings import Settings
from codewell.repos.service import NewRepo, RepoService
from codewell.runtime import Runtime
from tests.unit.repos.conftest import make_actor

PUBLIC = ["org/pub-a", "org/pub-b", "org/pub-c"]
PRIVATE = ["org/sec-a", "org/sec-b", "org/sec-c", "org/sec-d"]


@pytest.fixture
def rows(runtime: Runtime) -> dict[str, int]:
    """Seven registered rows (nothing cloned), name -> id."""
    service = runtime.get(RepoService)
    service.add_repos(
        INTERNAL,
        [NewRepo(n, f"https://example.invalid/{n}.git", private=n in PRIVATE) for n in PUBLIC + PRIVATE],
        source="manual",
    )
    return {ref.name: ref.id for ref in service.readable_refs(INTERNAL)}


def test_readable_ids_of_admins_users_with_grants_and_anonymous(runtime: Runtime, rows: dict[str, int]) -> None:
    service = runtime.get(RepoService)
    admin = make_actor(runtime, "root", site_admin=True)
    alice, bob = make_actor(runtime, "alice"), make_actor(runtime, "bob")
    # A grant of a public repository too: its id must not count twice nor change anything.
    service.set_user_repos(INTERNAL, alice.user_id or 0, ["org/sec-b", "org/sec-d", "org/pub-a"])
    service.set_user_repos(INTERNAL, bob.user_id or 0, ["org/sec-a"])

    def ids(*names: str) -> frozenset[int]:
        return frozenset(rows[n] for n in names)

    assert service.readable_ids(admin) == service.readable_ids(INTERNAL) == ids(*PUBLIC, *PRIVATE)
    assert service.readable_ids(alice) == ids(*PUBLIC, "org/sec-b", "org/sec-d")
    assert service.readable_ids(bob) == ids(*PUBLIC, "org/sec-a")
    assert service.readable_ids(ANONYMOUS) == ids(*PUBLIC)
    # Every listing says the same as the ids, by name.
    for actor in (admin, alice, bob, ANONYMOUS):
        expected = sorted(n for n, i in rows.items() if i in service.readable_ids(actor))
        assert [r.name for r in service.readable(actor)] == expected
        assert [r.name for r in service.readable_refs(actor)] == expected
        assert [r.name for r in service.iter_readable(actor, page_size=2)] == expected
        assert [r.name for r in service.list_repos(actor, "org/").repos] == expected
    # Refs of given ids: only the readable ones, with the same mirror path as the full record.
    refs = service.refs_of(alice, list(rows.values()))
    assert set(refs) == service.readable_ids(alice)
    assert refs[rows["org/sec-b"]].mirror_path == service.get(alice, "org/sec-b").mirror_path
    assert service.refs_of(alice, []) == {}


def test_iter_readable_fetches_pages_lazily(runtime: Runtime, rows: dict[str, int]) -> None:
    service = runtime.get(RepoService)
    pages = service.iter_readable(ANONYMOUS, page_size=2)
    assert next(pages).name == "org/pub-a"
    # A repository registered after the first page was read shows up in a later page (keyset by name):
    # nothing was read ahead.
    service.add_repo(INTERNAL, "https://example.invalid/org/pub-bb.git", name="org/pub-bb", private=False)
    assert [r.name for r in pages] == ["org/pub-b", "org/pub-bb", "org/pub-c"]


def test_a_revocation_applies_at_once_in_this_and_another_process(
    runtime: Runtime, settings: Settings, rows: dict[str, int]
) -> None:
    service = runtime.get(RepoService)
    carol = make_actor(runtime, "carol")
    # A second runtime on the same database: what another web process would answer.
    other = Runtime.open(settings)
    try:
        elsewhere = other.get(RepoService)
        assert rows["org/sec-c"] not in elsewhere.readable_ids(carol)
        service.set_repo_users(INTERNAL, "org/sec-c", [carol.user_id or 0])
        assert rows["org/sec-c"] in service.readable_ids(carol)
        assert rows["org/sec-c"] in elsewhere.readable_ids(carol)
        # Revoked in the other process: both see it on the next call.
        elsewhere.set_repo_users(INTERNAL, "org/sec-c", [])
        assert rows["org/sec-c"] not in service.readable_ids(carol)
        assert rows["org/sec-c"] not in elsewhere.readable_ids(carol)
        assert "org/sec-c" not in [r.name for r in service.readable_refs(carol)]
        # Turning a public repository private hides it from anonymous visitors at once, too.
        elsewhere.update_repo(INTERNAL, "org/pub-c", private=True)
        assert rows["org/pub-c"] not in service.readable_ids(ANONYMOUS)
        assert rows["org/pub-c"] not in service.readable_ids(carol)
        # A removed repository leaves every readable set, grants included (the cascade).
        service.set_repo_users(INTERNAL, "org/sec-a", [carol.user_id or 0])
        elsewhere.remove_repo(INTERNAL, "org/sec-a")
        assert rows["org/sec-a"] not in service.readable_ids(carol)
        assert rows["org/sec-a"] not in service.readable_ids(INTERNAL)
    finally:
        other.close()
