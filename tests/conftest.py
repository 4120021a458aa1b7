"""Shared fixtures: a fresh runtime per test on SQLite (default) or PostgreSQL.

Set CODEWELL_TEST_DATABASE_URL (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test) to run the whole
suite against PostgreSQL; each xdist worker then uses its own database, created next to the given one.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from argon2 import profiles
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.pool import NullPool
from starlette.testclient import TestClient

from codewell.accounts.passwords import use_hash_parameters
from codewell.app import create_app
from codewell.capabilities import CAPABILITIES
from codewell.core.settings import Settings
from codewell.db import Base, Database
from codewell.db.database import import_all_models, normalize_url
from codewell.runtime import Runtime

POSTGRES_URL = os.environ.get("CODEWELL_TEST_DATABASE_URL", "")
TESTS = Path(__file__).parent
# Folders (tests/unit/<name>/, tests/functional/<name>/) whose every test exercises the database: their tests carry
# the `database` marker without a `pytestmark` line, so a new module there is in the PostgreSQL pass from its
# first run (the jobs queue: claims, leases, locking).
DATABASE_FOLDERS = frozenset({"jobs"})


@pytest.hookimpl(tryfirst=True)  # before the marker plugin's own hook applies `-m`
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `database` every test under a folder of DATABASE_FOLDERS (see CONTRIBUTING.md, "Tests")."""
    for item in items:
        if item.path.is_relative_to(TESTS):
            folders = item.path.relative_to(TESTS).parts[1:-1]
            if folders and folders[0] in DATABASE_FOLDERS:
                item.add_marker(pytest.mark.database)
    # The longest tests first (`slow`, longest declared first), so that with xdist's work stealing
    # (`--dist worksteal` in ./scripts/test) no worker starts a ten-minute test while the others run out of work:
    # the suite ends when its longest test could, not a long test's length after the rest.
    items.sort(key=_slowness)


def _slowness(item: pytest.Item) -> int:
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0
    return -int(marker.kwargs.get("minutes", 1))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """With CODEWELL_TEST_PROFILE=<file>, append each test's wall and CPU seconds (its own process, and the
    children it reaped: servers it started and waited for) as a JSON line: where the suite's time goes."""
    target = os.environ.get("CODEWELL_TEST_PROFILE")
    if not target:
        yield
        return
    start = time.monotonic()
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    yield
    own_after, children_after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    record = {
        "test": item.nodeid,
        "wall": round(time.monotonic() - start, 3),
        "cpu": round(own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime, 3),
        "children_cpu": round(
            children_after.ru_utime + children_after.ru_stime - children.ru_utime - children.ru_stime, 3
        ),
        "load": round(os.getloadavg()[0], 2),
    }
    with open(target, "a") as out:
        out.write(json.dumps(record) + "\n")


def _worker_database_url() -> str:
    """Create (fresh) a database for this pytest process on the PostgreSQL server and return its URL."""
    base = make_url(normalize_url(POSTGRES_URL))
    # Also set without xdist (-p no:xdist), where the worker_id fixture does not exist.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
    # The run's id in the name: two runs on one server at once (people sharing a machine) must not drop each
    # other's database mid-test.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    name = f"{base.database}_cw_{worker}_{run[:8]}"
    with _admin_engine().connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    return base.set(database=name).render_as_string(hide_password=False)


def _admin_engine() -> Engine:
    return create_engine(make_url(normalize_url(POSTGRES_URL)), isolation_level="AUTOCOMMIT", poolclass=NullPool)


def _drop_database(url: str) -> None:
    with _admin_engine().connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))


class PostgresReset:
    """Empties the worker's PostgreSQL database between tests, as TRUNCATE ... RESTART IDENTITY would.

    TRUNCATE gives every table, index and TOAST table a new file: ~100 file creations per test, ~0.3 s on a
    slow disk. Here one query finds the tables that hold rows, only those are emptied with DELETE (children
    first), and only the sequences that were used are set back to their start; an untouched database costs
    one round trip.
    """

    def __init__(self, url: str) -> None:
        import_all_models()
        self.url = url
        self.engine = create_engine(url)
        tables = [table.name for table in Base.metadata.sorted_tables]
        self.children_first = list(reversed(tables))
        self.nonempty_query = text(
            " UNION ALL ".join(f"SELECT '{name}' WHERE EXISTS (SELECT 1 FROM \"{name}\")" for name in tables)
        )
        self.heads = self._applied()

    def _applied(self) -> frozenset[str]:
        try:
            with self.engine.connect() as connection:
                return frozenset(connection.scalars(text("SELECT version_num FROM alembic_version")))
        except ProgrammingError:  # no alembic_version table: downgraded below the first migration
            return frozenset()

    def __call__(self) -> None:
        # A test may have downgraded the shared database (migration tests): bring it back first.
        if self._applied() != self.heads:
            database = Database(self.url)
            database.upgrade()
            database.dispose()
        with self.engine.begin() as connection:
            nonempty = set(connection.scalars(self.nonempty_query))
            for name in self.children_first:
                if name in nonempty:
                    connection.execute(text(f'DELETE FROM "{name}"'))
            connection.execute(
                text(
                    "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false) "
                    "FROM pg_sequences WHERE schemaname = current_schema() AND last_value IS NOT NULL"
                )
            )

    def dispose(self) -> None:
        self.engine.dispose()


@pytest.fixture(scope="session")
def database_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated database: for SQLite a file copied per test, for PostgreSQL the worker's database."""
    if POSTGRES_URL:
        url = _worker_database_url()
        database = Database(url)
        database.upgrade()
        database.dispose()
        yield url
        _drop_database(url)
        return
    path = tmp_path_factory.mktemp("template") / "codewell.db"
    database = Database(f"sqlite:///{path}")
    database.upgrade()
    with database.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    database.dispose()
    yield str(path)


@pytest.fixture(scope="session")
def postgres_reset(database_template: str) -> Iterator[PostgresReset | None]:
    if not POSTGRES_URL:
        yield None
        return
    reset = PostgresReset(database_template)
    yield reset
    reset.dispose()


@pytest.fixture
def database_url(database_template: str, postgres_reset: PostgresReset | None, tmp_path: Path) -> str:
    """A migrated, empty database for one test."""
    if postgres_reset is not None:
        postgres_reset()
        return database_template
    target = tmp_path / "data" / "codewell.db"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(database_template, target)
    return f"sqlite:///{target}"


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashing() -> None:
    """argon2's cheapest parameters for every test: the default costs ~0.5 s per hash or verification on a slow
    machine and many tests sign in. What a test checks about passwords (match, mismatch, argon2id, one verification
    for unknown users) does not depend on the cost; a test that measures the cost asks for
    `production_password_hashing`."""
    use_hash_parameters(profiles.CHEAPEST)


@pytest.fixture
def production_password_hashing() -> Iterator[None]:
    """The service's real argon2 parameters for one test (timing tests)."""
    use_hash_parameters(profiles.get_default_parameters())
    yield
    use_hash_parameters(profiles.CHEAPEST)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data", database_url=database_url)


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    runtime = Runtime.open(settings)
    # The declared capabilities (tools, templates), as the composition roots hand them over; their setups
    # (listeners, background loops) run only when a test builds the app or calls `wire`.
    runtime.capabilities = CAPABILITIES
    yield runtime
    runtime.close()


@pytest.fixture
def client(runtime: Runtime) -> Iterator[TestClient]:
    """An in-process HTTP client for the whole app (no background loops)."""
    with TestClient(create_app(runtime, background=False)) as test_client:
        yield test_client
