"""A server's SearchService picks up an index generation written by another process (#15)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from tests.gitfixtures import commit, make_repo, register_local_repo

from codewell.core.actors import INTERNAL
from codewell.core.settings import Settings
from codewell.jobs.service import JobService
from codewell.repos.service import RepoService
from codewell.runtime import Runtime
from codewell.search import service as search_service
from codewell.search.service import SearchService


def paths(service: SearchService, query: str) -> list[str]:
    return [f.path for f in service.search(INTERNAL, query).files]


def test_a_generation_built_by_another_process_is_picked_up(
    tmp_path: Path, runtime: Runtime, settings: Settings
) -> None:
    work = make_repo(tmp_path / "work", {"a.c": "int old_word = 1;\n"})
    repo = register_local_repo(runtime, work, "local/gen")
    server = runtime.get(SearchService)
    server.index(repo)
    assert paths(server, "old_word") == ["a.c"]
    held = server.shard(repo)  # a search still running on the first generation holds it
    assert held is not None
    first = weakref.ref(held)

    commit(work, {"b.c": "int new_word = 2;\n"}, delete=["a.c"])
    runtime.get(RepoService).sync_repo(INTERNAL, "local/gen")
    # `codewell index` in another process: its own Runtime over the same data directory and database.
    other = Runtime.open(settings)
    try:
        other_service = other.get(SearchService)
        other_service.index(other.get(RepoService).get(INTERNAL, "local/gen"))
        other_service.close()
    finally:
        other.close()

    assert paths(server, "new_word") == ["b.c"]
    assert paths(server, "old_word") == []
    # The running search still reads its generation (the writer removed the files, the mapping stays).
    assert held.line_text(0, int(held.line_base[0])) == b"int old_word = 1;"
    del held
    gc.collect()
    assert first() is None, "the replaced generation is released once no search holds it"


def test_an_index_dropped_by_another_process_is_noticed(tmp_path: Path, runtime: Runtime, settings: Settings) -> None:
    work = make_repo(tmp_path / "work", {"a.c": "int old_word = 1;\n"})
    repo = register_local_repo(runtime, work, "local/gone")
    server = runtime.get(SearchService)
    server.index(repo)
    assert paths(server, "old_word") == ["a.c"]
    other = Runtime.open(settings)
    try:
        other.get(SearchService).drop(other.get(RepoService).get(INTERNAL, "local/gone"))
    finally:
        other.close()
    results = server.search(INTERNAL, "old_word")
    assert results.files == []
    assert results.skipped == ["local/gone: not indexed yet"]


def test_a_shard_truncated_under_the_server_is_dropped_and_queued_for_indexing(
    tmp_path: Path, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = make_repo(tmp_path / "work", {"a.c": "int damaged_word = 1;\n"})
    repo = register_local_repo(runtime, work, "local/damaged")
    server = runtime.get(SearchService)
    server.index(repo)
    assert paths(server, "damaged_word") == ["a.c"]
    shard = server.shard(repo)
    assert shard is not None
    # Another hand truncates the content file: reading it through the old mapping would be SIGBUS.
    (shard.path / "content.bin").write_bytes(b"")
    del shard
    monkeypatch.setattr(search_service, "_INTEGRITY_SECONDS", 0.0)
    found = server.search(INTERNAL, "damaged_word")
    assert found.files == []
    assert any("local/damaged" in note for note in found.skipped)  # named as not indexed, not silently gone
    queued = runtime.get(JobService).list_jobs(INTERNAL, resource=f"repo:{repo.id}", limit=10)
    assert ("search.index", "queued") in [(job.kind, job.state) for job in queued]
    server.index(repo)  # the job's work: built again, searchable again
    assert paths(server, "damaged_word") == ["a.c"]
