"""Code navigation: SCIP index uploads per (repository, commit), their documents and symbol occurrences.

Revision ID: codenav_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "codenav_0001"
down_revision = "0001"
branch_labels = ("codenav",)
depends_on = ("repos_0001",)

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "codenav_scip_uploads",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("commit", sa.String(length=40), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("uploaded_at", UTCDateTime(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("occurrences", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["repo_id"], ["repos.id"], name=op.f("fk_codenav_scip_uploads_repo_id_repos"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_codenav_scip_uploads")),
        sa.UniqueConstraint("repo_id", "commit", name="uq_codenav_scip_uploads_repo_id_commit"),
    )
    op.create_table(
        "codenav_scip_documents",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("upload_id", BigId, nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("language", sa.String(length=100), nullable=False),
        sa.ForeignKeyConstraint(
            ["upload_id"],
            ["codenav_scip_uploads.id"],
            name=op.f("fk_codenav_scip_documents_upload_id_codenav_scip_uploads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_codenav_scip_documents")),
        sa.UniqueConstraint("upload_id", "path", name="uq_codenav_scip_documents_upload_id_path"),
    )
    op.create_table(
        "codenav_scip_occurrences",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("upload_id", BigId, nullable=False),
        sa.Column("document_id", BigId, nullable=False),
        sa.Column("symbol", sa.String(length=1024), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("container", sa.Text(), nullable=False),
        sa.Column("definitions", sa.Text(), nullable=False),
        sa.Column("references", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["codenav_scip_documents.id"],
            name=op.f("fk_codenav_scip_occurrences_document_id_codenav_scip_documents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["upload_id"],
            ["codenav_scip_uploads.id"],
            name=op.f("fk_codenav_scip_occurrences_upload_id_codenav_scip_uploads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_codenav_scip_occurrences")),
    )
    op.create_index("ix_codenav_scip_occurrences_document_name", "codenav_scip_occurrences", ["document_id", "name"])
    op.create_index("ix_codenav_scip_occurrences_symbol_upload", "codenav_scip_occurrences", ["symbol", "upload_id"])


def downgrade() -> None:
    op.drop_table("codenav_scip_occurrences")
    op.drop_table("codenav_scip_documents")
    op.drop_table("codenav_scip_uploads")
