"""Foundation: instance metadata.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = ("foundation",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_meta",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_instance_meta")),
    )


def downgrade() -> None:
    op.drop_table("instance_meta")
