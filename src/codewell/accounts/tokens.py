"""Access tokens: `cwp_` + 40 hex characters (20 random bytes), stored only as SHA-256 of the raw bytes.

Revoked (soft-deleted), expired and deleted-user tokens stop authenticating on the next request, in every
process: a token's owner is remembered per process only while the `accounts` cache epoch stays the same, and
every change of tokens or users bumps it in its transaction (codewell/db/epochs.py).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select, update

from codewell.accounts.audit import AuditService
from codewell.accounts.models import AccessTokenRow, UserRow
from codewell.accounts.service import AccountService
from codewell.authz import Action, UserRef, allowed, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied, StorageUnavailable
from codewell.db.base import utcnow
from codewell.db.database import BEST_EFFORT_LOCK_TIMEOUT
from codewell.db.epochs import CacheEpochs

if TYPE_CHECKING:
    from codewell.runtime import Runtime

TOKEN_PREFIX = "cwp_"
TOKEN_PATTERN = re.compile(r"^cwp_[0-9a-f]{40}$")
SCOPE_USER_ALL = "user:all"
SCOPE_SUDO = "site-admin:sudo"
SCOPE_MCP = "mcp"
SCOPES: dict[str, str] = {
    SCOPE_USER_ALL: "everything the user can do",
    SCOPE_SUDO: "act as any user with the token-sudo header (site admins only)",
    SCOPE_MCP: "only the MCP tool server endpoints (/.api/mcp)",
}
# Writing last_used_at on every request would turn reads into writes; once a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# After a failed last_used_at write (a storage fault), this process stops trying for this long: the write is
# bookkeeping, and each attempt would cost the request that makes it the short lock wait again.
TOUCH_BACKOFF = 30.0
MAX_NOTE = 255
# Owners of tokens remembered per process (a busy instance has far fewer live tokens; past this, start over).
OWNER_CACHE_ENTRIES = 10_000
# Built once: authentication runs on every request, and constructing the statement costs more than running it.
_OWNER_QUERY = (
    select(
        AccessTokenRow.id,
        AccessTokenRow.scopes,
        AccessTokenRow.expires_at,
        AccessTokenRow.last_used_at,
        UserRow.id,
        UserRow.username,
        UserRow.site_admin,
        UserRow.service_account,
    )
    .join(UserRow, UserRow.id == AccessTokenRow.user_id)
    .where(AccessTokenRow.token_sha256 == bindparam("digest"), AccessTokenRow.deleted_at.is_(None))
)
_TOUCH = (
    update(AccessTokenRow)
    .where(AccessTokenRow.id == bindparam("token_id"))
    .values(last_used_at=bindparam("now"))
    .execution_options(synchronize_session=False)
)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: int
    user_id: int
    note: str
    scopes: tuple[str, ...]
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None

    def state(self, now: datetime) -> str:
        """ "revoked", "expired" or "active": whether the token works right now, and if not, why."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def as_json(self) -> dict[str, object]:
        def iso(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "id": self.id,
            "userID": self.user_id,
            "note": self.note,
            "scopes": list(self.scopes),
            "createdAt": iso(self.created_at),
            "expiresAt": iso(self.expires_at),
            "lastUsedAt": iso(self.last_used_at),
            "revokedAt": iso(self.revoked_at),
        }


@dataclass(frozen=True, slots=True)
class TokenOwner:
    """A successfully authenticated token: its owner as an Actor and the token's ID (for audit entries)."""

    actor: Actor
    token_id: int


def token_digest(raw: str) -> bytes | None:
    """SHA-256 of the token's 20 random bytes, or None when `raw` is not shaped like a codewell token."""
    if not TOKEN_PATTERN.match(raw):
        return None
    return hashlib.sha256(bytes.fromhex(raw[len(TOKEN_PREFIX) :])).digest()


def _info(row: AccessTokenRow) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        user_id=row.user_id,
        note=row.note,
        scopes=tuple(row.scopes.split()),
        created_at=row.created_at,
        expires_at=row.expires_at,
        last_used_at=row.last_used_at,
        revoked_at=row.deleted_at,
    )


class TokenService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.accounts = runtime.get(AccountService)
        self.audit = runtime.get(AuditService)
        self._touch_lock = threading.Lock()
        self._touching: set[int] = set()
        self._touch_paused_until = 0.0
        self.epochs = runtime.get(CacheEpochs)
        db = runtime.db
        # The owner's read outside a transaction on PostgreSQL: one round trip instead of three (BEGIN, the
        # SELECT, the pool's ROLLBACK); SQLite's driver would pay more to switch its mode than that saves.
        self._reading = db.engine if db.is_sqlite else db.engine.execution_options(isolation_level="AUTOCOMMIT")
        # token digest → (the accounts epoch read before the row, the row of _OWNER_QUERY); unknown tokens are
        # not remembered (anyone may send any number of them).
        self._owners: dict[bytes, tuple[int | None, tuple[Any, ...]]] = {}
        self._owners_lock = threading.Lock()

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> Any:
        """By contract `create` means two things: `TokenService.create(runtime)` builds the service (what
        `runtime.get` calls) and `service.create(actor, user_id, note, scopes, expires_in_days)` creates a
        token, exactly like the typed `create_token`. A descriptor installed below the class dispatches."""
        raise AssertionError("replaced by _CreateDispatch")  # pragma: no cover

    def create_token(
        self,
        actor: Actor,
        user_id: int,
        note: str,
        scopes: Iterable[str] = (SCOPE_USER_ALL,),
        expires_in_days: int | None = None,
    ) -> tuple[str, TokenInfo]:
        """Create a token for `user_id` and return (raw token, info); the raw token is never stored or shown
        again. `expires_in_days=None` means no expiry (allowed unless auth.accessTokens.allowNoExpiration is
        false). The owner themself or a site admin may create one, as `auth.accessTokens.allow` permits."""
        wanted = self._check_scopes(actor, scopes)
        note = note.strip()
        if len(note) > MAX_NOTE:
            raise InvalidInput(f"a token note must be at most {MAX_NOTE} characters")
        self._check_allowed(actor, user_id)
        expires_at = self._expiry(expires_in_days)
        user = self.accounts.get_user(user_id)
        if SCOPE_SUDO in wanted and not user.site_admin:
            raise PermissionDenied(f"the {SCOPE_SUDO} scope is only for tokens of site admins")
        token_bytes = secrets.token_bytes(20)
        raw = TOKEN_PREFIX + token_bytes.hex()
        with self.runtime.db.session() as session:
            row = AccessTokenRow(
                user_id=user_id,
                creator_user_id=actor.user_id,
                token_sha256=hashlib.sha256(token_bytes).digest(),
                note=note,
                scopes=" ".join(sorted(wanted)),
                expires_at=expires_at,
            )
            session.add(row)
            session.flush()
            info = _info(row)
        self.audit.record(
            "auth.accessToken",
            "created",
            actor=actor,
            details={"tokenID": info.id, "user": user.username, "scopes": list(info.scopes), "note": note},
        )
        return raw, info

    def authenticate(self, raw: str) -> Actor | None:
        """The owner of a live token as an Actor (via "access_token", the token's scopes), else None."""
        owner = self.authenticate_owner(raw)
        return owner.actor if owner else None

    def authenticate_owner(self, raw: str) -> TokenOwner | None:
        """Like `authenticate`, also naming the token; None for unknown, revoked, expired or orphaned tokens.

        The token row and its user are remembered while the accounts cache epoch stays the same, and every
        revocation, deleted user or changed site-admin flag bumps it in its transaction, so it applies on the very
        next request in every process; expiry is checked on each call. `last_used_at` is written at most once a
        minute per token (see `_touch`).
        """
        digest = token_digest(raw)
        if digest is None:
            return None
        now = utcnow()
        found = self._owner_row(digest)
        if found is None:
            return None
        token_id, scopes, expires_at, last_used_at, user_id, username, site_admin, service_account = found
        if expires_at is not None and expires_at <= now:
            return None
        if last_used_at is None or now - last_used_at >= LAST_USED_RESOLUTION:
            self._touch(token_id, now)
            self._touched(digest, now)
        # The same Actor AccountService.actor_for builds, without materializing a User.
        actor = Actor.user(
            user_id,
            username,
            site_admin=site_admin,
            service_account=service_account,
            scopes=frozenset(scopes.split()),
            via="access_token",
        )
        return TokenOwner(actor=actor, token_id=token_id)

    def _owner_row(self, digest: bytes) -> tuple[Any, ...] | None:
        """The row of a live (not revoked) token and its user: remembered while the accounts epoch, read first,
        stays the same; else read again (one prepared Core select by hash, no ORM objects)."""
        epoch = self.epochs.current().accounts
        with self._owners_lock:
            entry = self._owners.get(digest)
        if entry is not None and entry[0] == epoch:
            return entry[1]
        with self._reading.connect() as connection:
            found = connection.execute(_OWNER_QUERY, {"digest": digest}).first()
        if found is None:
            return None
        row = tuple(found)
        with self._owners_lock:
            if len(self._owners) >= OWNER_CACHE_ENTRIES:
                self._owners.clear()
            self._owners[digest] = (epoch, row)
        return row

    def _touched(self, digest: bytes, now: datetime) -> None:
        """Remember the use just recorded (its write bumps no epoch), so the next requests do not write it again."""
        with self._owners_lock:
            entry = self._owners.get(digest)
            if entry is not None:
                self._owners[digest] = (entry[0], (*entry[1][:3], now, *entry[1][4:]))

    def _touch(self, token_id: int, now: datetime) -> None:
        """Record a use; concurrent requests of the same token in this process write it once, not each.

        Best effort: the request being authenticated may be a read, which must not fail, nor wait the busy
        timeout, because this bookkeeping write cannot be made. It waits at most BEST_EFFORT_LOCK_TIMEOUT for
        the write lock; on a storage fault the use goes unrecorded (the database layer logs the fault once)
        and this process pauses its touches for TOUCH_BACKOFF seconds.
        """
        with self._touch_lock:
            if token_id in self._touching or time.monotonic() < self._touch_paused_until:
                return
            self._touching.add(token_id)
        try:
            with self.runtime.db.session(lock_timeout=BEST_EFFORT_LOCK_TIMEOUT) as session:
                session.execute(_TOUCH, {"token_id": token_id, "now": now})
        except StorageUnavailable:
            with self._touch_lock:
                self._touch_paused_until = time.monotonic() + TOUCH_BACKOFF
        finally:
            with self._touch_lock:
                self._touching.discard(token_id)

    def list(self, actor: Actor, user_id: int, *, include_revoked: bool = False) -> list[TokenInfo]:
        """The user's tokens, newest first (the owner or a site admin); never the secrets."""
        ensure(actor, Action.TOKENS_MANAGE, UserRef(user_id))
        query = select(AccessTokenRow).where(AccessTokenRow.user_id == user_id).order_by(AccessTokenRow.id.desc())
        if not include_revoked:
            query = query.where(AccessTokenRow.deleted_at.is_(None))
        with self.runtime.db.session() as session:
            return [_info(row) for row in session.scalars(query)]

    def get(self, actor: Actor, token_id: int) -> TokenInfo:
        """One token the actor may see; NotFound for others' tokens (they read as missing)."""
        with self.runtime.db.session() as session:
            row = session.get(AccessTokenRow, token_id)
            if row is None or not allowed(actor, Action.TOKENS_MANAGE, UserRef(row.user_id)):
                raise NotFound(f"access token {token_id} not found")
            return _info(row)

    def revoke(self, actor: Actor, token_id: int) -> TokenInfo:
        """Revoke (soft-delete) a token of the actor's own, or any token for a site admin; idempotent."""
        with self.runtime.db.session() as session:
            row = session.get(AccessTokenRow, token_id)
            if row is None or not allowed(actor, Action.TOKENS_MANAGE, UserRef(row.user_id)):
                raise NotFound(f"access token {token_id} not found", hint="list your tokens to see their IDs")
            already = row.deleted_at is not None
            if not already:
                row.deleted_at = utcnow()
            info = _info(row)
        if not already:
            self.audit.record("auth.accessToken", "revoked", actor=actor, details={"tokenID": token_id})
        return info

    # -- helpers ------------------------------------------------------------------------------------------
    def _check_allowed(self, actor: Actor, user_id: int) -> None:
        ensure(actor, Action.TOKENS_MANAGE, UserRef(user_id))
        allow = self.runtime.config.auth_access_tokens.allow
        if actor.is_internal:
            return
        if allow == "none":
            raise PermissionDenied("access tokens are disabled on this instance", hint="auth.accessTokens.allow")
        if allow == "site-admin-create" and not allowed(actor, Action.SITE_ADMIN):
            raise PermissionDenied(
                "only site admins can create access tokens on this instance", hint="auth.accessTokens.allow"
            )

    @staticmethod
    def _check_scopes(actor: Actor, scopes: Iterable[str]) -> frozenset[str]:
        wanted = frozenset(s.strip() for s in scopes if s.strip())
        if not wanted:
            raise InvalidInput("an access token needs at least one scope", hint=f"scopes: {', '.join(SCOPES)}")
        unknown = sorted(wanted - SCOPES.keys())
        if unknown:
            raise InvalidInput(f"unknown token scope {unknown[0]!r}", hint=f"scopes: {', '.join(SCOPES)}")
        if SCOPE_SUDO in wanted:
            ensure(actor, Action.TOKENS_SUDO)
        return wanted

    def _expiry(self, expires_in_days: int | None) -> datetime | None:
        options = self.runtime.config.auth_access_tokens
        if expires_in_days is None:
            if not options.allow_no_expiration:
                raise InvalidInput(
                    "access tokens must expire on this instance",
                    hint=f"choose an expiry in days: {', '.join(map(str, options.expiration_option_days))}",
                )
            return None
        allowed = sorted({*options.expiration_option_days, options.default_expiration_days})
        if expires_in_days not in allowed:
            raise InvalidInput(
                f"an access token cannot expire in {expires_in_days} days",
                hint=f"choose one of {', '.join(map(str, allowed))} (auth.accessTokens.expirationOptionDays)",
            )
        return utcnow() + timedelta(days=expires_in_days)


class _CreateDispatch:
    """`TokenService.create(runtime)` on the class, `service.create(actor, ...)` (= create_token) on an instance."""

    def __get__(self, obj: TokenService | None, owner: type[TokenService]) -> Callable[..., Any]:
        if obj is None:
            return owner
        return obj.create_token


setattr(TokenService, "create", _CreateDispatch())  # noqa: B010 - replaces the typed classmethod placeholder
