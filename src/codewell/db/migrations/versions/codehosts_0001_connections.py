"""Code hosts: connection state, repositories found upstream, user permission syncs.

Revision ID: codehosts_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "codehosts_0001"
down_revision = "0001"
branch_labels = ("codehosts",)
depends_on = ("accounts_0001",)


def upgrade() -> None:
    op.create_table(
        "codehost_connections",
        sa.Column("connection_id", sa.String(length=40), nullable=False),
        sa.Column("last_sync_at", UTCDateTime(), nullable=True),
        sa.Column("last_success_at", UTCDateTime(), nullable=True),
        sa.Column("next_sync_at", UTCDateTime(), nullable=True),
        sa.Column("repos_found", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("warnings", sa.Text(), nullable=False),
        sa.Column("perms_synced_at", UTCDateTime(), nullable=True),
        sa.Column("perms_next_at", UTCDateTime(), nullable=True),
        sa.Column("perms_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("connection_id", name=op.f("pk_codehost_connections")),
    )
    op.create_table(
        "codehost_repos",
        sa.Column("connection_id", sa.String(length=40), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("repo_name", sa.String(length=512), nullable=False),
        sa.Column("visibility", sa.String(length=20), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=False),
        sa.Column("missing_since", UTCDateTime(), nullable=True),
        sa.Column("perms_synced_at", UTCDateTime(), nullable=True),
        sa.Column("perms_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("connection_id", "external_id", name=op.f("pk_codehost_repos")),
    )
    op.create_index("ix_codehost_repos_repo_name", "codehost_repos", ["repo_name"])
    op.create_table(
        "codehost_user_syncs",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("connection_id", sa.String(length=40), nullable=False),
        sa.Column("linked", sa.Boolean(), nullable=False),
        sa.Column("last_synced_at", UTCDateTime(), nullable=True),
        sa.Column("next_sync_at", UTCDateTime(), nullable=True),
        sa.Column("repo_count", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_codehost_user_syncs_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", "connection_id", name=op.f("pk_codehost_user_syncs")),
    )
    op.create_index("ix_codehost_user_syncs_next", "codehost_user_syncs", ["next_sync_at"])


def downgrade() -> None:
    op.drop_index("ix_codehost_user_syncs_next", table_name="codehost_user_syncs")
    op.drop_table("codehost_user_syncs")
    op.drop_index("ix_codehost_repos_repo_name", table_name="codehost_repos")
    op.drop_table("codehost_repos")
    op.drop_table("codehost_connections")
