"""Search's background work as jobs (codewell.jobs): index a repository after a sync that changed its refs,
drop its shards after its removal, and catch up on repositories whose index is missing or of an old format.

A new generation emits `search.indexed` (payload: repository and indexed branch commits), which enqueues the
indexes built on search's shard (codenav's symbols, nls's chunks, auto-indexing).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from codewell.capability import JobKind, JobRun
from codewell.core.errors import CodewellError
from codewell.jobs.service import PRIORITY_EVENT
from codewell.repos.service import RepoService
from codewell.search.service import SearchService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

# Index and drop of one repository never run at once (a drop waits for a running index, then removes it all).
LOCK = "search"
PROGRESS_SECONDS = 1.0
# Up to this many due index jobs are built into one shard: a shard's fixed cost is paid once for all of them.
BATCH = 128
# A synced repository's index waits this long for others to join its batch (one shard for all of them).
BATCH_WINDOW_SECONDS = 2.0
# How often small shards are looked at for merging.
MERGE_SECONDS = 30.0
# How often a searcher replica checks its share (a replica that joined or left moves repositories).
REBALANCE_SECONDS = 5.0


class Cancelled(CodewellError):
    """An operator cancelled the index job: the build stops (its half-built files are removed)."""


def index(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    repo = runtime.get(RepoService).repo_by_id(int(job.payload["repo_id"]))
    if repo is None:
        return {"skipped": "the repository was removed"}
    service = runtime.get(SearchService)
    if not service.owned_filter()(repo.id):
        # Queued while this replica took over another's share, which is back now: its owner holds it.
        return {"skipped": "another searcher replica owns it now"}
    if not service.needs_index(repo):
        return {"indexed": False}

    last = time.monotonic()

    def progress(documents: int, read: int) -> None:
        nonlocal last
        if job.cancelled:
            raise Cancelled("cancelled by an operator")
        if time.monotonic() - last >= PROGRESS_SECONDS:
            last = time.monotonic()
            job.progress(documents, None, f"{documents} files, {read / 1e6:.1f} MB read")

    status = service.index(repo, progress=progress)
    return {"indexed": True, "documents": status.documents}


def index_batch(runtime: Runtime, jobs: Sequence[JobRun]) -> Mapping[int, Mapping[str, Any] | Exception | None]:
    """Index many repositories into one new shard (thousands of small repositories registered at once)."""
    repos_service = runtime.get(RepoService)
    found = {job.id: repos_service.repo_by_id(int(job.payload["repo_id"])) for job in jobs}
    service = runtime.get(SearchService)
    mine = service.owned_filter()
    todo = [repo for repo in found.values() if repo is not None and mine(repo.id) and service.needs_index(repo)]
    statuses = {status.repo: status for status in service.index_many(todo)} if todo else {}
    results: dict[int, Mapping[str, Any] | Exception | None] = {}
    for job in jobs:
        repo = found[job.id]
        if repo is None:
            results[job.id] = {"skipped": "the repository was removed"}
        elif repo.name in statuses:
            status = statuses[repo.name]
            if status.state == "failed":
                results[job.id] = CodewellError(f"indexing {repo.name} failed: {status.error}")
                continue
            results[job.id] = {"indexed": True, "documents": status.documents, "batch": len(todo)}
        else:
            results[job.id] = {"indexed": False}
    return results


def merge(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """Merge small shards into compound ones, a group at a time, until none is left to merge or it is cancelled."""
    service = runtime.get(SearchService)
    rounds = 0
    while not job.cancelled and service.merge_shards():
        rounds += 1
    return {"merged_groups": rounds}


def drop(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    runtime.get(SearchService).drop(runtime.get(RepoService).removed_repo(job.payload))
    return {"dropped": job.payload.get("name")}


def reconcile(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    return {"indexed": runtime.get(SearchService).reconcile()}


def rebalance(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    service = runtime.get(SearchService)
    if not service.replica:
        return {"skipped": "not a searcher replica"}
    return service.rebalance()


JOB_KINDS: list[JobKind] = [
    JobKind(
        "search.index",
        index,
        "build a repository's search shard (due ones together, into one shard)",
        on=("repo.synced",),
        lock=LOCK,
        stage="search",
        batch=BATCH,
        run_batch=index_batch,
        delay=BATCH_WINDOW_SECONDS,
        per_runner=1,
        isolated=True,
        placed=True,
    ),
    JobKind(
        "search.merge",
        merge,
        "merge small shards into compound ones (a query touches shards, not repositories)",
        every=MERGE_SECONDS,
        # Ahead of the syncs and index jobs of a bulk registration (EVENT): merging keeps up with them.
        priority=PRIORITY_EVENT - 10,
        lease_seconds=1800.0,
        long_running=True,
        isolated=True,
        placed=True,
    ),
    JobKind("search.drop", drop, "remove a removed repository's shards", on=("repo.removed",), lock=LOCK, placed=True),
    JobKind(
        "search.reconcile",
        reconcile,
        "index repositories whose shard is missing or of an older format",
        every=3600.0,
        lease_seconds=3600.0,
        isolated=True,
        placed=True,
    ),
    JobKind(
        "search.rebalance",
        rebalance,
        "a searcher replica's share: index what it now owns, drop what its new owner holds (in a cluster)",
        every=REBALANCE_SECONDS,
        lease_seconds=600.0,
        placed=True,
    ),
]
