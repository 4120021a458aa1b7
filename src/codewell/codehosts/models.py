"""Tables of the codehosts capability (migration branch `codehosts`): the state of each connection, the
repositories each one found (for the removal grace period) and each user's permission sync."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime


class ConnectionStateRow(Base):
    """The last discovery and repository-permission sync of one configured connection."""

    __tablename__ = "codehost_connections"

    connection_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    last_sync_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    next_sync_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    repos_found: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    # Per-scope problems of the last discovery (an org the token cannot read), one per line.
    warnings: Mapped[str] = mapped_column(Text, default="")
    perms_synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    perms_next_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    perms_error: Mapped[str | None] = mapped_column(Text, default=None)


class CodeHostRepoRow(Base):
    """A repository one connection found upstream, and the codewell repository it became."""

    __tablename__ = "codehost_repos"

    connection_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    external_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    path: Mapped[str] = mapped_column(String(500))  # owner/name as the host spells it
    repo_name: Mapped[str] = mapped_column(String(512))
    visibility: Mapped[str] = mapped_column(String(20), default="public")  # public | private | internal
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    missing_since: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    perms_synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    perms_error: Mapped[str | None] = mapped_column(Text, default=None)

    __table_args__ = (Index("ix_codehost_repos_repo_name", "repo_name"),)


class UserSyncRow(Base):
    """The last user-centric permission sync of one user against one connection."""

    __tablename__ = "codehost_user_syncs"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    connection_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    linked: Mapped[bool] = mapped_column(Boolean, default=False)
    last_synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    next_sync_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    repo_count: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, default=None)

    __table_args__ = (Index("ix_codehost_user_syncs_next", "next_sync_at"),)


__all__ = ["CodeHostRepoRow", "ConnectionStateRow", "UserSyncRow"]
