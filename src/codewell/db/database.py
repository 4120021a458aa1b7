"""Engine and session handling for SQLite (embedded default) and PostgreSQL, plus migration control."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

import codewell
from codewell.core.errors import Unavailable
from codewell.db.base import Base, utcnow
from codewell.db.models import InstanceMeta

log = logging.getLogger(__name__)
MIGRATIONS_DIR = Path(__file__).parent / "migrations"


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


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


@dataclass(frozen=True, slots=True)
class MigrationState:
    current: frozenset[str]
    heads: frozenset[str]

    @property
    def pending(self) -> bool:
        return self.current != self.heads


class Database:
    """One engine and session factory; `session()` is a unit of work committed on success."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kwargs.update(pool_pre_ping=True, pool_size=10, max_overflow=20)
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed when the block ends normally, rolled back when it raises."""
        with self._sessions.begin() as session:
            yield session

    def check_connection(self) -> None:
        """Raise Unavailable with a clear, password-free message when the database cannot be reached."""
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1")
        except (OperationalError, SQLAlchemyError) as exc:
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            raise Unavailable(
                f"cannot connect to the database {redact(self.url)}: {reason}",
                hint="check CODEWELL_DATABASE_URL and that the database server is running",
            ) from None

    def _alembic_config(self) -> AlembicConfig:
        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["engine"] = self.engine
        return config

    def migration_state(self) -> MigrationState:
        script = ScriptDirectory.from_config(self._alembic_config())
        with self.engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_heads()
        heads = frozenset(script.get_heads())
        # A branch head that another branch `depends_on` (accounts_0001 under repos_0001) is applied but is
        # not kept in alembic_version: count it as current when an applied revision reaches it.
        applied = {rev.revision for rev in script.iterate_revisions(current, "base")} if current else set()
        return MigrationState(frozenset(current) | (heads & applied), heads)

    def upgrade(self) -> None:
        """Apply every pending migration on every branch, logging each one applied."""
        state = self.migration_state()
        command.upgrade(self._alembic_config(), "heads")
        self.created_at()  # a fresh database records its creation time now (the trial runs from it)
        if state.pending:
            log.info("database migrated", extra={"from": sorted(state.current), "to": sorted(state.heads)})

    def downgrade_all(self) -> None:
        command.downgrade(self._alembic_config(), "base")

    def instance_id(self) -> str:
        """The random ID of this instance, created with the database."""
        with self.session() as session:
            row = session.get(InstanceMeta, "instance_id")
            if row is None:
                row = InstanceMeta(key="instance_id", value=str(uuid.uuid4()))
                session.add(row)
            return row.value

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
