"""Tables owned by the repos capability: registered repositories and who may read the private ones."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow


class RepoRow(Base):
    """One mirrored repository: where it comes from, its metadata and the state of its mirror."""

    __tablename__ = "repos"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(512), unique=True)
    # Where the row came from: "config:<kind>" (reconciled from site config) or "manual" (CLI/REST add).
    source: Mapped[str] = mapped_column(String(100), default="manual")
    kind: Mapped[str] = mapped_column(String(50), default="git")
    # The clone URL as shown to users: credentials removed.
    clone_url: Mapped[str] = mapped_column(Text)
    # Name of an environment variable holding credentials for https fetches ("user:token" or "token").
    credentials_env: Mapped[str | None] = mapped_column(String(200), default=None)
    description: Mapped[str] = mapped_column(Text, default="")
    default_branch: Mapped[str | None] = mapped_column(String(255), default=None)
    private: Mapped[bool] = mapped_column(Boolean, default=False)
    fork: Mapped[bool] = mapped_column(Boolean, default=False)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    stars: Mapped[int | None] = mapped_column(Integer, default=None)
    # Newline-separated branch names to index beyond the default branch.
    extra_branches: Mapped[str] = mapped_column(Text, default="")
    sync_interval_seconds: Mapped[int] = mapped_column(Integer, default=3600)
    sync_state: Mapped[str] = mapped_column(String(20), default="new")
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    last_fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    next_sync_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    # Consecutive failed syncs; drives the exponential back-off.
    failures: Mapped[int] = mapped_column(Integer, default=0)
    size_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ix_repos_next_sync_at", "next_sync_at"),
        # Visibility reads the public ids from this index alone (RepoService.readable_ids).
        Index("ix_repos_private", "private", "id"),
    )


class RepoPermission(Base):
    """A user may read a private repository (granted explicitly or synced from a code host)."""

    __tablename__ = "repo_permissions"

    repo_id: Mapped[int] = mapped_column(ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(String(50), default="explicit")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    # The ids granted to a user, read from the index alone (visibility); also serves the user's cascade.
    __table_args__ = (Index("ix_repo_permissions_user_repo", "user_id", "repo_id"),)
