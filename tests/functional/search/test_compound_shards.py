"""Compound shards: many repositories per shard, the manifest, merging, and access control per document."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest
from tests.factories import make_user
from tests.gitfixtures import commit, make_repo, register_local_repo

from codewell.accounts.service import AccountService
from codewell.core.actors import ANONYMOUS, INTERNAL, Actor
from codewell.core.settings import Settings
from codewell.repos.service import Repo, RepoService
from codewell.runtime import Runtime
from codewell.search import service as search_service
from codewell.search.index.builder import build_shard
from codewell.search.service import SearchService

QUERIES = [
    "shared_word",
    "shared_word count:all",
    "unique_1",
    "lang:python shared_word",
    "file:^src/ shared_word",
    "repo:^local/r2$ shared_word",
    "-repo:r1 shared_word",
    "/shared_w.rd/ count:all",
    "type:path src",
]


def answers(service: SearchService, actor: Actor = INTERNAL) -> list[tuple[int, list[tuple[str, str, str, list]]]]:  # type: ignore[type-arg]
    out = []
    for query in QUERIES:
        found = service.search(actor, query)
        files = [(f.repo, f.path, f.commit, [(m.line_number, m.line) for m in f.line_matches]) for f in found.files]
        out.append((found.match_count, files))
    return out


def make_repos(tmp_path: Path, runtime: Runtime, count: int) -> list[Repo]:
    repos = []
    for k in range(count):
        work = make_repo(
            tmp_path / f"r{k}",
            {
                "src/a.py": f"shared_word = {k}\nunique_{k} = 1\n",
                "README.md": "shared_word in prose\n",
                f"docs/only_{k}.txt": "nothing here\n",
            },
        )
        repos.append(register_local_repo(runtime, work, f"local/r{k}"))
    return repos


def shard_dirs(runtime: Runtime) -> set[str]:
    return set(os.listdir(runtime.settings.data_dir / "search" / "shards"))


@pytest.fixture
def tiny_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shard of these tests is small; all of them fit one compound shard."""
    monkeypatch.setattr(search_service, "MERGE_SMALL_BYTES", 1 << 20)
    monkeypatch.setattr(search_service, "COMPOUND_TARGET_BYTES", 1 << 22)


def test_one_compound_shard_answers_as_separate_shards(tmp_path: Path, runtime: Runtime, tiny_merges: None) -> None:
    repos = make_repos(tmp_path, runtime, 4)
    service = runtime.get(SearchService)
    for repo in repos:
        service.index(repo)
    assert len(shard_dirs(runtime)) == 4
    separate = answers(service)
    assert separate[0][0] == 8  # shared_word: two lines in each of the four repositories
    assert [f[0] for f in separate[5][1]] == ["local/r2", "local/r2"]

    assert service.merge_shards() is False  # one group, nothing left to merge after it
    assert len(shard_dirs(runtime)) == 1, "the small shards are deleted once nothing lives in them"
    merged = service.shard(repos[0])
    assert merged is not None
    assert [r.name for r in merged.repos] == [f"local/r{k}" for k in range(4)]
    assert answers(service) == separate

    # The same batch indexed in one go (index_many) is one shard too, with the same answers.
    statuses = service.index_many(repos, force=True)
    assert [s.state for s in statuses] == ["indexed"] * 4
    assert [s.documents for s in statuses] == [3] * 4
    assert len(shard_dirs(runtime)) == 1
    assert service.shard(repos[0]) is not merged
    assert answers(service) == separate


def test_private_documents_in_a_shared_shard_stay_hidden(tmp_path: Path, runtime: Runtime, tiny_merges: None) -> None:
    repos = runtime.get(RepoService)
    public = register_local_repo(runtime, make_repo(tmp_path / "pub", {"a.c": "common_word public\n"}), "local/pub")
    private = register_local_repo(
        runtime, make_repo(tmp_path / "priv", {"b.c": "common_word secret_word\n"}), "local/priv", private=True
    )
    service = runtime.get(SearchService)
    service.index_many([public, private])
    assert service.shard(public) is service.shard(private), "both live in one shard"

    accounts = runtime.get(AccountService)
    outsider = accounts.actor_for(make_user(runtime, "outsider"), via="test")
    for actor in (ANONYMOUS, outsider):
        found = service.search(actor, "common_word count:all")
        assert [(f.repo, f.path) for f in found.files] == [("local/pub", "a.c")]
        assert found.match_count == 1, "the private repository's matches are not counted"
        assert service.search(actor, "secret_word").files == []
        assert service.search(actor, "secret_word count:all").match_count == 0
        assert service.search(actor, "repo:priv common_word").files == []
        assert service.search(actor, "type:path b.c").files == []
    granted = make_user(runtime, "granted")
    repos.set_repo_users(INTERNAL, "local/priv", [granted.id])
    found = service.search(accounts.actor_for(granted, via="test"), "common_word count:all")
    assert sorted(f.repo for f in found.files) == ["local/priv", "local/pub"]


def test_reindexing_one_repository_of_a_compound_shard(tmp_path: Path, runtime: Runtime, tiny_merges: None) -> None:
    repos = make_repos(tmp_path, runtime, 3)
    service = runtime.get(SearchService)
    service.index_many(repos)
    compound = service.shard(repos[1])
    assert compound is not None

    commit(tmp_path / "r1", {"src/a.py": "fresh_word = 1\n"})
    runtime.get(RepoService).sync_repo(INTERNAL, "local/r1")
    updated = runtime.get(RepoService).get(INTERNAL, "local/r1")
    assert service.needs_index(updated)
    service.index(updated)
    assert service.shard(updated) is not compound
    assert service.shard(repos[0]) is compound, "the other repositories stay where they are"
    assert [f.repo for f in service.search(INTERNAL, "fresh_word").files] == ["local/r1"]
    assert service.search(INTERNAL, "unique_1").files == [], "the old documents in the compound shard are dead"
    found = service.search(INTERNAL, "shared_word count:all")
    assert found.match_count == 5  # r0 and r2: two lines each; r1: its README only
    status = service.status(INTERNAL, "local/r1")[0]
    assert status.state == "indexed"
    assert status.documents == 3

    # Merging now rewrites both: the compound shard has dead documents and the new one is small.
    assert service.merge_shards() is False
    assert len(shard_dirs(runtime)) == 1
    final = service.shard(repos[0])
    assert final is not None
    assert final.doc_count == 9, "the dead documents were not copied"
    assert service.search(INTERNAL, "shared_word count:all").match_count == 5
    assert [f.repo for f in service.search(INTERNAL, "fresh_word").files] == ["local/r1"]


def test_a_dropped_repository_leaves_nothing_searchable(tmp_path: Path, runtime: Runtime, tiny_merges: None) -> None:
    repos = make_repos(tmp_path, runtime, 3)
    service = runtime.get(SearchService)
    service.index_many(repos)
    service.drop(repos[2])
    found = service.search(INTERNAL, "shared_word count:all")
    assert sorted({f.repo for f in found.files}) == ["local/r0", "local/r1"]
    assert found.match_count == 4
    assert found.skipped == ["local/r2: not indexed yet"]
    assert service.search(INTERNAL, "unique_2").files == []
    for repo in repos[:2]:
        service.drop(repo)
    assert shard_dirs(runtime) == set(), "a shard without a live repository is deleted"
    assert service.search(INTERNAL, "shared_word").files == []


def test_many_unindexed_repositories_are_counted_not_listed(
    tmp_path: Path, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repos(tmp_path, runtime, 3)
    service = runtime.get(SearchService)
    assert service.search(INTERNAL, "shared_word").skipped == [f"local/r{k}: not indexed yet" for k in range(3)]
    monkeypatch.setattr(search_service, "_SKIPPED_DETAIL", 2)
    assert service.search(INTERNAL, "shared_word").skipped == [
        "3 repositories: not indexed yet (cloning or being indexed), not searchable"
    ]


def test_shards_of_the_previous_layout_are_replaced(tmp_path: Path, runtime: Runtime) -> None:
    """Format 2 kept one shard per repository and a `<id>.current` pointer: not read, re-indexed, removed."""
    (repo,) = make_repos(tmp_path, runtime, 1)
    shards = runtime.settings.data_dir / "search" / "shards"
    old = shards / f"{repo.id}-1700000000000000000"
    build_shard(old, {"repo": repo.name}, [])
    (shards / f"{repo.id}.current").write_text(old.name)
    service = runtime.get(SearchService)
    assert service.needs_index(repo)
    assert service.search(INTERNAL, "shared_word").skipped == ["local/r0: not indexed yet"]
    assert service.reconcile() == 1
    assert len(service.search(INTERNAL, "shared_word").files) == 2
    assert old.name not in shard_dirs(runtime)
    assert f"{repo.id}.current" not in shard_dirs(runtime)


def _merge_in_another_process(settings: Settings, flags: str) -> None:
    """A second process merging (forked: no second interpreter start-up); it pauses after building the
    compound shard until told to swap it in."""
    built = Path(flags) / "built"
    go = Path(flags) / "go"
    real = search_service.build_shard

    def build_then_wait(*args: object, **kwargs: object) -> Path:
        target = real(*args, **kwargs)  # type: ignore[arg-type]
        built.touch()
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return target

    search_service.build_shard = build_then_wait  # type: ignore[assignment]
    search_service.MERGE_SMALL_BYTES = 1 << 20
    search_service.COMPOUND_TARGET_BYTES = 1 << 22
    runtime = Runtime.open(settings)
    try:
        runtime.get(SearchService).merge_shards()
    finally:
        runtime.close()


def test_a_repository_reindexed_during_a_merge_keeps_its_newer_shard(
    tmp_path: Path, runtime: Runtime, settings: Settings
) -> None:
    repos = make_repos(tmp_path, runtime, 3)
    service = runtime.get(SearchService)
    for repo in repos:
        service.index(repo)
    flags = tmp_path / "flags"
    flags.mkdir()
    merger = multiprocessing.get_context("fork").Process(target=_merge_in_another_process, args=(settings, str(flags)))
    merger.start()
    try:
        deadline = time.monotonic() + 60
        while not (flags / "built").exists():
            assert merger.is_alive(), "the merging process failed before building"
            assert time.monotonic() < deadline, "the merging process did not build in time"
            time.sleep(0.02)
        # While the other process holds its compound shard (all three repositories), r1 changes here.
        commit(tmp_path / "r1", {"src/a.py": "fresh_word = 1\n"})
        runtime.get(RepoService).sync_repo(INTERNAL, "local/r1")
        updated = runtime.get(RepoService).get(INTERNAL, "local/r1")
        service.index(updated)
        newer = service.shard(updated)
        (flags / "go").touch()
        merger.join(60)
        assert merger.exitcode == 0
    finally:
        if merger.is_alive():
            merger.kill()
    compound = service.shard(repos[0])
    assert compound is not None
    assert service.shard(repos[2]) is compound
    assert [r.name for r in compound.repos] == ["local/r0", "local/r1", "local/r2"]
    assert service.shard(updated) is newer, "the re-indexed repository kept its newer shard"
    assert [f.repo for f in service.search(INTERNAL, "fresh_word").files] == ["local/r1"]
    assert service.search(INTERNAL, "unique_1").files == [], "its copy in the compound shard is dead"
    assert service.search(INTERNAL, "shared_word count:all").match_count == 5
    assert len(shard_dirs(runtime)) == 2
