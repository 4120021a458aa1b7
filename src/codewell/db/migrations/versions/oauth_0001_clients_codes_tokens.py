"""OAuth authorization server: clients, authorization codes, tokens.

Revision ID: oauth_0001
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "oauth_0001"
down_revision = "0001"
branch_labels = ("oauth",)
depends_on = ("accounts_0001",)


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("client_name", sa.String(length=255), nullable=False),
        sa.Column("client_uri", sa.String(length=512), nullable=False),
        sa.Column("redirect_uris", sa.Text(), nullable=False),
        sa.Column("token_endpoint_auth_method", sa.String(length=40), nullable=False),
        sa.Column("client_secret_sha256", sa.LargeBinary(length=32), nullable=True),
        sa.Column("scope", sa.String(length=100), nullable=False),
        sa.Column("software_id", sa.String(length=255), nullable=False),
        sa.Column("software_version", sa.String(length=100), nullable=False),
        sa.Column("created_by_user_id", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_clients")),
        sa.UniqueConstraint("client_id", name=op.f("uq_oauth_clients_client_id")),
    )
    op.create_table(
        "oauth_codes",
        sa.Column("code_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("client_pk", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("redirect_uri", sa.String(length=2048), nullable=False),
        sa.Column("code_challenge", sa.String(length=128), nullable=False),
        sa.Column("resource", sa.String(length=2048), nullable=False),
        sa.Column("scope", sa.String(length=100), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["client_pk"], ["oauth_clients.id"], name=op.f("fk_oauth_codes_client_pk_oauth_clients"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_oauth_codes_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("code_sha256", name=op.f("pk_oauth_codes")),
    )
    op.create_index(op.f("ix_oauth_codes_client_pk"), "oauth_codes", ["client_pk"])
    op.create_index(op.f("ix_oauth_codes_user_id"), "oauth_codes", ["user_id"])
    op.create_table(
        "oauth_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("client_pk", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=100), nullable=False),
        sa.Column("resource", sa.String(length=2048), nullable=False),
        sa.Column("family", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["client_pk"],
            ["oauth_clients.id"],
            name=op.f("fk_oauth_tokens_client_pk_oauth_clients"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_oauth_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oauth_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_oauth_tokens_token_sha256")),
    )
    op.create_index(op.f("ix_oauth_tokens_client_pk"), "oauth_tokens", ["client_pk"])
    op.create_index(op.f("ix_oauth_tokens_user_id"), "oauth_tokens", ["user_id"])
    op.create_index(op.f("ix_oauth_tokens_family"), "oauth_tokens", ["family"])


def downgrade() -> None:
    op.drop_table("oauth_tokens")
    op.drop_table("oauth_codes")
    op.drop_table("oauth_clients")
