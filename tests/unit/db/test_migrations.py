from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from codewell.db import Base, Database
from codewell.db.database import import_all_models

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
