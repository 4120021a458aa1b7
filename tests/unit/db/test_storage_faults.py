"""The database layer under real storage faults (docs/security.md, "Storage faults"): a write lock held by another
process past the busy timeout, best-effort writes that give up early, an immutable data directory (which kills a
plain SQLite reader with SIGBUS), a full disk."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from codewell.core.errors import StorageUnavailable
from codewell.db import Database
from codewell.db.database import storage_fault
from tests.storage_faults import fill, tmpfs, write_lock_held


def _database(directory: Path, busy_timeout: float) -> Database:
    directory.mkdir(parents=True, exist_ok=True)
    database = Database(f"sqlite:///{directory / 'codewell.db'}", busy_timeout=busy_timeout)
    with database.session() as session:
        session.execute(text("CREATE TABLE instance_meta (key VARCHAR(100) PRIMARY KEY, value TEXT)"))
        session.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body BLOB)"))
    return database


def test_a_write_lock_held_past_the_busy_timeout_is_storage_unavailable(tmp_path: Path) -> None:
    database = _database(tmp_path / "data", busy_timeout=0.5)
    with write_lock_held(tmp_path / "data" / "codewell.db"):
        started = time.monotonic()
        with pytest.raises(StorageUnavailable) as raised, database.session() as session:
            session.execute(text("INSERT INTO notes (body) VALUES ('x')"))
        waited = time.monotonic() - started
        # Reads go on: WAL readers do not wait for the writer.
        with database.session() as session:
            assert session.scalar(text("SELECT count(*) FROM notes")) == 0
    assert raised.value.cause == "database locked"
    assert raised.value.http_status == 503
    assert raised.value.retry_after == 5
    assert 0.4 < waited < 3, waited  # the configured busy timeout, not SQLite's default nor the old 30 s
    with database.session() as session:  # the lock is gone: writes work again
        session.execute(text("INSERT INTO notes (body) VALUES ('x')"))
    database.dispose()


def test_a_best_effort_write_gives_up_after_its_short_lock_wait(tmp_path: Path) -> None:
    database = _database(tmp_path / "data", busy_timeout=20)
    with write_lock_held(tmp_path / "data" / "codewell.db"):
        started = time.monotonic()
        with pytest.raises(StorageUnavailable), database.session(lock_timeout=0.2) as session:
            session.execute(text("INSERT INTO notes (body) VALUES ('x')"))
        assert time.monotonic() - started < 2
        # The pooled connection waits the full busy timeout again afterwards.
        with database.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 20_000
        assert database.probe_write() is not None
        assert "database locked" in str(database.probe_write())
    database.dispose()


def test_the_write_probe_reports_a_lock_and_clears_by_itself(tmp_path: Path) -> None:
    database = _database(tmp_path / "data", busy_timeout=0.3)
    assert database.probe_write() is None
    time.sleep(2.1)  # past the probe's cache
    with write_lock_held(tmp_path / "data" / "codewell.db"):
        problem = database.probe_write()
        assert problem is not None
        assert "database locked" in problem
    assert database.probe_write() == problem  # cached for two seconds
    time.sleep(2.1)
    assert database.probe_write() is None
    database.dispose()


# Runs in a child process: a SIGBUS there is an exit status (-7) the test reads, not the end of the test run.
_IMMUTABLE_SCRIPT = textwrap.dedent(
    """
    import os, sqlite3, subprocess, sys
    from sqlalchemy import text
    from codewell.core.errors import StorageUnavailable
    from codewell.db import Database

    directory, mode = sys.argv[1], sys.argv[2]
    path = os.path.join(directory, "codewell.db")
    def chattr(flag):
        subprocess.run(["chattr", "-R", flag, directory], check=True)
        subprocess.run(["sync"], check=True)
    if mode == "plain":  # what SQLite alone does: a read through the -shm mapping of an immutable file
        connection = sqlite3.connect(path)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE t (x)")
        connection.commit()
        chattr("+i")
        try:
            connection.execute("SELECT count(*) FROM t").fetchall()
        finally:
            chattr("-i")
        sys.exit(0)
    database = Database("sqlite:///" + path, busy_timeout=1)
    with database.session() as session:
        session.execute(text("CREATE TABLE instance_meta (key VARCHAR(100) PRIMARY KEY, value TEXT)"))
        session.execute(text("CREATE TABLE t (x)"))
    chattr("+i")
    failures = []
    try:
        for attempt in ("read", "write", "read"):
            try:
                with database.session() as session:
                    session.execute(text("SELECT count(*) FROM t" if attempt == "read" else "INSERT INTO t VALUES (1)"))
            except StorageUnavailable as exc:
                failures.append(exc.cause)
        probe = database.probe_write()
    finally:
        chattr("-i")
    with database.session() as session:  # lifted: reads and writes work again, on the same engine
        session.execute(text("INSERT INTO t VALUES (2)"))
        count = session.scalar(text("SELECT count(*) FROM t"))
    database.dispose()
    print(failures, probe, count, flush=True)
    """
)


def _run(directory: Path, mode: str) -> subprocess.CompletedProcess[str]:
    directory.mkdir(parents=True, exist_ok=True)
    src = Path(__file__).resolve().parents[3] / "src"
    try:
        return subprocess.run(
            [sys.executable, "-c", _IMMUTABLE_SCRIPT, str(directory), mode],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
            check=False,
        )
    finally:
        # A child killed by SIGBUS never ran its own `chattr -i`: an immutable directory left behind would outlive
        # the test (pytest's cleanup, or any rm -rf of the scratch dir, fails on it).
        subprocess.run(["chattr", "-R", "-i", str(directory)], check=True)


def test_an_immutable_data_directory_kills_a_plain_sqlite_reader_with_sigbus(tmp_path: Path) -> None:
    """The fault is real here: without codewell's guard, SQLite reading a WAL database dies of SIGBUS."""
    result = _run(tmp_path / "plain", "plain")
    assert result.returncode == -7, (result.returncode, result.stderr[-2000:])


def test_an_immutable_data_directory_is_storage_unavailable_not_sigbus(tmp_path: Path) -> None:
    result = _run(tmp_path / "guarded", "guarded")
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    failures, _, rest = result.stdout.strip().partition("] ")
    assert failures == "['database read-only', 'database read-only', 'database read-only'"
    assert "database read-only" in rest
    assert rest.endswith(" 1")


def test_a_full_disk_is_storage_unavailable_and_the_probe_says_so(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", size="2m") as directory:
        database = _database(directory, busy_timeout=1)
        assert database.probe_write() is None
        fill(directory)
        with pytest.raises(StorageUnavailable) as raised, database.session() as session:
            session.execute(text("INSERT INTO notes (body) VALUES (:body)"), {"body": b"\1" * 300_000})
        assert raised.value.cause == "database disk full"
        database.dispose()


def test_a_stale_snapshot_is_contention_for_the_caller_to_retry_not_a_storage_fault(tmp_path: Path) -> None:
    """A transaction that read, then writes after another connection committed, fails at once with
    SQLITE_BUSY_SNAPSHOT: contention its caller may retry, not a lock held past the timeout."""
    path = tmp_path / "snapshot.db"
    first = sqlite3.connect(path, isolation_level=None, timeout=5)
    first.execute("PRAGMA journal_mode=WAL")
    first.execute("CREATE TABLE t (x)")
    second = sqlite3.connect(path, isolation_level=None, timeout=5)
    first.execute("BEGIN")
    first.execute("SELECT * FROM t").fetchall()
    second.execute("INSERT INTO t VALUES (1)")
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as raised:
        first.execute("INSERT INTO t VALUES (2)")
    assert time.monotonic() - started < 1  # at once: no busy wait
    assert raised.value.sqlite_errorname == "SQLITE_BUSY_SNAPSHOT"
    assert storage_fault(raised.value) is None
    first.close()
    second.close()
