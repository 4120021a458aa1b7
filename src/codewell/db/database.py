"""Engine and session handling for SQLite (embedded default) and PostgreSQL, plus migration control.

Storage faults (docs/security.md, "Storage faults") end here as `StorageUnavailable`, whatever code runs the
statement: a write lock held past the busy timeout, a read-only, immutable or full disk, an I/O error. Every
engine raises it instead of the driver's error (`handle_error`), so a request answers 503 with Retry-After and a
job is retried later. Bookkeeping writes ask for a short lock wait (`session(lock_timeout=...)`) so that a read
never waits 30 s for them, and `probe_write` is the /readyz check that the database takes writes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib
import logging
import pkgutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DisconnectionError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

import codewell
from codewell.core.errors import StorageUnavailable, Unavailable
from codewell.core.storage import CachedProbe, FlagProbe, report
from codewell.db.base import Base, utcnow
from codewell.db.models import InstanceMeta

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

log = logging.getLogger(__name__)
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The instance_meta row holding `migrations_fingerprint()` as of the last upgrade.
MIGRATIONS_FINGERPRINT_KEY = "migrations_fingerprint"


def import_all_models() -> None:
    """Import every capability's models module so that Base.metadata knows all tables."""
    importlib.import_module("codewell.db.models")
    for info in pkgutil.iter_modules(codewell.__path__):
        if info.ispkg and (Path(codewell.__path__[0]) / info.name / "models.py").exists():
            importlib.import_module(f"codewell.{info.name}.models")


def normalize_url(url: str) -> str:
    """Accept postgres:// and postgresql:// URLs and use the psycopg 3 driver for them."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url.removeprefix(prefix)
    return url


def redact(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


# How long a statement waits for another connection's write lock before it fails as "database locked"
# (CODEWELL_DB_BUSY_TIMEOUT).
DEFAULT_BUSY_TIMEOUT = 30.0
# SQLite connections kept in the pool, and how many more may be open at once (closed when returned).
SQLITE_POOL_SIZE = 24
SQLITE_POOL_OVERFLOW = 40
# Bookkeeping writes (an access token's last_used_at, usage events) wait at most this long: losing one is
# harmless, holding the request that caused it for the busy timeout is not.
BEST_EFFORT_LOCK_TIMEOUT = 0.25
# The /readyz write probe waits at most this long (or the busy timeout, when shorter): a load balancer gives up
# on a probe after a few seconds, and a lock held that long is a fault worth reporting.
PROBE_LOCK_TIMEOUT = 5.0
PROBE_KEY = "readyz.write_probe"
_BEST_EFFORT = "codewell.best_effort"  # Connection.info key: the connection is in a `session(lock_timeout=...)`
_PROBE = text(
    "INSERT INTO instance_meta (key, value) VALUES (:key, :value) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)

# SQLite's primary result codes (sqlite3.Error.sqlite_errorname, extended codes start with them) that mean the
# storage, not the statement, failed: (cause, seconds after which a retry may work).
_SQLITE_FAULTS = {
    "SQLITE_BUSY": ("database locked", 5),
    "SQLITE_LOCKED": ("database locked", 5),
    "SQLITE_READONLY": ("database read-only", 30),
    "SQLITE_FULL": ("database disk full", 30),
    "SQLITE_IOERR": ("database I/O error", 30),
    "SQLITE_CANTOPEN": ("database cannot be opened", 30),
    "SQLITE_PERM": ("database read-only", 30),
}
# PostgreSQL SQLSTATEs of the same faults. Serialization failures and deadlocks (40001, 40P01) are not here:
# they are contention the caller retries at once (analytics' credits do).
_POSTGRES_FAULTS = {
    "55P03": ("database locked", 5),  # lock_not_available: lock_timeout ran out
    "25006": ("database read-only", 30),  # read_only_sql_transaction: a standby, or default_transaction_read_only
    "53100": ("database disk full", 30),
    "53200": ("database out of memory", 30),
    "58030": ("database I/O error", 30),
}


# SQLITE_BUSY_SNAPSHOT is contention, not a fault: a transaction that read, then wanted to write after another
# connection had committed, fails at once (no busy wait) and its caller retries it (analytics' credits do).
_SQLITE_CONTENTION = frozenset({"SQLITE_BUSY_SNAPSHOT"})


def storage_fault(error: BaseException) -> StorageUnavailable | None:
    """The StorageUnavailable a driver error stands for, or None when the statement itself is at fault."""
    name = getattr(error, "sqlite_errorname", None)
    if isinstance(name, str):
        if name in _SQLITE_CONTENTION:
            return None
        for prefix, (cause, retry_after) in _SQLITE_FAULTS.items():
            if name == prefix or name.startswith(prefix + "_"):
                return StorageUnavailable(cause, str(error), retry_after=retry_after)
        return None
    state = getattr(error, "sqlstate", None)
    if isinstance(state, str) and state in _POSTGRES_FAULTS:
        cause, retry_after = _POSTGRES_FAULTS[state]
        return StorageUnavailable(cause, str(error).strip().splitlines()[0], retry_after=retry_after)
    return None


def _translate(context: ExceptionContext) -> None:
    if context.is_pre_ping:  # the pool's own liveness check decides about reconnecting; leave it alone
        return
    fault = storage_fault(context.original_exception)
    if fault is not None:
        # A best-effort write that gave up its short lock wait is expected under load, not a fault to log; its
        # caller decides. Every other storage fault is logged here, once per cause and minute.
        best_effort = context.connection is not None and context.connection.info.get(_BEST_EFFORT, False)
        if not (best_effort and fault.cause == "database locked"):
            report(fault)
        raise fault from context.original_exception


# A pooled PostgreSQL connection idle longer than this is pinged before use (`Database._ping_if_idle`).
PING_IDLE_SECONDS = 1.0
_LAST_USED = "codewell_last_used"


def _mark_used(_dbapi_connection: Any, record: Any, *_args: Any) -> None:
    record.info[_LAST_USED] = time.monotonic()


@dataclass(frozen=True, slots=True)
class MigrationState:
    current: frozenset[str]
    heads: frozenset[str]

    @property
    def pending(self) -> bool:
        return self.current != self.heads


@functools.cache
def migrations_fingerprint() -> str:
    """SHA-256 of this release's migration scripts (names and contents): equal fingerprints, same schema."""
    digest = hashlib.sha256()
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class Database:
    """One engine and session factory; `session()` is a unit of work committed on success."""

    def __init__(self, url: str, *, echo: bool = False, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self.busy_timeout = busy_timeout
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout}
            # SQLAlchemy's default for a file is 5 kept + 10 overflow: with the request threads (40) and the job
            # threads using it at once, every checkout past the fifth opened a connection (file open, 4 PRAGMAs,
            # the schema parsed again at its first statement) and closed it at checkin: ~6 % of a loaded MCP
            # call's request-thread time (py-spy, bench/mcp_bench.py). An idle SQLite connection costs a
            # descriptor and its page cache, so enough are kept for the threads that use them at once.
            kwargs.update(pool_size=SQLITE_POOL_SIZE, max_overflow=SQLITE_POOL_OVERFLOW)
        else:
            kwargs.update(pool_size=10, max_overflow=20)
        self.engine: Engine = create_engine(self.url, **kwargs)
        if not self.is_sqlite:
            # A liveness ping only for connections idle a while (`_ping_if_idle`), not SQLAlchemy's pre-ping on
            # every checkout: that round trip was ~0.2 ms of each of a request's two or three checkouts.
            event.listen(self.engine, "connect", _mark_used)
            event.listen(self.engine, "checkin", _mark_used)
            event.listen(self.engine, "checkout", self._ping_if_idle)
        # SQLite maps the WAL index `<db>-shm` into memory, shared, and writes to it even to read; once that
        # file is immutable (chattr +i) the kernel answers such a write with SIGBUS and the process dies with
        # nothing in its log. Every use of a connection therefore checks the flag first (stat+ioctl through a
        # descriptor kept open: closing one would drop SQLite's own locks on the file, see `FlagProbe`).
        # An immutable database or WAL file needs no such care: writes to them fail with an error.
        database = make_url(self.url).database if self.is_sqlite else None
        self._files: tuple[FlagProbe, ...] = ()
        if database and database != ":memory:" and not database.startswith("file:"):
            path = Path(database).absolute()
            self._files = (FlagProbe(path.with_name(path.name + "-shm")),)
        # Connections the pool wanted to close while their files were immutable (see `_close`).
        self._held: list[Any] = []
        self._held_lock = threading.Lock()
        if self.is_sqlite:
            event.listen(self.engine, "connect", self._sqlite_connect)
            event.listen(self.engine, "checkout", self._sqlite_checkout)
            self._driver_close = self.engine.dialect.do_close
            setattr(self.engine.dialect, "do_close", self._close)  # noqa: B010 - this engine's dialect only
        event.listen(self.engine, "handle_error", _translate)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._probe = CachedProbe(self._probe_write)

    def _ping_if_idle(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        """Check a pooled connection that sat idle past PING_IDLE_SECONDS (the server may have restarted or
        dropped it meanwhile); one that fails is replaced by a fresh one (the pool retries on DisconnectionError).
        A connection used within the last second has just been seen working."""
        if time.monotonic() - record.info.get(_LAST_USED, 0.0) < PING_IDLE_SECONDS:
            return
        try:
            alive = self.engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # any failure of the ping means a dead connection
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc
        if not alive:
            raise DisconnectionError("pooled connection failed its ping")
        record.info[_LAST_USED] = time.monotonic()

    def _immutable_file(self) -> Path | None:
        return next((probe.path for probe in self._files if probe()), None)

    def _guard_files(self) -> None:
        path = self._immutable_file()
        if path is not None:
            fault = StorageUnavailable(
                "database read-only", f"{path.name} is immutable (chattr +i); lift it to resume", retry_after=30
            )
            report(fault)
            raise fault
        if self._held:
            self._release_held()

    def _close(self, dbapi_connection: Any) -> None:
        """The dialect's close, except while the files are immutable: closing a WAL connection checkpoints
        through the -shm mapping, which the kernel answers with SIGBUS. Such a connection is held (never freed,
        so that no garbage collection closes it either) and closed once the flag is lifted."""
        if self._immutable_file() is None:
            self._driver_close(dbapi_connection)
            return
        with self._held_lock:
            self._held.append(dbapi_connection)
        # A reference nothing releases: the connection's deallocation would close it, and so does the
        # interpreter's exit; `_release_held` closes it explicitly (a second close is a no-op).
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(dbapi_connection))

    def _release_held(self) -> None:
        with self._held_lock:
            held, self._held = self._held, []
        for connection in held:
            with contextlib.suppress(Exception):
                self._driver_close(connection)

    def _sqlite_connect(self, dbapi_connection: Any, _record: Any) -> None:
        self._guard_files()  # before the first statement maps -shm
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={round(self.busy_timeout * 1000)}")
        cursor.close()

    def _sqlite_checkout(self, _dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        self._guard_files()

    @contextmanager
    def session(self, *, lock_timeout: float | None = None) -> Iterator[Session]:
        """A transaction: committed when the block ends normally, rolled back when it raises.

        `lock_timeout` (seconds) shortens the wait for another connection's write lock in this transaction
        only, for best-effort writes: past it the block raises StorageUnavailable("database locked").
        """
        if lock_timeout is None:
            with self._sessions.begin() as session:
                yield session
            return
        wait_ms = max(1, round(min(lock_timeout, self.busy_timeout) * 1000))
        with self.engine.connect() as connection:
            connection.info[_BEST_EFFORT] = True
            if self.is_sqlite:
                # On the driver's connection, outside any transaction; set back before the pool takes it back.
                connection.connection.driver_connection.execute(f"PRAGMA busy_timeout={wait_ms}")  # type: ignore[union-attr]
            try:
                with Session(bind=connection, expire_on_commit=False) as session, session.begin():
                    if not self.is_sqlite:
                        session.execute(text(f"SET LOCAL lock_timeout = {wait_ms}"))
                    yield session
            finally:
                connection.info.pop(_BEST_EFFORT, None)
                if self.is_sqlite:
                    restore = f"PRAGMA busy_timeout={round(self.busy_timeout * 1000)}"
                    try:
                        connection.connection.driver_connection.execute(restore)  # type: ignore[union-attr]
                    except Exception:
                        # Never hand the pool a connection that gives up on locks early: drop it instead.
                        connection.invalidate()

    def probe_write(self) -> str | None:
        """Whether the database takes a write now: None, or what is wrong. One upsert of one row of
        `instance_meta`, committed (a full disk shows only at commit), at most every couple of seconds."""
        return self._probe()

    def _probe_write(self) -> str | None:
        try:
            with self.session(lock_timeout=PROBE_LOCK_TIMEOUT) as session:
                session.execute(_PROBE, {"key": PROBE_KEY, "value": utcnow().isoformat()})
        except StorageUnavailable as exc:
            return exc.message
        except SQLAlchemyError as exc:
            return "database write failed: " + str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        return None

    def check_connection(self) -> None:
        """Raise Unavailable with a clear, password-free message when the database cannot be reached."""
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1")
        except StorageUnavailable as exc:
            if exc.cause != "database cannot be opened":
                raise  # reached, but locked, read-only or full: the fault says so
            raise Unavailable(
                f"cannot connect to the database {redact(self.url)}: {exc.message}",
                hint="check CODEWELL_DATABASE_URL and that its directory exists and is writable",
            ) from None
        except (OperationalError, SQLAlchemyError) as exc:
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            raise Unavailable(
                f"cannot connect to the database {redact(self.url)}: {reason}",
                hint="check CODEWELL_DATABASE_URL and that the database server is running",
            ) from None

    def _alembic_config(self) -> AlembicConfig:
        # alembic (and mako, and pygments through it) is imported only to migrate or to tell what is pending:
        # a process whose database is current never loads it (`schema_current`).
        from alembic.config import Config as AlembicConfig  # noqa: PLC0415

        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["engine"] = self.engine
        return config

    def migration_state(self) -> MigrationState:
        """Applied and latest revisions, as alembic reads them from the database and the migration scripts."""
        from alembic.runtime.migration import MigrationContext  # noqa: PLC0415 - see _alembic_config
        from alembic.script import ScriptDirectory  # noqa: PLC0415

        script = ScriptDirectory.from_config(self._alembic_config())
        with self.engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_heads()
        heads = frozenset(script.get_heads())
        # A branch head that another branch `depends_on` (accounts_0001 under repos_0001) is applied but is
        # not kept in alembic_version: count it as current when an applied revision reaches it.
        applied = {rev.revision for rev in script.iterate_revisions(current, "base")} if current else set()
        return MigrationState(frozenset(current) | (heads & applied), heads)

    def schema_current(self) -> bool:
        """Whether no migration is pending, as every process start and readiness check asks.

        The usual answer comes from one row: the fingerprint of the migration scripts that the last `upgrade`
        recorded, equal to this release's. Only when it differs or is missing (an older release migrated, a
        new script arrived, a database made before the row existed) does alembic decide: importing it and
        parsing every script cost each `codewell` process ~15 % of its start-up CPU.
        """
        try:
            with self.engine.connect() as connection:
                recorded = connection.scalar(
                    select(InstanceMeta.value).where(InstanceMeta.key == MIGRATIONS_FINGERPRINT_KEY)
                )
        except (SQLAlchemyError, StorageUnavailable):  # no such table yet, or any doubt: alembic answers
            recorded = None
        if recorded is not None and recorded == migrations_fingerprint():
            return True
        return not self.migration_state().pending

    def upgrade(self) -> None:
        """Apply every pending migration on every branch, logging each one applied."""
        from alembic import command  # noqa: PLC0415 - see _alembic_config

        state = self.migration_state()
        command.upgrade(self._alembic_config(), "heads")
        self.created_at()  # a fresh database records its creation time now (the trial runs from it)
        self._record_fingerprint(migrations_fingerprint())
        if state.pending:
            log.info("database migrated", extra={"from": sorted(state.current), "to": sorted(state.heads)})

    def _record_fingerprint(self, value: str | None) -> None:
        """Record (or, with None, forget) which migration scripts the schema matches (`schema_current`)."""
        with self.session() as session:
            row = session.get(InstanceMeta, MIGRATIONS_FINGERPRINT_KEY)
            if value is None:
                if row is not None:
                    session.delete(row)
            elif row is None:
                session.add(InstanceMeta(key=MIGRATIONS_FINGERPRINT_KEY, value=value))
            else:
                row.value = value

    def downgrade_all(self) -> None:
        from alembic import command  # noqa: PLC0415 - see _alembic_config

        with contextlib.suppress(SQLAlchemyError, StorageUnavailable):  # a schema without the table
            self._record_fingerprint(None)
        command.downgrade(self._alembic_config(), "base")

    def instance_id(self) -> str:
        """The random ID of this instance, created with the database. Concurrent first calls (two web replicas
        starting at once) agree: the loser of the insert re-reads."""
        for _ in range(2):
            try:
                with self.session() as session:
                    row = session.get(InstanceMeta, "instance_id")
                    if row is None:
                        row = InstanceMeta(key="instance_id", value=str(uuid.uuid4()))
                        session.add(row)
                    return row.value
            except IntegrityError:
                continue
        raise Unavailable("cannot record the instance's ID", hint="retry")

    def created_at(self) -> datetime:
        """When this database was created (recorded by the first `upgrade`, or by the first call on a database
        made before it was recorded); UTC. Concurrent first calls agree: the loser of the insert re-reads."""
        for _ in range(2):
            try:
                with self.session() as session:
                    row = session.get(InstanceMeta, "created_at")
                    if row is None:
                        row = InstanceMeta(key="created_at", value=utcnow().isoformat())
                        session.add(row)
                    return datetime.fromisoformat(row.value)
            except IntegrityError:
                continue
        raise Unavailable("cannot record the database's creation time", hint="retry")

    def table_names(self) -> list[str]:
        import_all_models()
        return [table.name for table in Base.metadata.sorted_tables]

    def has_rows(self, model: Any) -> bool:
        with self.session() as session:
            return session.scalar(select(model).limit(1)) is not None

    def dispose(self) -> None:
        self.engine.dispose()
        checked_out = getattr(self.engine.pool, "checkedout", lambda: 0)()
        if checked_out == 0:  # every connection closed, their locks with them; else one descriptor stays open
            for probe in self._files:
                probe.close()
