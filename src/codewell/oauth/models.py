"""Tables owned by the OAuth authorization server: clients, authorization codes and tokens.

Secrets, codes and tokens are stored as SHA-256 hashes only; the raw values are shown once.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow


class OAuthClientRow(Base):
    """A client: registered dynamically (RFC 7591), pre-registered by an admin, or a fetched metadata document."""

    __tablename__ = "oauth_clients"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Opaque for dynamic/static clients; the document URL for Client ID Metadata Documents.
    client_id: Mapped[str] = mapped_column(String(512), unique=True)
    kind: Mapped[str] = mapped_column(String(20))  # "dynamic" | "static" | "metadata"
    client_name: Mapped[str] = mapped_column(String(255), default="")
    client_uri: Mapped[str] = mapped_column(String(512), default="")
    redirect_uris: Mapped[str] = mapped_column(Text)  # JSON array
    token_endpoint_auth_method: Mapped[str] = mapped_column(String(40), default="none")
    client_secret_sha256: Mapped[bytes | None] = mapped_column(LargeBinary(32), nullable=True)
    scope: Mapped[str] = mapped_column(String(100), default="mcp")
    software_id: Mapped[str] = mapped_column(String(255), default="")
    software_version: Mapped[str] = mapped_column(String(100), default="")
    created_by_user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When a metadata document was last fetched (re-fetched when older than the cache period).
    fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class OAuthCodeRow(Base):
    """A single-use authorization code bound to client, user, redirect URI, PKCE challenge and resource."""

    __tablename__ = "oauth_codes"

    code_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), primary_key=True)
    client_pk: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    redirect_uri: Mapped[str] = mapped_column(String(2048))
    code_challenge: Mapped[str] = mapped_column(String(128))
    resource: Mapped[str] = mapped_column(String(2048))
    scope: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class OAuthTokenRow(Base):
    """An access or refresh token. `family` ties every token descended from one code together, so a
    replayed code or a reused refresh token revokes the whole family."""

    __tablename__ = "oauth_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    kind: Mapped[str] = mapped_column(String(10))  # "access" | "refresh"
    client_pk: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(String(100))
    resource: Mapped[str] = mapped_column(String(2048))
    family: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)  # refresh tokens: single use
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
