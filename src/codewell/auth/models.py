"""Tables of the sign-in providers (migration branch `identities`): linked external accounts and the
pending sign-in flows (state, nonce, PKCE verifier) that make each provider callback single-use."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow


class ExternalAccountRow(Base):
    """An identity at an external provider linked to a user (one row per provider account).

    `auth_data` is the provider's OAuth token JSON encrypted with the instance secret (AES-GCM); it is kept
    for repository-permission sync and never leaves the server.
    """

    __tablename__ = "user_external_accounts"
    __table_args__ = (UniqueConstraint("service_type", "service_id", "client_id", "account_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    service_type: Mapped[str] = mapped_column(String(50))  # provider kind: github, openidconnect, ...
    service_id: Mapped[str] = mapped_column(String(500))  # code host URL, OIDC issuer, SAML IdP
    client_id: Mapped[str] = mapped_column(String(500), default="")
    account_id: Mapped[str] = mapped_column(String(500))  # the provider's stable ID of the account
    account_data: Mapped[str] = mapped_column(Text, default="{}")  # JSON: login, name, e-mails, groups
    auth_data: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)  # encrypted token JSON
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuthFlowRow(Base):
    """A sign-in started at a provider and not finished yet; deleted when its callback arrives (single use).

    Only hashes of `state` and of the browser-binding cookie are stored, so a database reader cannot
    finish someone else's sign-in.
    """

    __tablename__ = "auth_flows"

    state_sha256: Mapped[bytes] = mapped_column(LargeBinary(32), primary_key=True)
    browser_sha256: Mapped[bytes] = mapped_column(LargeBinary(32))
    provider_id: Mapped[str] = mapped_column(String(64))
    nonce: Mapped[str] = mapped_column(String(128), default="")
    code_verifier: Mapped[str] = mapped_column(String(128), default="")
    return_to: Mapped[str] = mapped_column(String(2000), default="/")
    # Set when a signed-in user connects an identity from account settings: the callback links it to this
    # user (who must still be signed in) instead of signing in.
    link_user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


__all__ = ["AuthFlowRow", "ExternalAccountRow"]
