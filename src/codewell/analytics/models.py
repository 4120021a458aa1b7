"""Tables owned by analytics: usage events and their daily rollup, credit buckets, analytics access tokens."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    Date,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow

COUNTER_NAMES = ("events", "searches", "codenav", "deepsearch", "code_finder", "tool_calls", "errors")


def csv_tail_sql(*cells: str) -> str:
    """SQL (portable, immutable as PostgreSQL requires of generated columns) of a rollup row's report cells
    after the user cells: `cells` then the counters, comma-separated, as CSV text without the line end."""
    return " || ',' || ".join([*cells, *(f"CAST({name} AS TEXT)" for name in COUNTER_NAMES)])


class UsageEventRow(Base):
    """One use of a feature by a user. `user_id` is deliberately not a foreign key: usage history
    outlives account deletion (reports then show the numeric ID only)."""

    __tablename__ = "usage_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Client name (and version) as the client reported it: "claude-code/2.1.3", "web", "cli".
    client: Mapped[str] = mapped_column(String(200), default="")
    # Feature family: "mcp", "search", "codenav", "agent", ...
    feature: Mapped[str] = mapped_column(String(50))
    tool: Mapped[str] = mapped_column(String(100), default="")
    endpoint: Mapped[str] = mapped_column(String(100), default="")
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    result_bytes: Mapped[int] = mapped_column(Integer, default=0)
    # Error code ("" on success): codewell.core.errors codes, "invalid_arguments", "disabled", "internal".
    error: Mapped[str] = mapped_column(String(100), default="")
    language: Mapped[str] = mapped_column(String(50), default="")

    __table_args__ = (
        Index("ix_usage_events_created_at", "created_at"),
        Index("ix_usage_events_user_id_created_at", "user_id", "created_at"),
    )


class UsageCounters:
    """The counters every usage rollup table keeps: one column per name in `analytics.rollup.COUNTERS`."""

    events: Mapped[int] = mapped_column(Integer, default=0)
    searches: Mapped[int] = mapped_column(Integer, default=0)
    codenav: Mapped[int] = mapped_column(Integer, default=0)
    deepsearch: Mapped[int] = mapped_column(Integer, default=0)
    code_finder: Mapped[int] = mapped_column(Integer, default=0)
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[int] = mapped_column(Integer, default=0)


class UsageDailyRow(UsageCounters, Base):
    """Usage rolled up per user, UTC day, client and language: what the reports read (issue #9).

    Maintained by the usage recorder in the same transaction as the raw events, so reports aggregate a few
    rows per user-day instead of every event. `day` is `YYYY-MM-DD` text on both engines so month grouping
    is a portable `substr`. `client` and `language` hold sanitized values (see `codewell.analytics.rollup`)
    that can go into a CSV cell as they are.
    """

    __tablename__ = "usage_daily"

    user_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    client: Mapped[str] = mapped_column(String(100), primary_key=True)
    language: Mapped[str] = mapped_column(String(50), primary_key=True)
    # The row's CSV cells after the user cells, kept by the database: a report fetches one string per row.
    csv_tail: Mapped[str] = mapped_column(Text, Computed(csv_tail_sql("client", "day", "language"), persisted=True))

    # WITHOUT ROWID on SQLite: rows are stored in primary-key order, which is report order, so a report is
    # one sequential scan instead of an index walk with a table lookup per row (5-10x faster at 1M rows).
    __table_args__ = (Index("ix_usage_daily_day", "day"), {"sqlite_with_rowid": False})


class UsageUserDayRow(UsageCounters, Base):
    """`usage_daily` summed over client and language: one row per user and UTC day (`by_user_day`, and the
    source of filtered `by_user` / `by_user_month` reports). Kept in the same transaction as `usage_daily`."""

    __tablename__ = "usage_user_day"

    user_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    # The row's CSV cells after the user cells, kept by the database: a report fetches one string per row.
    csv_tail: Mapped[str] = mapped_column(Text, Computed(csv_tail_sql("day"), persisted=True))

    __table_args__ = ({"sqlite_with_rowid": False},)


class UsageUserMonthRow(UsageCounters, Base):
    """`usage_daily` summed per user and UTC month (`YYYY-MM`): the unfiltered `by_user_month` report."""

    __tablename__ = "usage_user_month"

    user_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    month: Mapped[str] = mapped_column(String(7), primary_key=True)
    # The row's CSV cells after the user cells, kept by the database: a report fetches one string per row.
    csv_tail: Mapped[str] = mapped_column(Text, Computed(csv_tail_sql("month"), persisted=True))

    __table_args__ = ({"sqlite_with_rowid": False},)


class UsageUserTotalRow(UsageCounters, Base):
    """`usage_daily` summed per user over all time: the unfiltered `by_user` report."""

    __tablename__ = "usage_user_total"

    user_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The row's CSV cells after the user cells, kept by the database: a report fetches one string per row.
    csv_tail: Mapped[str] = mapped_column(Text, Computed(csv_tail_sql(), persisted=True))

    __table_args__ = ({"sqlite_with_rowid": False},)


class CreditBucketRow(Base):
    """An allocation of credits usable from `starts_on` to `ends_on` (UTC days, both inclusive).

    The CHECK constraint is the last line of defence: whatever the code does, a bucket can never be
    consumed beyond its amount.
    """

    __tablename__ = "credit_buckets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    consumed: Mapped[int] = mapped_column(BigInteger, default=0)
    starts_on: Mapped[date] = mapped_column(Date)
    ends_on: Mapped[date] = mapped_column(Date)
    note: Mapped[str] = mapped_column(String(255), default="")
    created_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The one feature the bucket pays for ("code_finder", ...); "" pays for every metered feature.
    feature: Mapped[str] = mapped_column(String(50), default="", server_default="")

    __table_args__ = (
        CheckConstraint("consumed >= 0 AND consumed <= amount", name="consumed_within_amount"),
        CheckConstraint("amount > 0", name="amount_positive"),
        Index("ix_credit_buckets_active", "starts_on", "ends_on"),
    )


class CreditUsageRow(Base):
    """Credits taken from one bucket by one feature ("deepsearch", "code_finder"), summed."""

    __tablename__ = "credit_usage"

    bucket_id: Mapped[int] = mapped_column(ForeignKey("credit_buckets.id", ondelete="CASCADE"), primary_key=True)
    feature: Mapped[str] = mapped_column(String(50), primary_key=True)
    amount: Mapped[int] = mapped_column(BigInteger, default=0)


class AnalyticsTokenRow(Base):
    """An analytics access token; only the SHA-256 of its random bytes is stored. Revoking sets revoked_at."""

    __tablename__ = "analytics_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    display_name: Mapped[str] = mapped_column(String(255), default="")
    token_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
