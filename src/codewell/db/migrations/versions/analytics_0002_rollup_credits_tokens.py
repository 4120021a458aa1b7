"""Analytics: daily usage rollup, credit buckets and their usage, analytics access tokens.

Revision ID: analytics_0002
Revises: analytics_0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from codewell.db.base import UTCDateTime

revision = "analytics_0002"
down_revision = "analytics_0001"
branch_labels = None
depends_on = ("accounts_0001",)


def upgrade() -> None:
    counters = ("events", "searches", "codenav", "deepsearch", "code_finder", "tool_calls", "errors")
    op.create_table(
        "usage_daily",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("client", sa.String(length=100), nullable=False),
        sa.Column("language", sa.String(length=50), nullable=False),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in counters),
        sa.PrimaryKeyConstraint("user_id", "day", "client", "language", name=op.f("pk_usage_daily")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_usage_daily_day", "usage_daily", ["day"])
    op.create_table(
        "credit_buckets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("consumed", sa.BigInteger(), nullable=False),
        sa.Column("starts_on", sa.Date(), nullable=False),
        sa.Column("ends_on", sa.Date(), nullable=False),
        sa.Column("note", sa.String(length=255), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "consumed >= 0 AND consumed <= amount", name=op.f("ck_credit_buckets_consumed_within_amount")
        ),
        sa.CheckConstraint("amount > 0", name=op.f("ck_credit_buckets_amount_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credit_buckets")),
    )
    op.create_index("ix_credit_buckets_active", "credit_buckets", ["starts_on", "ends_on"])
    op.create_table(
        "credit_usage",
        sa.Column("bucket_id", sa.Integer(), nullable=False),
        sa.Column("feature", sa.String(length=50), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["bucket_id"],
            ["credit_buckets.id"],
            name=op.f("fk_credit_usage_bucket_id_credit_buckets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("bucket_id", "feature", name=op.f("pk_credit_usage")),
    )
    op.create_table(
        "analytics_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("display_name", sa.String(length=255), nullable=False),
        sa.Column("token_sha256", sa.LargeBinary(length=32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("last_used_at", UTCDateTime(), nullable=True),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_analytics_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_analytics_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_analytics_tokens_token_sha256")),
    )
    op.create_index("ix_analytics_tokens_user_id", "analytics_tokens", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_analytics_tokens_user_id", table_name="analytics_tokens")
    op.drop_table("analytics_tokens")
    op.drop_table("credit_usage")
    op.drop_index("ix_credit_buckets_active", table_name="credit_buckets")
    op.drop_table("credit_buckets")
    op.drop_index("ix_usage_daily_day", table_name="usage_daily")
    op.drop_table("usage_daily")
