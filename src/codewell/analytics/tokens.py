"""Analytics access tokens: `cwa_` + 40 hex characters, sent as `Authorization: Bearer <token>`.

Only the SHA-256 of the 20 random bytes is stored. A token acts as its creator with the creator's *current*
flags (read at every use), and only on the analytics API: it authenticates through a bearer resolver that
gives it the single scope `analytics`, which the authentication middleware confines to `/analytics/api/`.
A creator who loses site admin loses instance-wide reports at once; a deleted creator's tokens vanish.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Self

from sqlalchemy import select

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService
from codewell.analytics.models import AnalyticsTokenRow
from codewell.authz import Action, UserRef, allowed, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

ANALYTICS_TOKEN_PREFIX = "cwa_"
ANALYTICS_TOKEN_PATTERN = re.compile(r"^cwa_[0-9a-f]{40}$")
SCOPE_ANALYTICS = "analytics"
MAX_DISPLAY_NAME = 255
# Writing last_used_at on every request would turn reads into writes; once a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class AnalyticsTokenInfo:
    """Token metadata (never the secret)."""

    id: int
    user_id: int
    display_name: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= utcnow()

    def as_json(self) -> dict[str, object]:
        """The list shape of the older analytics API: {id, displayName, createdAt, expiresAt, isExpired}."""
        return {
            "id": str(self.id),
            "displayName": self.display_name,
            "createdAt": self.created_at.isoformat(),
            "expiresAt": self.expires_at.isoformat() if self.expires_at else None,
            "isExpired": self.is_expired,
            "lastUsedAt": self.last_used_at.isoformat() if self.last_used_at else None,
        }


def analytics_token_digest(raw: str) -> bytes | None:
    """SHA-256 of the token's random bytes, or None when `raw` is not shaped like an analytics token."""
    if not ANALYTICS_TOKEN_PATTERN.match(raw):
        return None
    return hashlib.sha256(bytes.fromhex(raw[len(ANALYTICS_TOKEN_PREFIX) :])).digest()


def _info(row: AnalyticsTokenRow) -> AnalyticsTokenInfo:
    return AnalyticsTokenInfo(row.id, row.user_id, row.display_name, row.created_at, row.expires_at, row.last_used_at)


def _require_manager(actor: Actor) -> int:
    """The user ID of an actor allowed to manage their own analytics tokens. Analytics tokens themselves
    may not (codewell.authz credential table): a leaked reporting token must not be able to mint successors
    that outlive its revocation."""
    own = UserRef(actor.user_id) if actor.is_user and actor.user_id is not None else None
    ensure(actor, Action.ANALYTICS_TOKENS_MANAGE, own)
    assert actor.user_id is not None  # a user (anonymous callers were refused)
    return actor.user_id


class AnalyticsTokenService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.accounts = runtime.get(AccountService)
        self.audit = runtime.get(AuditService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def create_token(
        self, actor: Actor, display_name: str, expires_at: datetime | None = None, *, user_id: int | None = None
    ) -> tuple[str, AnalyticsTokenInfo]:
        """Create a token for the actor (or, for site admins and the CLI, for `user_id`); returns (raw token,
        metadata). The raw token is shown once and never stored."""
        if actor.is_internal:
            if user_id is None:
                raise InvalidInput("name the user the token acts as", hint="pass --user USERNAME")
            owner = user_id
        else:
            owner = _require_manager(actor)
            if user_id is not None and user_id != owner:
                ensure(actor, Action.ANALYTICS_TOKENS_MANAGE, UserRef(user_id))
                owner = user_id
        self.accounts.get_user(owner)  # NotFound for a missing user
        name = display_name.strip()
        if not name:
            raise InvalidInput("displayName is required", hint="say what the token is for, e.g. 'BI export'")
        if len(name) > MAX_DISPLAY_NAME:
            raise InvalidInput(f"displayName must be at most {MAX_DISPLAY_NAME} characters")
        if expires_at is not None and expires_at <= utcnow():
            raise InvalidInput("expiresAt must be in the future", hint="omit it for a token that never expires")
        secret = secrets.token_bytes(20)
        row = AnalyticsTokenRow(
            user_id=owner,
            display_name=name,
            token_sha256=hashlib.sha256(secret).digest(),
            created_at=utcnow(),
            expires_at=expires_at,
        )
        with self.runtime.db.session() as session:
            session.add(row)
            session.flush()
            info = _info(row)
        self.audit.record(
            "analytics.accessToken", "created", actor=actor, details={"tokenID": info.id, "userID": owner}
        )
        return ANALYTICS_TOKEN_PREFIX + secret.hex(), info

    def list_tokens(self, actor: Actor, user_id: int | None = None) -> list[AnalyticsTokenInfo]:
        """Live (unrevoked) tokens of the actor, or of `user_id` for site admins and the CLI; newest first."""
        if actor.is_internal:
            owner = user_id
        else:
            owner = _require_manager(actor)
            if user_id is not None and user_id != owner:
                ensure(actor, Action.ANALYTICS_TOKENS_MANAGE, UserRef(user_id))
                owner = user_id
        stmt = select(AnalyticsTokenRow).where(AnalyticsTokenRow.revoked_at.is_(None))
        if owner is not None:
            stmt = stmt.where(AnalyticsTokenRow.user_id == owner)
        with self.runtime.db.session() as session:
            rows = session.scalars(stmt.order_by(AnalyticsTokenRow.id.desc()))
            return [_info(row) for row in rows]

    def revoke(self, actor: Actor, token_id: int) -> None:
        """Revoke a token of the actor (site admins and the CLI: any token); NotFound for others' tokens."""
        manager = None if actor.is_internal else _require_manager(actor)
        with self.runtime.db.session() as session:
            row = session.get(AnalyticsTokenRow, token_id)
            visible = row is not None and (
                manager is None or allowed(actor, Action.ANALYTICS_TOKENS_MANAGE, UserRef(row.user_id))
            )
            if row is None or not visible or row.revoked_at is not None:
                raise NotFound(f"analytics access token {token_id} not found")
            row.revoked_at = utcnow()
            owner = row.user_id
        self.audit.record(
            "analytics.accessToken", "revoked", actor=actor, details={"tokenID": token_id, "userID": owner}
        )

    def authenticate(self, raw: str) -> Actor | None:
        """The creator acting through this token (flags read now), or None for unknown, revoked or expired
        tokens and tokens of deleted users. Registered as a bearer resolver by `analytics.setup`."""
        digest = analytics_token_digest(raw)
        if digest is None:
            return None
        now = utcnow()
        with self.runtime.db.session() as session:
            row = session.scalar(
                select(AnalyticsTokenRow).where(
                    AnalyticsTokenRow.token_sha256 == digest, AnalyticsTokenRow.revoked_at.is_(None)
                )
            )
            if row is None or (row.expires_at is not None and row.expires_at <= now):
                return None
            if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
                row.last_used_at = now
            user_id = row.user_id
        try:
            user = self.accounts.get_user(user_id)
        except NotFound:
            return None
        return self.accounts.actor_for(user, via="access_token", scopes=frozenset({SCOPE_ANALYTICS}))
