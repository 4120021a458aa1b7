from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text, update

from codewell.db import Base, Database
from codewell.db import database as database_module
from codewell.db.database import MIGRATIONS_DIR, MIGRATIONS_FINGERPRINT_KEY, import_all_models
from codewell.db.models import InstanceMeta

pytestmark = pytest.mark.database


def test_migrations_match_the_models(database_url: str) -> None:
    """The schema the migrations build is exactly what the models declare (no drift)."""
    import_all_models()
    database = Database(database_url)
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    database.dispose()
    assert diff == []


def test_state_reports_nothing_pending_after_upgrade(database_url: str) -> None:
    database = Database(database_url)
    state = database.migration_state()
    assert not state.pending
    assert state.current == state.heads
    database.dispose()


def test_downgrade_and_upgrade_round_trip(database_url: str) -> None:
    database = Database(database_url)
    database.downgrade_all()
    assert database.migration_state().pending
    database.upgrade()
    assert not database.migration_state().pending
    assert database.instance_id() == database.instance_id()
    database.dispose()


def test_a_current_schema_is_known_without_alembic(database_url: str) -> None:
    """`schema_current` (every process start, every readiness check) reads the fingerprint the last upgrade
    recorded; alembic, mako and the migration scripts stay unloaded."""
    database = Database(database_url)
    database.upgrade()  # records this release's fingerprint (the PostgreSQL pass empties instance_meta)
    database.dispose()
    script = (
        "import sys\n"
        "from codewell.db import Database\n"
        f"database = Database({database_url!r})\n"
        "print(database.schema_current(), 'alembic' in sys.modules, 'mako' in sys.modules)\n"
        "database.dispose()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False", "False"]


def test_a_fingerprint_that_differs_asks_alembic(database_url: str) -> None:
    database = Database(database_url)
    database.upgrade()
    with database.engine.begin() as connection:  # what an older release's upgrade left
        connection.execute(
            update(InstanceMeta).where(InstanceMeta.key == MIGRATIONS_FINGERPRINT_KEY).values(value="older")
        )
    assert database.schema_current()  # alembic's answer: the schema is current all the same
    with database.engine.begin() as connection:  # applied revisions short of this release's heads
        applied = list(connection.scalars(text("SELECT version_num FROM alembic_version")))
        connection.execute(text("DELETE FROM alembic_version"))
        connection.execute(text("INSERT INTO alembic_version (version_num) VALUES ('repos_0001')"))
    assert not database.schema_current()
    with database.engine.begin() as connection:
        connection.execute(text("DELETE FROM alembic_version"))
        for version in applied:
            connection.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": version})
    assert database.schema_current()
    database.dispose()


def test_downgrade_forgets_the_fingerprint(database_url: str) -> None:
    database = Database(database_url)
    database.upgrade()
    assert database.schema_current()
    database.downgrade_all()
    assert not database.schema_current()
    database.upgrade()
    assert database.schema_current()
    database.dispose()


def test_the_fingerprint_follows_the_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = tmp_path / "migrations" / "versions"
    shutil.copytree(MIGRATIONS_DIR / "versions", versions)
    monkeypatch.setattr(database_module, "MIGRATIONS_DIR", tmp_path / "migrations")
    fingerprints = []
    for change in (None, "rename", "edit"):
        if change == "rename":
            first = sorted(versions.glob("*.py"))[0]
            first.rename(first.with_name("z_" + first.name))
        elif change == "edit":
            last = sorted(versions.glob("*.py"))[-1]
            last.write_text(last.read_text() + "\n# edited\n")
        database_module.migrations_fingerprint.cache_clear()
        fingerprints.append(database_module.migrations_fingerprint())
    database_module.migrations_fingerprint.cache_clear()
    assert len(set(fingerprints)) == 3
