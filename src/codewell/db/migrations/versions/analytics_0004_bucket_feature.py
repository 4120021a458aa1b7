"""Analytics: a credit bucket may pay for one feature only (`feature`; "" pays for every metered feature).

Revision ID: analytics_0004
Revises: analytics_0003

Existing buckets get "" and keep paying for every feature.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "analytics_0004"
down_revision = "analytics_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("credit_buckets", sa.Column("feature", sa.String(length=50), server_default="", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("credit_buckets") as batch:
        batch.drop_column("feature")
