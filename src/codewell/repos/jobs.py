"""The repos capability's background work as jobs (codewell.jobs): syncing mirrors on their schedule and when
asked, reconciling the site config's `repositories`, and deleting the mirror of a removed repository.

A sync that cloned or changed refs emits `repo.synced` in the transaction recording it; the kinds that declared
`on=("repo.synced",)` (search's index, history's commit index) are enqueued there. docs/architecture.md "Jobs"
has the whole chain.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from codewell.capability import JobGiveUp, JobKind, JobRun
from codewell.jobs.service import JobService
from codewell.repos.models import RepoRow
from codewell.repos.records import Repo
from codewell.repos.service import MIRROR_LOCK, SYNC_JOB, RepoService, repo_resource
from codewell.repos.sync import remove_mirror

if TYPE_CHECKING:
    from codewell.runtime import Runtime

# How often due syncs are looked for (intervals are minutes to hours; pushes enqueue their sync at once).
SCHEDULE_SECONDS = 10.0
# Progress of a clone is written to the job row at most this often.
PROGRESS_SECONDS = 0.5


def _service(runtime: Runtime) -> RepoService:
    return runtime.get(RepoService)


def sync(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """Clone or fetch one repository; a failure is recorded on it (its own back-off) and fails the job."""
    service = _service(runtime)
    repo = service.repo_by_id(int(job.payload["repo_id"]))
    if repo is None:
        return {"skipped": "the repository was removed"}
    local_hook = service.mirrors.progress_hooks.get(repo.id)
    last = 0.0

    def progress(phase: str, percent: int) -> None:
        nonlocal last
        if local_hook is not None:
            local_hook(phase, percent)
        now = time.monotonic()
        if now - last >= PROGRESS_SECONDS:
            last = now
            job.progress(percent, 100, phase)

    def synced(session: Session, updated: Repo) -> None:
        runtime.get(JobService).emit("repo.synced", repo_resource(updated.id), {"repo_id": updated.id}, session=session)

    outcome = service.mirrors.sync(repo, progress, synced)
    if not outcome.ok:
        raise JobGiveUp(f"sync of {repo.name} failed (retried on its own back-off schedule): {outcome.error}")
    return {"ok": True, "changed": outcome.changed, "cloned": outcome.cloned}


def schedule(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    """Enqueue the syncs that are due (each repository's interval, or its back-off after failures)."""
    service = _service(runtime)
    count = service.mirrors.enqueue_due(lambda session, ids: service.enqueue_syncs(session, ids, "schedule"))
    return {"enqueued": count}


def reconcile(runtime: Runtime, _job: JobRun) -> Mapping[str, Any]:
    """Make the repos table match the site config's `repositories` (new rows get their first sync queued)."""
    report = _service(runtime).reconcile()
    return {"added": len(report.added), "updated": len(report.updated), "removed": len(report.removed)}


def delete_mirror(runtime: Runtime, job: JobRun) -> Mapping[str, Any]:
    """Delete a removed repository's mirror after any sync of it that was running has finished."""
    service = _service(runtime)
    name = str(job.payload["name"])
    with runtime.db.session() as session:
        reused = session.scalar(select(RepoRow.id).where(RepoRow.name == name))
    if reused is not None:
        return {"skipped": "the name was registered again"}
    remove_mirror(service.catalog.mirror_path(name), service.catalog.mirror_root)
    return {"deleted": name}


JOB_KINDS: list[JobKind] = [
    JobKind(
        SYNC_JOB,
        sync,
        "clone or fetch a repository's mirror",
        lock=MIRROR_LOCK,
        max_attempts=3,
        lease_seconds=900.0,
        stage="mirror",
        enqueued_by="a new repository (in its row's transaction), `repos.schedule`, a push webhook, "
        "`codewell repos sync`, `POST /.api/repos/<name>/-/sync`",
    ),
    JobKind("repos.schedule", schedule, "enqueue the syncs that are due", every=SCHEDULE_SECONDS, lease_seconds=120.0),
    JobKind(
        "repos.reconcile",
        reconcile,
        "reconcile the site config's repositories with the registered ones",
        on=("config.changed",),
        every=300.0,
        lease_seconds=600.0,
    ),
    JobKind(
        "repos.delete_mirror",
        delete_mirror,
        "delete a removed repository's mirror",
        on=("repo.removed",),
        lock=MIRROR_LOCK,
        lease_seconds=300.0,
    ),
]
