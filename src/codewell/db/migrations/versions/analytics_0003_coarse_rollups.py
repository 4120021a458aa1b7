"""Analytics: usage rollups per user-day, user-month and user (coarser reports read them without grouping), and
a stored `csv_tail` column on every rollup (the report cells as CSV text, kept by the database on each write).

Revision ID: analytics_0003
Revises: analytics_0002

Existing data: the new tables are filled from `usage_daily` here, so an upgraded instance reports the same
numbers at once (`codewell analytics rebuild` recomputes everything from the raw events).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "analytics_0003"
down_revision = "analytics_0002"
branch_labels = None
depends_on = None

COUNTERS = ("events", "searches", "codenav", "deepsearch", "code_finder", "tool_calls", "errors")


def _counter_columns() -> list[sa.Column[int]]:
    return [sa.Column(name, sa.Integer(), nullable=False) for name in COUNTERS]


def _tail(*cells: str) -> sa.Column[str]:
    sql = " || ',' || ".join([*cells, *(f"CAST({name} AS TEXT)" for name in COUNTERS)])
    return sa.Column("csv_tail", sa.Text(), sa.Computed(sql, persisted=True), nullable=False)


def _add_daily_tail() -> None:
    """PostgreSQL adds a stored generated column in place; SQLite cannot (ALTER TABLE only adds virtual ones),
    so the table is rebuilt with it and its rows copied."""
    if op.get_bind().dialect.name == "postgresql":
        op.add_column("usage_daily", _tail("client", "day", "language"))
        return
    keys = ("user_id", "day", "client", "language")
    op.create_table(
        "usage_daily_new",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("client", sa.String(length=100), nullable=False),
        sa.Column("language", sa.String(length=50), nullable=False),
        *_counter_columns(),
        _tail("client", "day", "language"),
        sa.PrimaryKeyConstraint(*keys, name=op.f("pk_usage_daily")),
        sqlite_with_rowid=False,
    )
    names = ", ".join((*keys, *COUNTERS))
    op.execute(f"INSERT INTO usage_daily_new ({names}) SELECT {names} FROM usage_daily")
    op.drop_index("ix_usage_daily_day", table_name="usage_daily")
    op.drop_table("usage_daily")
    op.rename_table("usage_daily_new", "usage_daily")
    op.create_index("ix_usage_daily_day", "usage_daily", ["day"])


def upgrade() -> None:
    _add_daily_tail()
    op.create_table(
        "usage_user_day",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        *_counter_columns(),
        _tail("day"),
        sa.PrimaryKeyConstraint("user_id", "day", name=op.f("pk_usage_user_day")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "usage_user_month",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        *_counter_columns(),
        _tail("month"),
        sa.PrimaryKeyConstraint("user_id", "month", name=op.f("pk_usage_user_month")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "usage_user_total",
        sa.Column("user_id", sa.Integer(), nullable=False),
        *_counter_columns(),
        _tail(),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_usage_user_total")),
        sqlite_with_rowid=False,
    )
    sums = ", ".join(f"sum({name})" for name in COUNTERS)
    names = ", ".join(COUNTERS)
    op.execute(
        f"INSERT INTO usage_user_day (user_id, day, {names}) "
        f"SELECT user_id, day, {sums} FROM usage_daily GROUP BY user_id, day"
    )
    op.execute(
        f"INSERT INTO usage_user_month (user_id, month, {names}) "
        f"SELECT user_id, substr(day, 1, 7), {sums} FROM usage_user_day GROUP BY user_id, substr(day, 1, 7)"
    )
    op.execute(
        f"INSERT INTO usage_user_total (user_id, {names}) SELECT user_id, {sums} FROM usage_user_month GROUP BY user_id"
    )


def downgrade() -> None:
    op.drop_table("usage_user_total")
    op.drop_table("usage_user_month")
    op.drop_table("usage_user_day")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_column("usage_daily", "csv_tail")
    else:
        op.execute("ALTER TABLE usage_daily DROP COLUMN csv_tail")
