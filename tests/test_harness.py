"""The test harness itself: the per-test PostgreSQL reset (tests/conftest.py) and forked CLI processes
(tests/cliprocess.py) must give what a fresh database and a fresh `python -m codewell` give."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import func, select

from codewell.accounts.models import UserRow
from codewell.runtime import Runtime
from tests import cliprocess
from tests.conftest import TESTS, PostgresReset, pytest_collection_modifyitems
from tests.factories import make_token, make_user


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class CollectedTest:
    """What the marking hook of tests/conftest.py reads of a collected test: its path; it records the markers added."""

    def __init__(self, path: Path, slow_minutes: int | None = None) -> None:
        self.path = path
        self.markers: list[str] = []
        self.slow = None if slow_minutes is None else pytest.mark.slow(minutes=slow_minutes).mark

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.name)

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.slow if name == "slow" else None


def test_every_test_under_a_jobs_folder_and_only_there_is_marked_database() -> None:
    jobs = [
        CollectedTest(TESTS / "unit" / "jobs" / "test_queue.py"),
        CollectedTest(TESTS / "functional" / "jobs" / "a" / "test_b.py"),
    ]
    others = [
        CollectedTest(TESTS / "unit" / "search" / "test_jobs.py"),
        CollectedTest(TESTS / "test_jobs.py"),
        CollectedTest(TESTS.parent / "elsewhere" / "jobs" / "test_queue.py"),
    ]
    pytest_collection_modifyitems(cast(list[pytest.Item], jobs + others))
    assert [test.markers for test in jobs] == [["database"], ["database"]]
    assert [test.markers for test in others] == [[], [], []]


def test_slow_tests_are_collected_first_longest_first() -> None:
    """So that xdist's work stealing never leaves one worker a ten-minute test at the end (scripts/test)."""
    quick, two, ten, one = (
        CollectedTest(TESTS / f"test_{n}.py", m) for n, m in (("a", None), ("b", 2), ("c", 10), ("d", 1))
    )
    also_quick = CollectedTest(TESTS / "test_e.py")
    items = [quick, two, ten, one, also_quick]
    pytest_collection_modifyitems(cast(list[pytest.Item], items))
    assert items == [ten, two, one, quick, also_quick]  # the others keep their order


@pytest.mark.database  # the reset runs only on PostgreSQL: this test's whole point is the PostgreSQL pass
def test_postgres_reset_empties_every_written_table_and_restarts_ids(
    runtime: Runtime, postgres_reset: PostgresReset | None
) -> None:
    if postgres_reset is None:
        pytest.skip("SQLite: each test gets a fresh copy of the migrated file")
    alice = make_user(runtime, "alice")
    make_user(runtime, "bob")
    make_token(runtime, alice)  # a child row: emptied before its parent

    postgres_reset()

    with runtime.db.engine.connect() as connection:
        for table in runtime.db.table_names():
            assert connection.exec_driver_sql(f'SELECT count(*) FROM "{table}"').scalar() == 0, table
    # Identities start again at 1, as after TRUNCATE ... RESTART IDENTITY.
    assert make_user(runtime, "carol").id == 1
    with runtime.db.session() as session:
        assert session.scalar(select(func.count()).select_from(UserRow)) == 1


def test_a_forked_command_answers_like_a_fresh_process(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text('{"mcp.tools.disabledd": []}')
    env = {**os.environ, "COLUMNS": "200"}
    forked = cliprocess.run("config", "validate", "c.json", env=env, cwd=tmp_path)
    fresh = subprocess.run(
        [sys.executable, "-m", "codewell", "config", "validate", "c.json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == 1
    assert "did you mean 'mcp.tools.disabled'?" in forked.stderr


def test_a_command_over_its_time_is_killed_and_the_next_one_runs(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        # A server never ends by itself.
        cliprocess.run("--data-dir", str(tmp_path), "serve", "--port", str(free_port()), timeout=3)
    assert cliprocess.run("--help").returncode == 0
