"""Foundation: cache epochs, the counters bumped in the transaction of every change of access data (the
triggers come with the tables they watch: accounts_0003, repos_0003; codewell/db/epochs.py).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.epochs import function_statements

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cache_epochs",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_cache_epochs")),
    )
    for statement in function_statements(op.get_bind().dialect.name):
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS codewell_bump_epoch()")
    op.drop_table("cache_epochs")
