"""Licensing: credits allocated from license keys, per feature and month (idempotent allocation).

Revision ID: licensing_0002
Revises: licensing_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "licensing_0002"
down_revision = "licensing_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "license_credit_allocations",
        sa.Column("period", sa.Date(), nullable=False),
        sa.Column("feature", sa.String(length=50), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("period", "feature", name=op.f("pk_license_credit_allocations")),
    )


def downgrade() -> None:
    op.drop_table("license_credit_allocations")
