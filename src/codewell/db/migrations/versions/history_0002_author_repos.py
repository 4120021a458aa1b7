"""History: per (author, repository) commit counts for get_contributor_repos, backfilled from the index.

Revision ID: history_0002
Revises: history_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import codewell.db.base

revision = "history_0002"
down_revision = "history_0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "history_author_repos",
        sa.Column("author_id", BigId, nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("commit_count", sa.Integer(), nullable=False),
        sa.Column("last_commit_at", codewell.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"], ["history_authors.id"], name=op.f("fk_history_author_repos_author_id_history_authors")
        ),
        sa.ForeignKeyConstraint(
            ["repo_id"], ["repos.id"], name=op.f("fk_history_author_repos_repo_id_repos"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("author_id", "repo_id", name=op.f("pk_history_author_repos")),
    )
    op.execute(
        "INSERT INTO history_author_repos (author_id, repo_id, commit_count, last_commit_at) "
        "SELECT author_id, repo_id, count(*), max(committed_at) FROM history_commits GROUP BY author_id, repo_id"
    )


def downgrade() -> None:
    op.drop_table("history_author_repos")
