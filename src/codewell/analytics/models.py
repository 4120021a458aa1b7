"""Tables owned by analytics: one row per usage event (tool calls now; searches and navigation later)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow


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
