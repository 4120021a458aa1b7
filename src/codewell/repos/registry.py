"""Registration: adding repositories by URL or path, removing them, and reconciling the site config's
`repositories` sources with the repos table.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from codewell.config.schema import SiteConfig
from codewell.core.actors import INTERNAL
from codewell.core.errors import Conflict, InvalidInput
from codewell.db import Database
from codewell.db.base import utcnow
from codewell.repos.catalog import Catalog
from codewell.repos.mirrors import Mirrors, notify
from codewell.repos.models import RepoRow
from codewell.repos.records import NewRepo, ReconcileReport, Repo, RepoListener
from codewell.repos.sources import (
    RepoSpec,
    check_clone_url,
    check_name,
    default_private,
    discover,
    is_git_dir,
    name_from_url,
    split_credentials,
)
from codewell.repos.sync import remove_mirror

log = logging.getLogger(__name__)


class Registry:
    """Rows of the repos table come and go here; `config` gives the current site config for reconcile."""

    def __init__(self, db: Database, catalog: Catalog, mirrors: Mirrors) -> None:
        self.db = db
        self.catalog = catalog
        self.mirrors = mirrors
        self.removal_listeners: list[RepoListener] = []
        self.source_errors: list[str] = []
        # Set by RepoService: enqueue the first sync of new rows / the clean-up of a removed repository, each in
        # the transaction that adds or deletes the row (codewell.jobs).
        self.on_added: Callable[[Session, list[int], str], None] | None = None
        self.on_removed: Callable[[Session, Repo], None] | None = None

    def add(
        self,
        url: str,
        *,
        name: str | None,
        private: bool,
        branches: Iterable[str],
        sync_interval_seconds: int,
        credentials_env: str | None,
        description: str,
        source: str = "manual",
    ) -> Repo:
        """Register a repository by clone URL or local path (not cloned yet; a sync clones it)."""
        if "\x00" in url or not url.strip():
            raise InvalidInput("clone URL is empty or contains a NUL byte", hint="give a clone URL or a local path")
        local = "://" not in url and not git_scp_like(url)
        # Everything is checked before the row exists: a source that fails registers nothing (issue #33).
        if local:
            path = Path(url).expanduser().resolve()
            if not path.is_dir():
                raise InvalidInput(f"local path {url!r} is not a directory", hint="give the path of a git repository")
            if not is_git_dir(path):
                raise InvalidInput(
                    f"local path {url!r} is not a git repository", hint="give the path of a git repository"
                )
            url = str(path)
            name = check_name(name) if name else check_name(f"local/{path.name.removesuffix('.git')}")
        else:
            check_clone_url(url)
            name = check_name(name) if name else name_from_url(url)
        clean, secret = split_credentials(url)
        spec = RepoSpec(
            name=name,
            clone_url=clean,
            kind="local" if local else "git",
            private=private,
            extra_branches=tuple(branches),
            sync_interval_seconds=sync_interval_seconds,
            credentials_env=credentials_env,
            description=description,
            secret=secret,
        )
        with self.db.session() as session:
            if session.scalar(select(RepoRow.id).where(RepoRow.name == name)) is not None:
                raise Conflict(f"repository {name!r} is already registered", hint="remove it first or pick --name")
            row = self._new_row(spec, source=source)
            session.add(row)
            session.flush()
            if self.on_added is not None:
                self.on_added(session, [row.id], "repo.added")
        if secret:
            self.mirrors.secrets[name] = secret
        return self.catalog.get(INTERNAL, name)

    @staticmethod
    def _new_row(spec: RepoSpec, source: str) -> RepoRow:
        return RepoRow(
            name=spec.name,
            source=source,
            kind=spec.kind,
            clone_url=spec.clone_url,
            credentials_env=spec.credentials_env,
            description=spec.description,
            # Resolved by then: `add` and `reconcile` replace None with the site's default.
            private=bool(spec.private),
            extra_branches="\n".join(spec.extra_branches),
            sync_interval_seconds=spec.sync_interval_seconds,
            sync_state="new",
            next_sync_at=utcnow(),
        )

    def add_many(self, repos: list[NewRepo], source: str) -> list[str]:
        """Insert rows for `repos` in one transaction, skipping names already registered; the names added."""
        for repo in repos:
            check_name(repo.name)
        added: list[str] = []
        new_rows: list[RepoRow] = []
        with self.db.session() as session:
            taken = set(session.scalars(select(RepoRow.name)))
            for repo in repos:
                if repo.name in taken:
                    continue
                taken.add(repo.name)
                spec = RepoSpec(
                    name=repo.name,
                    clone_url=repo.clone_url,
                    kind="git",
                    private=repo.private,
                    sync_interval_seconds=repo.sync_interval_seconds,
                    credentials_env=repo.credentials_env,
                    description=repo.description,
                )
                row = self._new_row(spec, source=source)
                row.fork, row.archived = repo.fork, repo.archived
                session.add(row)
                new_rows.append(row)
                added.append(repo.name)
            session.flush()
            if self.on_added is not None and new_rows:
                self.on_added(session, [row.id for row in new_rows], "codehost.discovered")
        return added

    def update(self, repo: Repo, changes: dict[str, object]) -> Repo:
        """Set the given columns (private, fork, archived, description, clone_url, credentials_env)."""
        with self.db.session() as session:
            row = session.get(RepoRow, repo.id)
            if row is not None:
                for key, value in changes.items():
                    if getattr(row, key) != value:
                        setattr(row, key, value)
        return self.catalog.get(INTERNAL, repo.name)

    def remove(self, repo: Repo) -> Repo:
        """Unregister `repo`, delete its mirror and tell removal listeners (indexes) to drop it."""
        with self.mirrors.lock(repo.name), self.db.session() as session:
            session.execute(delete(RepoRow).where(RepoRow.id == repo.id))
            if self.on_removed is not None:
                self.on_removed(session, repo)
        remove_mirror(repo.mirror_path, self.catalog.mirror_root)
        self.mirrors.secrets.pop(repo.name, None)
        notify(self.removal_listeners, repo)
        return repo

    def reconcile(self, config: SiteConfig) -> ReconcileReport:
        """Make the repos table match the site config `repositories` (adds, updates, removes)."""
        report = ReconcileReport()
        specs: dict[str, RepoSpec] = {}
        private = default_private(config)
        for index, source in enumerate(config.repositories):
            try:
                for found in discover(source):
                    specs.setdefault(
                        found.name, found if found.private is not None else replace(found, private=private)
                    )
            except Exception as exc:
                report.errors.append(f"repositories[{index}] ({source.kind}): {exc}")
        self.source_errors = report.errors
        for spec in specs.values():
            if spec.secret:
                self.mirrors.secrets[spec.name] = spec.secret
        with self.db.session() as session:
            rows = {row.name: row for row in session.scalars(select(RepoRow))}
            for spec in specs.values():
                self._upsert(session, rows.get(spec.name), spec, report)
            if report.added and self.on_added is not None:
                session.flush()
                added_ids = session.scalars(select(RepoRow.id).where(RepoRow.name.in_(report.added))).all()
                self.on_added(session, list(added_ids), "config.changed")
            # A source that failed to list (a path temporarily missing) must not delete its mirrors.
            if not report.errors:
                report.removed = [
                    name for name, row in rows.items() if row.source.startswith("config:") and name not in specs
                ]
        for name in report.removed:
            self.remove(self.catalog.get(INTERNAL, name))
        if report.added or report.removed or report.errors:
            log.info(
                "repositories reconciled with site config",
                extra={"added": len(report.added), "removed": len(report.removed), "errors": report.errors},
            )
        return report

    def _upsert(self, session: Session, row: RepoRow | None, spec: RepoSpec, report: ReconcileReport) -> None:
        if row is None:
            session.add(self._new_row(spec, source=f"config:{spec.kind}"))
            report.added.append(spec.name)
            return
        wanted = {
            "source": f"config:{spec.kind}",
            "kind": spec.kind,
            "clone_url": spec.clone_url,
            "credentials_env": spec.credentials_env,
            "private": bool(spec.private),
            "extra_branches": "\n".join(spec.extra_branches),
            "sync_interval_seconds": spec.sync_interval_seconds,
        }
        changed = {key: value for key, value in wanted.items() if getattr(row, key) != value}
        for key, value in changed.items():
            setattr(row, key, value)
        if changed:
            report.updated.append(spec.name)


def git_scp_like(url: str) -> bool:
    """True for scp-style ssh addresses such as git@github.com:org/repo.git."""
    head = url.split("/", 1)[0]
    return ":" in head and not os.path.exists(url)
