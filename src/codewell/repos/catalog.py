"""The catalog of registered repositories as an actor sees them: the one visibility rule and every lookup.

Site admins and INTERNAL read everything, users read public repositories and private ones granted to them,
anonymous visitors read public repositories only. A repository the actor may not read raises `NotFound`
exactly like a missing one; the "did you mean" suggestion of a failed lookup is chosen among the
repositories the actor may read, so it never reveals another one.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Integer,
    Select,
    String,
    bindparam,
    exists,
    false,
    func,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.engine import Engine, Row
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from codewell.authz import Action, allowed
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.db import Database
from codewell.db.epochs import CacheEpochs, Epochs
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


# Prebuilt Core statements, one per scope: these run on every request (visibility of search, lookups of
# read_file/list_files), and building and hashing a fresh ORM statement each time cost more than the query.
_SCOPES = ("all", "user", "public")
_USER_ID = bindparam("user_id", type_=Integer)


def _visibility_bulk(scope: str) -> ColumnElement[bool]:
    """`_visibility` for listings of every readable repository: the user's granted ids as one set (a hashed
    subplan on PostgreSQL, an ephemeral index on SQLite) instead of one grant probe per private repository
    (6,000 of 10,000 by name: ~8 ms instead of ~12 ms on PostgreSQL). Lookups and pages keep the EXISTS
    form, which stops probing when the page is full."""
    if scope != "user":
        return _visibility(scope, None)
    granted = select(RepoPermission.repo_id).where(RepoPermission.user_id == _USER_ID)
    return (RepoRow.private == false()) | RepoRow.id.in_(granted)


def visibility_clause(actor: Actor) -> ColumnElement[bool]:
    """SQL condition on RepoRow: the repositories `actor` may read (the one visibility rule)."""
    return _visibility(_scope(actor), actor.user_id)


def _ids_statement(scope: str) -> Select[int] | CompoundSelect[int]:
    """The ids `scope` may read, index-only on both engines (ix_repos_private, ix_repo_permissions_user_repo).

    The same rule as `_visibility`, written as public ids UNION ALL granted ids rather than a correlated
    EXISTS per repository: the EXISTS form probes the grants once per private repository (~5 ms at 10,000
    on SQLite), the union reads two index ranges (~1.5 ms). A grant on a public repository repeats its id;
    the caller's set removes it (cheaper than UNION's sort). Foreign keys (enforced on SQLite too) keep
    grants of removed repositories out.
    """
    if scope == "all":
        return select(RepoRow.id)
    public = select(RepoRow.id).where(RepoRow.private == false())
    if scope == "public":
        return public
    granted = select(RepoPermission.repo_id).where(RepoPermission.user_id == _USER_ID)
    return union_all(public, granted)


_GET_STATEMENTS = {
    scope: select(*RepoRow.__table__.columns).where(RepoRow.name == bindparam("name"), _visibility(scope, _USER_ID))
    for scope in _SCOPES
}
_IDS_STATEMENTS = {scope: _ids_statement(scope) for scope in _SCOPES}
_REFS_STATEMENTS = {
    scope: select(RepoRow.id, RepoRow.name, RepoRow.default_branch)
    .where(_visibility_bulk(scope))
    .order_by(RepoRow.name)
    for scope in _SCOPES
}
_ALL_STATEMENTS = {
    scope: select(*RepoRow.__table__.columns).where(_visibility_bulk(scope)).order_by(RepoRow.name) for scope in _SCOPES
}
# Pages in name order (keyset: `name > :after` walks the unique name index from where the last page ended).
_PAGE_STATEMENTS = {
    scope: select(*RepoRow.__table__.columns)
    .where(_visibility(scope, _USER_ID), RepoRow.name > bindparam("after", type_=String))
    .order_by(RepoRow.name)
    .limit(bindparam("limit", type_=Integer))
    for scope in _SCOPES
}
_LIST_STATEMENTS = {
    (scope, filtered): select(*RepoRow.__table__.columns)
    .where(
        _visibility(scope, _USER_ID),
        RepoRow.name.ilike(bindparam("pattern", type_=String), escape="\\") if filtered else true(),
    )
    .order_by(RepoRow.name)
    .limit(bindparam("limit", type_=Integer))
    for scope in _SCOPES
    for filtered in (False, True)
}
_REFS_OF_STATEMENTS = {
    scope: select(RepoRow.id, RepoRow.name, RepoRow.default_branch).where(
        _visibility(scope, _USER_ID), RepoRow.id.in_(bindparam("ids", expanding=True))
    )
    for scope in _SCOPES
}


class _DriverQuery:
    """A prebuilt statement compiled once for the engine's dialect and run on the driver's cursor.

    For the listings of thousands of rows (`readable_ids`, `readable_refs`), where SQLAlchemy's result rows
    cost more than the query (6,000 ids: ~5 ms through `Connection.execute`, ~1.8 ms from the cursor on
    SQLite). The SQL is still SQLAlchemy's, rendered for the dialect; values are plain (integers, strings,
    NULL: no result processing to skip); the pool still owns the connection (rolled back on return).
    """

    def __init__(self, engine: Engine, statement: ClauseElement) -> None:
        self.engine = engine
        compiled = statement.compile(dialect=engine.dialect)
        assert isinstance(compiled, SQLCompiler)  # a SELECT compiles to SQL
        self.compiled = compiled
        self.sql = str(self.compiled)

    def rows(self, values: dict[str, object]) -> Sequence[Sequence[Any]]:
        params = self.compiled.construct_params(values)
        names = self.compiled.positiontup  # None for named parameter styles (psycopg)
        bound: Sequence[object] | Mapping[str, object] = params if names is None else [params[n] for n in names]
        with self.engine.connect() as connection:
            cursor = connection.connection.cursor()
            try:
                cursor.execute(self.sql, bound)
                return cursor.fetchall()
            finally:
                cursor.close()


# Readable-id sets remembered per process, by (scope, user): past this many, start over.
READABLE_CACHE_ENTRIES = 4_096


class Catalog:
    """Lookups and listings of the repos table, always through the visibility rule."""

    def __init__(self, db: Database, mirror_root: Path) -> None:
        self.db = db
        self.mirror_root = mirror_root
        self.epochs = CacheEpochs(db)
        # (scope, user id) → (the epochs read before the ids, the ids): see `readable_ids`.
        self._readable: dict[tuple[str, int | None], tuple[Epochs, frozenset[int]]] = {}
        self._readable_lock = threading.Lock()
        # Listings outside a transaction on PostgreSQL: one round trip instead of three (BEGIN, the SELECT, the
        # pool's ROLLBACK on return); SQLite's driver would pay more to switch its mode than that saves.
        reading = db.engine if db.is_sqlite else db.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._ids = {scope: _DriverQuery(reading, statement) for scope, statement in _IDS_STATEMENTS.items()}
        self._refs = {scope: _DriverQuery(reading, statement) for scope, statement in _REFS_STATEMENTS.items()}

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
        escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params = {"user_id": actor.user_id, "pattern": f"%{escaped}%", "limit": limit + 1}
        # One page in name order through the unique name index, stopping after limit + 1 readable rows.
        with self.db.engine.connect() as connection:
            rows = connection.execute(_LIST_STATEMENTS[_scope(actor), bool(query)], params).all()
        repos = [self.to_repo(row) for row in rows]
        return RepoPage(repos[:limit], has_more=len(repos) > limit)

    def get(self, actor: Actor, name: str) -> Repo:
        """The repository called `name`; NotFound (with a suggestion when one fits) otherwise."""
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
        """Every repository the actor may read, by name (full records: for background and admin work; a
        request wants `readable_ids`, `readable_refs` or `iter_readable`)."""
        with self.db.engine.connect() as connection:
            rows = connection.execute(_ALL_STATEMENTS[_scope(actor)], {"user_id": actor.user_id}).all()
        return [self.to_repo(row) for row in rows]

    def iter_readable(self, actor: Actor, page_size: int = 100) -> Iterator[Repo]:
        """The repositories the actor may read, by name, fetched a page at a time: a caller that stops after
        a few pays for those pages only (no connection is held between pages)."""
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        after = ""  # names are never empty (sources.check_name): `name > ''` starts at the first one
        while True:
            with self.db.engine.connect() as connection:
                params = {"user_id": actor.user_id, "after": after, "limit": page_size}
                rows = connection.execute(_PAGE_STATEMENTS[_scope(actor)], params).all()
            yield from (self.to_repo(row) for row in rows)
            if len(rows) < page_size:
                return
            after = rows[-1].name

    def readable_ids(self, actor: Actor) -> frozenset[int]:
        """IDs of every repository the actor may read: one index-only query, no row objects, remembered per
        process while the cache epochs stay the same (every repository added or removed, made private or
        public, and every grant or user change bumps one in its transaction, in any process: db/epochs.py).
        Both epochs: a user id that SQLite gives again after a deletion must not find the old user's set."""
        scope = _scope(actor)
        key = (scope, actor.user_id if scope == "user" else None)
        epochs = self.epochs.current()  # before the ids: an entry is never newer than the epochs it is filed under
        with self._readable_lock:
            entry = self._readable.get(key)
        if entry is not None and entry[0] == epochs:
            return entry[1]
        ids = frozenset(map(itemgetter(0), self._ids[scope].rows({"user_id": actor.user_id})))
        with self._readable_lock:
            if len(self._readable) >= READABLE_CACHE_ENTRIES:
                self._readable.clear()
            self._readable[key] = (epochs, ids)
        return ids

    def readable_refs(self, actor: Actor) -> list[RepoRef]:
        """Every repository the actor may read, as id, name, default branch and mirror path, by name.

        Three columns into named tuples whose mirror path is built on demand: full `Repo` objects cost
        ~40 µs each (200 ms for 5,000 repositories), which would dominate every history query.
        """
        root = self.mirror_root
        return [
            RepoRef(rid, name, branch, root)
            for rid, name, branch in self._refs[_scope(actor)].rows({"user_id": actor.user_id})
        ]

    def refs_of(self, actor: Actor, ids: Collection[int]) -> dict[int, RepoRef]:
        """The repositories among `ids` the actor may read, by id (for the few ids a query's rows name)."""
        if not ids:
            return {}
        root = self.mirror_root
        with self.db.engine.connect() as connection:
            rows = connection.execute(
                _REFS_OF_STATEMENTS[_scope(actor)], {"user_id": actor.user_id, "ids": list(ids)}
            ).all()
        return {rid: RepoRef(rid, name, branch, root) for rid, name, branch in rows}
