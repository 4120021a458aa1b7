"""Sign-in providers: a pending flow may connect an identity to a signed-in user (account settings).

Revision ID: identities_0002
Revises: identities_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "identities_0002"
down_revision = "identities_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("auth_flows") as batch:
        batch.add_column(sa.Column("link_user_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("auth_flows") as batch:
        batch.drop_column("link_user_id")
