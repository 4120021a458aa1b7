"""Tables owned by accounts: users, e-mails, sessions, access tokens, roles, permissions and the audit log."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow


class UserRow(Base):
    """One account. Deleting the row cascades to e-mails, sessions, tokens, role assignments and grants."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(255), unique=True)
    display_name: Mapped[str] = mapped_column(String(255), default="")
    # argon2id hash; None for service accounts and users who only sign in through external providers.
    password_hash: Mapped[str | None] = mapped_column(String(255), nullable=True)
    site_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    service_account: Mapped[bool] = mapped_column(Boolean, default=False)
    # Lockout bookkeeping (auth.lockout): consecutive failures and when the lock ends.
    failed_sign_ins: Mapped[int] = mapped_column(Integer, default=0)
    last_failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class UserEmailRow(Base):
    """An e-mail address of a user (stored lower-cased: one address belongs to one account)."""

    __tablename__ = "user_emails"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    is_primary: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EmailVerificationRow(Base):
    """An e-mailed verification link: only the SHA-256 of its random code is stored. The row binds the code
    to one user and one address; `used_at` makes it single-use (kept so a replay is told apart from a typo)."""

    __tablename__ = "email_verifications"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(320))
    code_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SessionRow(Base):
    """A browser session; the signed cookie carries `id`, the row makes sign-out and deletion immediate."""

    __tablename__ = "user_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ip: Mapped[str] = mapped_column(String(64), default="")
    user_agent: Mapped[str] = mapped_column(String(512), default="")


class AccessTokenRow(Base):
    """An access token; only the SHA-256 of its 20 random bytes is stored. Revoking sets deleted_at."""

    __tablename__ = "access_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    creator_user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    token_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    note: Mapped[str] = mapped_column(String(255), default="")
    scopes: Mapped[str] = mapped_column(String(255))  # space-separated, sorted
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class RoleRow(Base):
    """A role: the two system roles (`User`, `Site Administrator`) or a custom one."""

    __tablename__ = "roles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    system: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RolePermissionRow(Base):
    __tablename__ = "role_permissions"

    role_id: Mapped[int] = mapped_column(ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True)
    permission: Mapped[str] = mapped_column(String(100), primary_key=True)


class UserRoleRow(Base):
    """Explicit assignment of a custom role (system roles follow from the user's flags, never stored here)."""

    __tablename__ = "user_roles"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    role_id: Mapped[int] = mapped_column(ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True, index=True)


class AuditEntryRow(Base):
    """Append-only security log. The actor is copied (no foreign key) so entries outlive deleted users."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_entity_action", "entity", "action"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    entity: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(100))
    actor_user_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    actor_username: Mapped[str] = mapped_column(String(255), default="")
    reason: Mapped[str] = mapped_column(String(500), default="")
    ip: Mapped[str] = mapped_column(String(64), default="")
    user_agent: Mapped[str] = mapped_column(String(512), default="")
    details: Mapped[str] = mapped_column(Text, default="{}")  # JSON object, never a secret


__all__ = [
    "AccessTokenRow",
    "AuditEntryRow",
    "EmailVerificationRow",
    "RolePermissionRow",
    "RoleRow",
    "SessionRow",
    "UserEmailRow",
    "UserRoleRow",
    "UserRow",
]
