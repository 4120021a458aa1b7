"""Code navigation: where an upload came from (`source`: upload or auto), and failed auto-indexing jobs.

Revision ID: codenav_0002
Revises: codenav_0001

Existing uploads get `upload` (auto-indexing did not exist before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "codenav_0002"
down_revision = "codenav_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "codenav_scip_uploads", sa.Column("source", sa.String(length=20), server_default="upload", nullable=False)
    )
    op.create_table(
        "codenav_autoindex_failures",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("commit", sa.String(length=40), nullable=False),
        sa.Column("indexers", sa.Text(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("stderr_tail", sa.Text(), nullable=False),
        sa.Column("failed_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["repo_id"], ["repos.id"], name=op.f("fk_codenav_autoindex_failures_repo_id_repos"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_codenav_autoindex_failures")),
        sa.UniqueConstraint("repo_id", "commit", name="uq_codenav_autoindex_failures_repo_id_commit"),
    )


def downgrade() -> None:
    op.drop_table("codenav_autoindex_failures")
    with op.batch_alter_table("codenav_scip_uploads") as batch:
        batch.drop_column("source")
