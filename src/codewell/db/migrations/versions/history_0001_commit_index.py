"""History: the commit index (commits, author identities, refs, commit-ref reachability, message words).

Revision ID: history_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import codewell.db.base

revision = "history_0001"
down_revision = "0001"
branch_labels = ("history",)
depends_on = ("repos_0001",)

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "history_authors",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("email", sa.String(length=255), nullable=False),
        sa.Column("search_key", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_authors")),
        sa.UniqueConstraint("name", "email", name="uq_history_authors_name_email"),
    )
    op.create_table(
        "history_commits",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(length=40), nullable=False),
        sa.Column("parents", sa.String(length=400), nullable=False),
        sa.Column("author_id", BigId, nullable=False),
        sa.Column("committer_id", BigId, nullable=False),
        sa.Column("authored_at", codewell.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("committed_at", codewell.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("paths", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"], ["history_authors.id"], name=op.f("fk_history_commits_author_id_history_authors")
        ),
        sa.ForeignKeyConstraint(
            ["committer_id"], ["history_authors.id"], name=op.f("fk_history_commits_committer_id_history_authors")
        ),
        sa.ForeignKeyConstraint(
            ["repo_id"], ["repos.id"], name=op.f("fk_history_commits_repo_id_repos"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_commits")),
        sa.UniqueConstraint("repo_id", "sha", name="uq_history_commits_repo_id_sha"),
    )
    op.create_index("ix_history_commits_committed_at", "history_commits", ["committed_at"])
    op.create_index("ix_history_commits_repo_id_committed_at", "history_commits", ["repo_id", "committed_at"])
    op.create_index("ix_history_commits_author_repo", "history_commits", ["author_id", "repo_id", "committed_at"])
    op.create_table(
        "history_refs",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("target", sa.String(length=40), nullable=False),
        sa.ForeignKeyConstraint(
            ["repo_id"], ["repos.id"], name=op.f("fk_history_refs_repo_id_repos"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_refs")),
        sa.UniqueConstraint("repo_id", "name", name="uq_history_refs_repo_id_name"),
    )
    op.create_table(
        "history_commit_refs",
        sa.Column("ref_id", BigId, nullable=False),
        sa.Column("commit_id", BigId, nullable=False),
        sa.ForeignKeyConstraint(
            ["commit_id"],
            ["history_commits.id"],
            name=op.f("fk_history_commit_refs_commit_id_history_commits"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["ref_id"], ["history_refs.id"], name=op.f("fk_history_commit_refs_ref_id_history_refs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("ref_id", "commit_id", name=op.f("pk_history_commit_refs")),
    )
    op.create_index("ix_history_commit_refs_commit_id", "history_commit_refs", ["commit_id"])
    op.create_table(
        "history_words",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("word", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_words")),
        sa.UniqueConstraint("word", name=op.f("uq_history_words_word")),
    )
    op.create_table(
        "history_word_commits",
        sa.Column("word_id", BigId, autoincrement=False, nullable=False),
        sa.Column("commit_id", BigId, autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("word_id", "commit_id", name=op.f("pk_history_word_commits")),
    )


def downgrade() -> None:
    op.drop_table("history_word_commits")
    op.drop_table("history_words")
    op.drop_index("ix_history_commit_refs_commit_id", table_name="history_commit_refs")
    op.drop_table("history_commit_refs")
    op.drop_table("history_refs")
    op.drop_index("ix_history_commits_author_repo", table_name="history_commits")
    op.drop_index("ix_history_commits_repo_id_committed_at", table_name="history_commits")
    op.drop_index("ix_history_commits_committed_at", table_name="history_commits")
    op.drop_table("history_commits")
    op.drop_table("history_authors")
