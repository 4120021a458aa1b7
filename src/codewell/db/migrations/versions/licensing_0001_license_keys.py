"""Licensing: license keys.

Revision ID: licensing_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "licensing_0001"
down_revision = "0001"
branch_labels = ("licensing",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "license_keys",
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("problem", sa.String(length=50), nullable=False),
        sa.Column("installed_at", UTCDateTime(), nullable=False),
        sa.Column("installed_by", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("fingerprint", name=op.f("pk_license_keys")),
    )


def downgrade() -> None:
    op.drop_table("license_keys")
