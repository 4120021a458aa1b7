"""The catalog of registered repositories as an actor sees them: the one visibility rule and every lookup.

Site admins and INTERNAL read everything, users read public repositories and private ones granted to them,
anonymous visitors read public repositories only. A repository the actor may not read raises `NotFound`
exactly like a missing one; the "did you mean" suggestion of a failed lookup is chosen among the
repositories the actor may read, so it never reveals another one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Integer, bindparam, exists, false, func, or_, select, true
from sqlalchemy.engine import Row

from codewell.authz import Action, allowed
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.db import Database
from codewell.repos.models import RepoPermission, RepoRow
from codewell.repos.records import LIST_REPOS_MAX, MAX_NAME_CHARS, NOT_FOUND_HINT, Repo, RepoPage, RepoRef


def _scope(actor: Actor) -> str:
    if allowed(actor, Action.REPOS_READ_ALL):
        return "all"
    if actor.is_user and actor.user_id is not None:
        return "user"
    return "public"


def _visibility(scope: str, user_id: object) -> ColumnElement[bool]:
    """Site admins and INTERNAL read everything; users public repos and those granted; others public ones."""
    if scope == "all":
        return true()
    if scope == "user":
        granted = exists().where(RepoPermission.repo_id == RepoRow.id, RepoPermission.user_id == user_id)
        return (RepoRow.private == false()) | granted
    return RepoRow.private == false()


def visibility_clause(actor: Actor) -> ColumnElement[bool]:
    """SQL condition on RepoRow: the repositories `actor` may read (the one visibility rule)."""
    return _visibility(_scope(actor), actor.user_id)


_GET_STATEMENTS = {
    scope: select(*RepoRow.__table__.columns).where(
        RepoRow.name == bindparam("name"), _visibility(scope, bindparam("user_id", type_=Integer))
    )
    for scope in ("all", "user", "public")
}


class Catalog:
    """Lookups and listings of the repos table, always through the visibility rule."""

    def __init__(self, db: Database, mirror_root: Path) -> None:
        self.db = db
        self.mirror_root = mirror_root

    def mirror_path(self, name: str) -> Path:
        return self.mirror_root / f"{name}.git"

    def to_repo(self, row: RepoRow | Row[Any]) -> Repo:
        """The Repo of an ORM row or of a Core row of the repos table (same attribute names)."""
        return Repo(
            id=row.id,
            name=row.name,
            description=row.description,
            default_branch=row.default_branch,
            private=row.private,
            fork=row.fork,
            archived=row.archived,
            stars=row.stars,
            clone_url=row.clone_url,
            mirror_path=self.mirror_path(row.name),
            sync_state=row.sync_state,
            last_error=row.last_error,
            last_fetched_at=row.last_fetched_at,
            size_bytes=row.size_bytes,
            extra_branches=tuple(b for b in row.extra_branches.split("\n") if b),
            kind=row.kind,
            source=row.source,
            sync_interval_seconds=row.sync_interval_seconds,
            next_sync_at=row.next_sync_at,
            failures=row.failures,
        )

    def list_repos(self, actor: Actor, query: str, limit: int) -> RepoPage:
        """Readable repositories whose name contains `query` (case-insensitive), by name, at most `limit`."""
        if not 1 <= limit <= LIST_REPOS_MAX:
            raise InvalidInput(f"limit must be between 1 and {LIST_REPOS_MAX} (got {limit})", hint="the default is 50")
        if "\x00" in query:
            raise InvalidInput("query contains a NUL byte", hint="pass a substring of repository names")
        if len(query) > MAX_NAME_CHARS:
            # Also keeps SQLite's LIKE under its pattern limit (50,000 bytes: "pattern too complex").
            raise InvalidInput(
                f"query is {len(query)} characters long; repository names have at most {MAX_NAME_CHARS}",
                hint="pass a substring of repository names, e.g. org/api",
            )
        statement = select(RepoRow).where(visibility_clause(actor))
        if query:
            escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            statement = statement.where(RepoRow.name.ilike(f"%{escaped}%", escape="\\"))
        with self.db.session() as session:
            rows = session.scalars(statement.order_by(RepoRow.name).limit(limit + 1)).all()
            repos = [self.to_repo(row) for row in rows]
        return RepoPage(repos[:limit], has_more=len(repos) > limit)

    def get(self, actor: Actor, name: str) -> Repo:
        """The repository called `name`; NotFound (with a suggestion when one fits) otherwise."""
        # Prebuilt Core statements: this lookup runs on every read_file/list_files call, and building and
        # hashing a fresh ORM statement each time cost more than reading the blob.
        with self.db.engine.connect() as connection:
            row = connection.execute(_GET_STATEMENTS[_scope(actor)], {"name": name, "user_id": actor.user_id}).first()
        if row is None:
            raise self.not_found(actor, name)
        return self.to_repo(row)

    def not_found(self, actor: Actor, name: str) -> NotFound:
        """The error for a name that is not (readable) there, saying "did you mean X?" when one X fits."""
        suggestion = self.suggest(actor, name)
        if suggestion is None:
            return NotFound(f"repository {name!r} not found", hint=NOT_FOUND_HINT)
        return NotFound(
            f"repository {name!r} not found; did you mean {suggestion}?",
            hint=f'pass the full name, e.g. "repo": "{suggestion}" (list_repos shows the names)',
        )

    def suggest(self, actor: Actor, name: str) -> str | None:
        """The one readable repository `name` probably means: same name in another case, or `.../<name>`.

        Agents guess short names (`click` for `local/click`). Only a single candidate is offered (two
        would be a guess), and only among repositories the actor may read, so the suggestion reveals
        nothing the actor could not list anyway.
        """
        wanted = name.strip().strip("/").lower()
        if not wanted or "\x00" in wanted or len(wanted) > MAX_NAME_CHARS:
            return None
        lowered = func.lower(RepoRow.name)
        statement = (
            select(RepoRow.name)
            .where(
                visibility_clause(actor),
                or_(lowered == wanted, lowered.endswith(f"/{wanted}", autoescape=True)),
            )
            .order_by(RepoRow.name)
            .limit(2)
        )
        with self.db.session() as session:
            names = list(session.scalars(statement))
        return names[0] if len(names) == 1 else None

    def readable(self, actor: Actor) -> list[Repo]:
        """Every repository the actor may read, by name."""
        with self.db.session() as session:
            rows = session.scalars(select(RepoRow).where(visibility_clause(actor)).order_by(RepoRow.name))
            return [self.to_repo(row) for row in rows]

    def readable_ids(self, actor: Actor) -> frozenset[int]:
        """IDs of every repository the actor may read."""
        with self.db.session() as session:
            return frozenset(session.scalars(select(RepoRow.id).where(visibility_clause(actor))))

    def readable_refs(self, actor: Actor) -> list[RepoRef]:
        """Every repository the actor may read, as id, name, default branch and mirror path, by name.

        Three columns on purpose: building full `Repo` objects costs about 200 ms for 1,000 repositories,
        which would dominate every history query.
        """
        query = (
            select(RepoRow.id, RepoRow.name, RepoRow.default_branch)
            .where(visibility_clause(actor))
            .order_by(RepoRow.name)
        )
        with self.db.session() as session:
            rows = session.execute(query).all()
        return [RepoRef(rid, name, branch, self.mirror_path(name)) for rid, name, branch in rows]
