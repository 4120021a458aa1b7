"""Alembic environment: runs against the engine handed over by codewell.db.Database."""

from __future__ import annotations

from alembic import context

from codewell.db.base import Base
from codewell.db.database import import_all_models

import_all_models()
engine = context.config.attributes["engine"]

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
