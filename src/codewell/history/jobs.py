"""history's background work as jobs (codewell.jobs): index the new commits after every sync that changed
refs, and sweep the words no commit uses any more after a repository's removal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codewell.capability import JobKind, JobRun
from codewell.history.indexer import sweep_orphan_words
from codewell.history.service import HistoryService
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

LOCK = "history"


def index(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    repo = runtime.get(RepoService).repo_by_id(int(job.payload["repo_id"]))
    if repo is None:
        return {"skipped": "the repository was removed"}
    stats = runtime.get(HistoryService).index_repo(repo)
    return {"new_commits": stats.new_commits, "refs_updated": stats.refs_updated}


def drop(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    # Commits, refs and branch rows went with the repository (ON DELETE CASCADE); postings have no FK.
    sweep_orphan_words(runtime.db)
    return {}


JOB_KINDS: list[JobKind] = [
    JobKind(
        "history.index",
        index,
        "index a repository's new commits",
        on=("repo.synced",),
        lock=LOCK,
        stage="history",
        isolated=True,
    ),
    JobKind(
        "history.sweep",
        drop,
        "sweep commit-search words no commit uses after a repository's removal",
        on=("repo.removed",),
        lock="history.sweep",
    ),
]
