"""PostgreSQL connections are pinged only after sitting idle, and a dead one is replaced, not handed out.

Always on the PostgreSQL server the suite uses (127.0.0.1:5432): SQLite has no pool of network connections.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from codewell.db import database as db_module
from codewell.db.database import Database

POSTGRES = os.environ.get("CODEWELL_CLUSTER_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _backend_pid(db: Database) -> int:
    with db.engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _count_pings(db: Database) -> list[int]:
    calls: list[int] = []
    dialect = db.engine.dialect
    original = dialect.do_ping

    def counted(dbapi_connection: object) -> bool:
        calls.append(1)
        return bool(original(dbapi_connection))

    dialect.do_ping = counted  # type: ignore[method-assign]
    return calls


def test_a_connection_used_just_now_is_not_pinged_again() -> None:
    db = Database(POSTGRES)
    try:
        pings = _count_pings(db)
        first = _backend_pid(db)
        for _ in range(20):
            assert _backend_pid(db) == first  # the same pooled connection, every time
        assert pings == []
    finally:
        db.engine.dispose()


def test_an_idle_connection_killed_by_the_server_is_replaced_before_use(monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database(POSTGRES)
    admin = create_engine(POSTGRES, poolclass=NullPool)
    try:
        pings = _count_pings(db)
        dead = _backend_pid(db)
        with admin.connect() as connection:  # what a server restart or an idle-connection reaper does
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": dead})
        monkeypatch.setattr(db_module, "PING_IDLE_SECONDS", 0.0)  # the pooled connection counts as idle now
        alive = _backend_pid(db)  # no error reaches the caller
        assert alive != dead
        assert len(pings) >= 1
    finally:
        db.engine.dispose()
        admin.dispose()
