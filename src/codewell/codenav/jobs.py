"""codenav's background work as jobs (codewell.jobs): the symbols of every revision search indexes, SCIP
auto-indexing of new branch commits, and the clean-up after a repository's removal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codewell.capability import JobKind, JobRun
from codewell.codenav.autoindex import AutoIndexService
from codewell.codenav.precise import PreciseService
from codewell.codenav.service import CodeNavService
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

# The symbols of one repository are built and dropped one job at a time.
LOCK = "codenav"


def symbols(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    found = runtime.get(RepoService).indexed_revisions(job.payload)
    if found is None:
        return {"skipped": "the repository was removed"}
    repo, commits = found
    runtime.get(CodeNavService).on_indexed(repo, commits)
    return {"revisions": len(set(commits.values()))}


def autoindex(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """Run the SCIP indexers on the repository's branch commits that need it (codenav/autoindex.py).

    The job itself does the work (no in-process queue): a job queued when a process stops is run by the next
    one, and a newer `search.indexed` of the same repository supersedes a queued job with its newer commits."""
    found = runtime.get(RepoService).indexed_revisions(job.payload)
    if found is None:
        return {"skipped": "the repository was removed"}
    repo, commits = found
    results = runtime.get(AutoIndexService).index_due(
        repo,
        commits,
        cancelled=lambda: job.cancelled,
        progress=job.progress,
    )
    return {
        "indexed": [r.commit for r in results if r.ok],
        "failed": {r.commit: r.reason for r in results if not r.ok and r.languages and r.reason != "cancelled"},
    }


def drop(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    repo = runtime.get(RepoService).removed_repo(job.payload)
    runtime.get(CodeNavService).drop(repo)
    runtime.get(PreciseService).drop(repo)
    runtime.get(AutoIndexService).drop(repo)
    return {"dropped": repo.name}


JOB_KINDS: list[JobKind] = [
    JobKind(
        "codenav.symbols",
        symbols,
        "build the symbols of indexed revisions",
        on=("search.indexed",),
        lock=LOCK,
        stage="symbols",
        isolated=True,
        # Built from the search shard the owner replica holds; written to the shared volume.
        placed=True,
    ),
    JobKind(
        "codenav.autoindex",
        autoindex,
        "run the SCIP indexers on a repository's new branch commits (codeIntel.autoIndexing)",
        on=("search.indexed",),
        lock="codenav.autoindex",
        isolated=True,
        lease_seconds=120.0,
        long_running=True,
        when=lambda runtime: runtime.config.code_intel_auto_indexing.enabled,
    ),
    JobKind(
        "codenav.drop",
        drop,
        "remove a removed repository's symbols and SCIP indexes",
        on=("repo.removed",),
        lock=LOCK,
    ),
]
