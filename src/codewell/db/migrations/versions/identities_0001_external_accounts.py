"""Sign-in providers: linked external accounts and pending sign-in flows.

Revision ID: identities_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "identities_0001"
down_revision = "0001"
branch_labels = ("identities",)
depends_on = ("accounts_0001",)


def upgrade() -> None:
    op.create_table(
        "user_external_accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("service_type", sa.String(length=50), nullable=False),
        sa.Column("service_id", sa.String(length=500), nullable=False),
        sa.Column("client_id", sa.String(length=500), nullable=False),
        sa.Column("account_id", sa.String(length=500), nullable=False),
        sa.Column("account_data", sa.Text(), nullable=False),
        sa.Column("auth_data", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_user_external_accounts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_external_accounts")),
        sa.UniqueConstraint(
            "service_type", "service_id", "client_id", "account_id", name=op.f("uq_user_external_accounts_service_type")
        ),
    )
    op.create_index(op.f("ix_user_external_accounts_user_id"), "user_external_accounts", ["user_id"], unique=False)
    op.create_table(
        "auth_flows",
        sa.Column("state_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("browser_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("provider_id", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=False),
        sa.Column("code_verifier", sa.String(length=128), nullable=False),
        sa.Column("return_to", sa.String(length=2000), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state_sha256", name=op.f("pk_auth_flows")),
    )
    op.create_index(op.f("ix_auth_flows_expires_at"), "auth_flows", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_auth_flows_expires_at"), table_name="auth_flows")
    op.drop_table("auth_flows")
    op.drop_index(op.f("ix_user_external_accounts_user_id"), table_name="user_external_accounts")
    op.drop_table("user_external_accounts")
