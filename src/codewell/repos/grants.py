"""Who may read the private repositories: the grants in `repo_permissions` (explicit or synced from a host).

The facade (`RepoService`) checks that the actor may manage grants and looks the repository up first;
these functions only read and write the grants table.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from codewell.core.errors import NotFound
from codewell.db import Database
from codewell.repos.catalog import Catalog
from codewell.repos.models import RepoPermission, RepoRow
from codewell.repos.records import NOT_FOUND_HINT, Repo

EXPLICIT = "explicit"


class Grants:
    def __init__(self, db: Database, catalog: Catalog) -> None:
        self.db = db
        self.catalog = catalog

    def set_repo_users(self, repo: Repo, user_ids: Iterable[int], source: str) -> None:
        """Make exactly `user_ids` (for this `source`) the users granted `repo`."""
        wanted = set(user_ids)
        with self.db.session() as session:
            session.execute(
                delete(RepoPermission).where(RepoPermission.repo_id == repo.id, RepoPermission.source == source)
            )
            if source == EXPLICIT and wanted:
                # An explicit grant overrides a synced row of the same pair: it must outlive the next sync.
                session.execute(
                    update(RepoPermission)
                    .where(RepoPermission.repo_id == repo.id, RepoPermission.user_id.in_(wanted))
                    .values(source=EXPLICIT)
                )
            existing = set(session.scalars(select(RepoPermission.user_id).where(RepoPermission.repo_id == repo.id)))
            session.add_all(
                RepoPermission(repo_id=repo.id, user_id=user_id, source=source) for user_id in wanted - existing
            )
            _flush_permissions(session)

    def set_user_repos(self, user_id: int, names: Iterable[str], source: str) -> None:
        """Make exactly the repositories `names` (for this `source`) the ones granted to `user_id`."""
        wanted = set(names)
        with self.db.session() as session:
            rows = session.execute(select(RepoRow.name, RepoRow.id).where(RepoRow.name.in_(wanted)))
            ids: dict[str, int] = {name: repo_id for name, repo_id in rows}  # noqa: C416 (rows are Row objects)
            missing = sorted(wanted - set(ids))
            if missing:
                raise NotFound(f"repository {missing[0]!r} not found", hint=NOT_FOUND_HINT)
            session.execute(
                delete(RepoPermission).where(RepoPermission.user_id == user_id, RepoPermission.source == source)
            )
            if source == EXPLICIT and ids:
                # An explicit grant overrides a synced row of the same pair: it must outlive the next sync.
                session.execute(
                    update(RepoPermission)
                    .where(RepoPermission.user_id == user_id, RepoPermission.repo_id.in_(list(ids.values())))
                    .values(source=EXPLICIT)
                )
            existing = set(session.scalars(select(RepoPermission.repo_id).where(RepoPermission.user_id == user_id)))
            session.add_all(
                RepoPermission(repo_id=repo_id, user_id=user_id, source=source)
                for repo_id in set(ids.values()) - existing
            )
            _flush_permissions(session)

    def clear_source(self, source: str) -> int:
        """Drop every permission row that `source` wrote (explicit grants are never dropped this way)."""
        if source == EXPLICIT:
            raise ValueError("explicit grants are removed one by one")
        with self.db.session() as session:
            dropped = session.scalars(
                delete(RepoPermission).where(RepoPermission.source == source).returning(RepoPermission.repo_id)
            ).all()
            _flush_permissions(session)
        return len(dropped)

    def repos_of_user(self, user_id: int) -> list[Repo]:
        """Private repositories explicitly granted to `user_id`, by name."""
        with self.db.session() as session:
            rows = session.scalars(
                select(RepoRow)
                .join(RepoPermission, RepoPermission.repo_id == RepoRow.id)
                .where(RepoPermission.user_id == user_id)
                .order_by(RepoRow.name)
            )
            return [self.catalog.to_repo(row) for row in rows]

    def users_of_repo(self, repo: Repo) -> list[int]:
        """IDs of the users granted `repo`."""
        with self.db.session() as session:
            return sorted(
                session.scalars(select(RepoPermission.user_id).where(RepoPermission.repo_id == repo.id)).all()
            )


def _flush_permissions(session: Session) -> None:
    try:
        session.flush()
    except IntegrityError:
        raise NotFound("user not found", hint="grant repositories to existing users only") from None
