"""Cache epochs: what lets a process keep access answers (a token's owner, the repositories a user reads, role
permissions) between requests and still never answer from a stale grant or a revoked token.

Every write that changes an access answer bumps a counter row of `cache_epochs` **in the same transaction**:
database triggers on the tables that decide access (accounts' users, tokens and roles: epoch `accounts`;
repos' repositories and grants: epoch `repos`; created by the migrations of the capability that owns each
table, with `trigger_statements`), so that no write path (ORM, Core, a cascade, a code host's bulk sync, the
CLI in another process) can forget it. A process caches an answer together with the epochs it read *before*
reading the answer, and uses it only while the epochs it reads at the start of a later request are the same.
That read is one scan of a two-row table (~0.03 ms on SQLite; ~0.1 ms on PostgreSQL, outside a transaction: one
round trip): a change committed before a request starts is seen by that request, in every process, on both
engines.

Why not PostgreSQL's LISTEN/NOTIFY: a notification reaches another process asynchronously (its listener thread
must be scheduled, and under the GIL that may take a switch interval of 5 ms), so a request arriving in that
window would still be answered from the revoked entry. A read per request closes the window for ~0.1 ms.

A bump on PostgreSQL is one statement-level trigger per statement (an upsert of the counter row, whose row lock
is held to the commit: writers of access data serialize on it, and they are rare and short); on SQLite, where
writers serialize anyway, a row-level one. A missing row (a fresh database, a test emptying the table) reads as
None, and a row created again starts from the clock in microseconds: a value never comes back.

Within one request (one `authz.scope`) the epochs are read once, on first need, and reused for at most
`REQUEST_REUSE_SECONDS` (a long MCP call reads them again).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Self

from codewell.db.models import CacheEpochRow

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from codewell.db.database import Database
    from codewell.runtime import Runtime

__all__ = [
    "ACCOUNTS",
    "REPOS",
    "CacheEpochRow",
    "CacheEpochs",
    "Epochs",
    "create_triggers",
    "drop_trigger_statements",
    "drop_triggers",
    "function_statements",
    "per_request",
    "trigger_statements",
]

ACCOUNTS = "accounts"
REPOS = "repos"
# A request that runs longer than this (an MCP call answering for minutes) reads the epochs again.
REQUEST_REUSE_SECONDS = 1.0
_READ = "SELECT name, version FROM cache_epochs"


@dataclass(frozen=True, slots=True)
class Epochs:
    """The counters as one process read them; None where the row does not exist (yet)."""

    accounts: int | None
    repos: int | None


@dataclass(slots=True)
class _RequestEpochs:
    read_at: float = 0.0
    value: Epochs | None = None


_request: ContextVar[_RequestEpochs | None] = ContextVar("codewell_request_epochs", default=None)


@contextmanager
def per_request() -> Iterator[None]:
    """Within the block (one request, one MCP call), `CacheEpochs.current` reads the database once. A nested
    block shares its outer block's read (the same request)."""
    if _request.get() is not None:
        yield
        return
    token = _request.set(_RequestEpochs())
    try:
        yield
    finally:
        _request.reset(token)


class CacheEpochs:
    """Reads the epochs (`runtime.get(CacheEpochs)`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Outside a transaction on PostgreSQL: a read in one costs three round trips (BEGIN, the SELECT, and the
        # pool's ROLLBACK on return), in autocommit one (~0.2 ms instead of ~0.4 on loopback, loaded). SQLite's
        # driver would pay more to switch its mode (~0.1 ms) than its read costs (~0.04 ms).
        self._engine = db.engine if db.is_sqlite else db.engine.execution_options(isolation_level="AUTOCOMMIT")

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime.db)

    def read(self) -> Epochs:
        """The epochs committed now (one query on the driver's cursor: no ORM, no result processing)."""
        with self._engine.connect() as connection:
            cursor = connection.connection.cursor()
            try:
                cursor.execute(_READ)
                rows: Sequence[Sequence[object]] = cursor.fetchall()
            finally:
                cursor.close()
        found = {str(name): int(str(version)) for name, version in rows}
        return Epochs(found.get(ACCOUNTS), found.get(REPOS))

    def current(self) -> Epochs:
        """The epochs for this request: read on first need within `per_request`, else now."""
        memo = _request.get()
        if memo is None:
            return self.read()
        now = time.monotonic()
        value = memo.value
        if value is None or now - memo.read_at > REQUEST_REUSE_SECONDS:
            value = self.read()
            memo.value, memo.read_at = value, now
        return value


# --- the triggers (used by the migrations of the capabilities that own the tables) ------------------------

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION codewell_bump_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cache_epochs (name, version)
    VALUES (TG_ARGV[0], (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
    ON CONFLICT (name) DO UPDATE SET version = cache_epochs.version + 1;
    RETURN NULL;
END
$$
"""
_SQLITE_BUMP = (
    "INSERT INTO cache_epochs (name, version) "
    "VALUES ('{epoch}', CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)) "
    "ON CONFLICT (name) DO UPDATE SET version = cache_epochs.version + 1"
)


def function_statements(dialect: str) -> list[str]:
    """The PostgreSQL trigger function (nothing on SQLite, whose triggers hold their statement)."""
    return [_PG_FUNCTION] if dialect == "postgresql" else []


def trigger_statements(dialect: str, table: str, epoch: str, update_of: Sequence[str] | None = None) -> list[str]:
    """DDL making every INSERT, DELETE and UPDATE of `table` (only of the columns `update_of`, when given: a
    bookkeeping column such as a token's last use must not empty every cache) bump `epoch` in its transaction."""
    update = "UPDATE" + (f" OF {', '.join(update_of)}" if update_of else "")
    if dialect == "postgresql":
        return [
            f"CREATE TRIGGER {table}_cache_epoch AFTER INSERT OR DELETE OR {update} ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION codewell_bump_epoch('{epoch}')"
        ]
    bump = _SQLITE_BUMP.format(epoch=epoch)
    return [
        f"CREATE TRIGGER {table}_cache_epoch_{event.split()[0].lower()} AFTER {event} ON {table} "
        f"FOR EACH ROW BEGIN {bump}; END"
        for event in ("INSERT", "DELETE", update)
    ]


def drop_trigger_statements(dialect: str, table: str) -> list[str]:
    if dialect == "postgresql":
        return [f"DROP TRIGGER IF EXISTS {table}_cache_epoch ON {table}"]
    return [f"DROP TRIGGER IF EXISTS {table}_cache_epoch_{event}" for event in ("insert", "delete", "update")]


class MigrationOps(Protocol):
    """What the trigger helpers use of a migration's `alembic.op`."""

    def get_bind(self) -> Connection: ...

    def execute(self, sqltext: str, /) -> None: ...


def create_triggers(op: MigrationOps, epoch: str, watched: Mapping[str, Sequence[str] | None]) -> None:
    """In a capability's migration: make every change of its `watched` tables (only of the listed columns, where
    given) bump `epoch`. The capability that owns the tables owns their triggers."""
    dialect = op.get_bind().dialect.name
    for table, columns in watched.items():
        for statement in trigger_statements(dialect, table, epoch, columns):
            op.execute(statement)


def drop_triggers(op: MigrationOps, watched: Mapping[str, Sequence[str] | None]) -> None:
    """The migration's downgrade: the triggers of `create_triggers` gone."""
    dialect = op.get_bind().dialect.name
    for table in watched:
        for statement in drop_trigger_statements(dialect, table):
            op.execute(statement)
