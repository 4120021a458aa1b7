"""Mirrors on disk: cloning and fetching them (one at a time per repository), the back-off after failures,
credentials for fetches, and the listeners told about changed or removed repositories.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pygit2
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from codewell.core.errors import NotFound
from codewell.db import Database
from codewell.db.base import utcnow
from codewell.repos import git, metrics
from codewell.repos.catalog import Catalog
from codewell.repos.models import RepoRow
from codewell.repos.records import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_MAX_SECONDS,
    NOT_FOUND_HINT,
    Repo,
    RepoListener,
    SyncOutcome,
)
from codewell.repos.sync import Credentials, clone_mirror, ensure_head, fetch_mirror

log = logging.getLogger(__name__)


def backoff_seconds(failures: int) -> int:
    """Seconds to wait before retrying after `failures` consecutive failed syncs (exponential, capped)."""
    return int(min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, failures - 1)))


# Runs in the transaction recording a sync that changed refs (or a first clone): emits what it causes.
SyncedHook = Callable[[Session, Repo], None]
# Gets the transaction and the ids of repositories whose sync became due.
DueHook = Callable[[Session, list[int]], None]
# Gets a repository and its credentials name (`credentials_env`); answers the secret (`user:token` or a token)
# when it owns that repository's name, None when it does not, and raises git.GitCommandError (a safe message) when
# it owns it but cannot produce the secret. Code host connections provide one (codehosts), so that their tokens
# live in the process's memory and reach only the git child fetching from their host, never `os.environ`.
CredentialSource = Callable[[Repo, str], str | None]


def notify(listeners: list[RepoListener], repo: Repo) -> None:
    """Call every listener with `repo`; one that fails is logged and the others still run."""
    for listener in list(listeners):
        try:
            listener(repo)
        except Exception:
            # A failing listener (an indexer) must not fail the sync nor starve the others.
            log.exception("repository listener failed", extra={"repo": repo.name})


class Mirrors:
    """Syncs of the mirrors under `catalog.mirror_root`; `secrets` holds userinfo from configured URLs."""

    def __init__(self, db: Database, catalog: Catalog) -> None:
        self.db = db
        self.catalog = catalog
        self.sync_listeners: list[RepoListener] = []
        # Progress callbacks of syncs a caller of this process waits for (`codewell repos add`'s bars), by id.
        self.progress_hooks: dict[int, Callable[[str, int], None]] = {}
        # Userinfo from configured URLs: used for fetches, kept in memory only.
        self.secrets: dict[str, str] = {}
        self.credential_sources: list[CredentialSource] = []
        self._sync_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def lock(self, name: str) -> threading.Lock:
        """The lock held while `name` is synced or removed (never both at once)."""
        with self._locks_guard:
            return self._sync_locks.setdefault(name, threading.Lock())

    def due_repos(self, now: datetime | None = None) -> list[str]:
        """Names of repositories whose next sync is due, most overdue first."""
        now = now or utcnow()
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(RepoRow.name)
                    .where((RepoRow.next_sync_at == None) | (RepoRow.next_sync_at <= now))  # noqa: E711
                    .order_by(RepoRow.next_sync_at)
                )
            )

    def sync(
        self,
        repo: Repo,
        on_progress: Callable[[str, int], None] | None = None,
        on_synced: SyncedHook | None = None,
    ) -> SyncOutcome:
        """Clone (first time) or fetch `repo` now; failures are recorded on the repository, not raised.

        `on_synced(session, repo)` runs in the transaction that records a clone or a fetch that changed refs
        (the repos.sync job emits `repo.synced` there, so the indexing it causes commits with the new state).
        """
        with self.lock(repo.name):
            return self._sync(repo, on_progress, on_synced)

    @staticmethod
    def postpone(session: Session, repo_ids: list[int], *, now: datetime | None = None) -> None:
        """Move the next scheduled sync of these repositories one interval on (a sync of them was just queued)."""
        now = now or utcnow()
        for start in range(0, len(repo_ids), 500):
            for row in session.scalars(select(RepoRow).where(RepoRow.id.in_(repo_ids[start : start + 500]))):
                row.next_sync_at = now + timedelta(seconds=max(row.sync_interval_seconds, 60))

    def enqueue_due(self, enqueue: DueHook, *, now: datetime | None = None, limit: int = 5000) -> int:
        """Hand the repositories whose sync is due to `enqueue(session, repo_ids)` and move their next sync one
        interval on, in one transaction: each tick enqueues a due repository once, whichever process ticks."""
        now = now or utcnow()
        with self.db.session() as session:
            rows = session.execute(
                select(RepoRow.id, RepoRow.sync_interval_seconds)
                .where((RepoRow.next_sync_at == None) | (RepoRow.next_sync_at <= now))  # noqa: E711
                .order_by(RepoRow.next_sync_at)
                .limit(limit)
            ).all()
            if not rows:
                return 0
            by_interval: dict[int, list[int]] = {}
            for repo_id, interval in rows:
                by_interval.setdefault(interval, []).append(repo_id)
            for interval, ids in by_interval.items():
                for start in range(0, len(ids), 500):
                    session.execute(
                        update(RepoRow)
                        .where(RepoRow.id.in_(ids[start : start + 500]))
                        .values(next_sync_at=now + timedelta(seconds=max(interval, 60)))
                    )
            enqueue(session, [repo_id for repo_id, _ in rows])
        return len(rows)

    def request_sync(self, repo: Repo) -> None:
        """Make `repo` due now: the background scheduler syncs it within a tick (for long clones)."""
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is not None:
                row.next_sync_at = utcnow()

    def _credentials(self, repo: Repo, row_env: str | None) -> Credentials | None:
        """The secret of this fetch: a credential source owning the name, else the operator's own environment
        variable of that name (`credentialsEnv`), else userinfo of the configured URL."""
        if row_env:
            for source in list(self.credential_sources):
                provided = source(repo, row_env)
                if provided:
                    return Credentials(provided)
            secret = os.environ.get(row_env)
            if not secret:
                raise git.GitCommandError(f"environment variable {row_env} (credentialsEnv) is not set")
            return Credentials(secret)
        secret = self.secrets.get(repo.name)
        return Credentials(secret) if secret else None

    def _sync(
        self, repo: Repo, on_progress: Callable[[str, int], None] | None, on_synced: SyncedHook | None
    ) -> SyncOutcome:
        started = time.monotonic()
        mirror = repo.mirror_path
        first = not mirror.is_dir()
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is None:
                raise NotFound(f"repository {repo.name!r} not found", hint=NOT_FOUND_HINT)
            credentials_env = row.credentials_env
            if first:
                row.sync_state = "cloning"
        before = git.ref_snapshot(mirror)
        try:
            credentials = self._credentials(repo, credentials_env)
            if first:
                clone_mirror(repo.clone_url, mirror, credentials=credentials, on_progress=on_progress)
            else:
                fetch_mirror(repo.clone_url, mirror, credentials=credentials)
            branch = self._fix_head(mirror)
        except (git.GitCommandError, OSError, pygit2.GitError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            metrics.SYNCS.labels("failed").inc()
            metrics.SYNC_SECONDS.observe(time.monotonic() - started)
            return self._record_failure(repo, message)
        after = git.ref_snapshot(mirror)
        changed = before != after
        metrics.SYNCS.labels("changed" if changed else "unchanged").inc()
        metrics.SYNC_SECONDS.observe(time.monotonic() - started)
        updated = self._record_success(
            repo, branch, git.directory_size(mirror), on_synced if (changed or first) else None
        )
        log.info(
            "repository synced",
            extra={"repo": repo.name, "cloned": first, "changed": changed, "seconds": time.monotonic() - started},
        )
        if changed or first:
            notify(self.sync_listeners, updated)
        return SyncOutcome(updated, ok=True, changed=changed, cloned=first)

    @staticmethod
    def _fix_head(mirror: Path) -> str | None:
        """The mirror's default branch, re-pointing HEAD when a fetch pruned the branch it named."""
        repository = pygit2.Repository(str(mirror))
        branch = git.default_branch(repository)
        head = repository.references["HEAD"].target if "HEAD" in repository.references else None
        if branch is not None and head != f"refs/heads/{branch}":
            ensure_head(mirror, branch)
        return branch

    def _record_success(self, repo: Repo, branch: str | None, size: int, on_synced: SyncedHook | None) -> Repo:
        now = utcnow()
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is None:  # removed while syncing
                return repo
            row.sync_state, row.last_error, row.failures = "ready", None, 0
            row.default_branch, row.size_bytes, row.last_fetched_at = branch, size, now
            row.next_sync_at = now + timedelta(seconds=row.sync_interval_seconds)
            updated = self.catalog.to_repo(row)
            if on_synced is not None:
                session.flush()
                on_synced(session, updated)
            return updated

    def _record_failure(self, repo: Repo, message: str) -> SyncOutcome:
        now = utcnow()
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is None:
                return SyncOutcome(repo, ok=False, changed=False, cloned=False, error=message)
            row.failures += 1
            row.sync_state, row.last_error = "failed", message
            row.next_sync_at = now + timedelta(seconds=backoff_seconds(row.failures))
            updated = self.catalog.to_repo(row)
        log.warning("repository sync failed: %s", message, extra={"repo": repo.name, "failures": updated.failures})
        return SyncOutcome(updated, ok=False, changed=False, cloned=False, error=message)
