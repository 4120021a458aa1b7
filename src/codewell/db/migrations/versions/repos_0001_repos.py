"""Repos: registered repositories and per-user grants of private repositories.

Revision ID: repos_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import codewell.db.base

revision = "repos_0001"
down_revision = "0001"
branch_labels = ("repos",)
# repo_permissions.user_id references users.id.
depends_on = ("accounts_0001",)


def _utc() -> codewell.db.base.UTCDateTime:
    return codewell.db.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "repos",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("source", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("clone_url", sa.Text(), nullable=False),
        sa.Column("credentials_env", sa.String(length=200), nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("default_branch", sa.String(length=255), nullable=True),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.Column("fork", sa.Boolean(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("stars", sa.Integer(), nullable=True),
        sa.Column("extra_branches", sa.Text(), nullable=False),
        sa.Column("sync_interval_seconds", sa.Integer(), nullable=False),
        sa.Column("sync_state", sa.String(length=20), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_fetched_at", _utc(), nullable=True),
        sa.Column("next_sync_at", _utc(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repos")),
        sa.UniqueConstraint("name", name=op.f("uq_repos_name")),
    )
    op.create_index("ix_repos_next_sync_at", "repos", ["next_sync_at"], unique=False)
    op.create_table(
        "repo_permissions",
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=50), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["repo_id"], ["repos.id"], name=op.f("fk_repo_permissions_repo_id_repos"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_repo_permissions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("repo_id", "user_id", name=op.f("pk_repo_permissions")),
    )
    op.create_index(op.f("ix_repo_permissions_user_id"), "repo_permissions", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_repo_permissions_user_id"), table_name="repo_permissions")
    op.drop_table("repo_permissions")
    op.drop_index("ix_repos_next_sync_at", table_name="repos")
    op.drop_table("repos")
