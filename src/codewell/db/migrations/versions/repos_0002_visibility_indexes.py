"""Repos: index-only visibility (the ids a user may read, without touching the repos rows).

`ix_repos_private` (private, id) serves "public repositories"; `ix_repo_permissions_user_repo` (user_id,
repo_id) serves "repositories granted to this user" and replaces the single-column `user_id` index (its
leading column still serves the cascade when a user is deleted).

Revision ID: repos_0002
Revises: repos_0001
"""

from __future__ import annotations

from alembic import op

revision = "repos_0002"
down_revision = "repos_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_repos_private", "repos", ["private", "id"], unique=False)
    op.create_index("ix_repo_permissions_user_repo", "repo_permissions", ["user_id", "repo_id"], unique=False)
    op.drop_index("ix_repo_permissions_user_id", table_name="repo_permissions")


def downgrade() -> None:
    op.create_index("ix_repo_permissions_user_id", "repo_permissions", ["user_id"], unique=False)
    op.drop_index("ix_repo_permissions_user_repo", table_name="repo_permissions")
    op.drop_index("ix_repos_private", table_name="repos")
