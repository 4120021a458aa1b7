"""Shared fixtures: a fresh runtime per test on SQLite (default) or PostgreSQL.

Set CODEWELL_TEST_DATABASE_URL (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test) to run the whole
suite against PostgreSQL; each xdist worker then uses its own database, created next to the given one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from codewell.core.settings import Settings
from codewell.db import Base, Database
from codewell.db.database import import_all_models, normalize_url
from codewell.runtime import Runtime
from codewell.web.app import create_app

POSTGRES_URL = os.environ.get("CODEWELL_TEST_DATABASE_URL", "")


def _worker_database_url(worker_id: str) -> str:
    """Create (fresh) a database for this xdist worker on the PostgreSQL server and return its URL."""
    base = make_url(normalize_url(POSTGRES_URL))
    name = f"{base.database}_cw_{worker_id}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def database_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated database: for SQLite a file copied per test, for PostgreSQL the worker's database."""
    if POSTGRES_URL:
        # Also set without xdist (-p no:xdist) where the worker_id fixture does not exist.
        url = _worker_database_url(os.environ.get("PYTEST_XDIST_WORKER", "master"))
        database = Database(url)
        database.upgrade()
        database.dispose()
        yield url
        return
    path = tmp_path_factory.mktemp("template") / "codewell.db"
    database = Database(f"sqlite:///{path}")
    database.upgrade()
    with database.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    database.dispose()
    yield str(path)


def _truncate_all(url: str) -> None:
    # A test may have downgraded the shared worker database (migration tests): bring it back first.
    database = Database(url)
    if database.migration_state().pending:
        database.upgrade()
    database.dispose()
    import_all_models()
    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture
def database_url(database_template: str, tmp_path: Path) -> str:
    """A migrated, empty database for one test."""
    if POSTGRES_URL:
        _truncate_all(database_template)
        return database_template
    target = tmp_path / "data" / "codewell.db"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(database_template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data", database_url=database_url)


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    runtime = Runtime.open(settings)
    yield runtime
    runtime.close()


@pytest.fixture
def client(runtime: Runtime) -> Iterator[TestClient]:
    """An in-process HTTP client for the whole app (no background loops)."""
    with TestClient(create_app(runtime, background=False)) as test_client:
        yield test_client
