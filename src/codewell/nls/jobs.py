"""nls's background work as jobs (codewell.jobs): a chunk index for every revision search indexes (after
codenav's symbols when both are queued: its chunk boundaries come from them), and the clean-up after removal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codewell.capability import JobKind, JobRun
from codewell.nls.service import NlsService
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

LOCK = "nls"


def chunks(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    found = runtime.get(RepoService).indexed_revisions(job.payload)
    if found is None:
        return {"skipped": "the repository was removed"}
    repo, branches = found
    runtime.get(NlsService).on_indexed(repo, branches)
    return {"revisions": len(set(branches.values()))}


def drop(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    repo = runtime.get(RepoService).removed_repo(job.payload)
    runtime.get(NlsService).drop(repo)
    return {"dropped": repo.name}


JOB_KINDS: list[JobKind] = [
    JobKind(
        "nls.chunks",
        chunks,
        "build the natural-language index of indexed revisions",
        on=("search.indexed",),
        lock=LOCK,
        stage="nls",
        isolated=True,
        placed=True,
    ),
    JobKind(
        "nls.drop",
        drop,
        "remove a removed repository's natural-language indexes",
        on=("repo.removed",),
        lock=LOCK,
        placed=True,
    ),
]
