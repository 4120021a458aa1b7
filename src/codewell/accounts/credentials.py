"""Credentials stored on accounts: password checks with lockout, password reset links and browser sessions.

Only accounts writes its tables (issue #15): the auth capability decides *how* someone signs in (pages, cookies,
audit entries with the client's address) and calls this service for everything that reads or writes `users`
and `user_sessions`. Obtain it with `runtime.get(CredentialService)`.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Self

from sqlalchemy import func, select

from codewell.accounts.audit import AuditService
from codewell.accounts.models import SessionRow, UserRow
from codewell.accounts.passwords import verify_password
from codewell.accounts.service import AccountService, User, to_user
from codewell.authz import Action, ensure
from codewell.core.errors import InvalidInput
from codewell.db.base import utcnow
from codewell.http.sessions import new_csrf_token, new_session_id

if TYPE_CHECKING:
    from codewell.core.actors import Actor
    from codewell.runtime import Runtime

SESSION_LIFETIME = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    user_id: int
    csrf_token: str
    expires_at: datetime


class Outcome(enum.Enum):
    """How a password check ended (the caller turns it into one message for every failure)."""

    OK = "ok"
    UNKNOWN = "unknown user or no password"
    LOCKED = "account locked"
    WRONG = "wrong password"


@dataclass(frozen=True, slots=True)
class PasswordCheck:
    outcome: Outcome
    # The account, when the password matched and the account is not locked.
    user: User | None = None
    # How long the lock lasts, set only when the account is locked AND the password was right (so the lock is
    # revealed only to whoever knows the password).
    locked_for: timedelta | None = None
    # This failure reached auth.lockout's threshold and locked the account.
    locked_now: bool = False


class CredentialService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.accounts = runtime.get(AccountService)
        self.audit = runtime.get(AuditService)
        self._key: bytes | None = None

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def _secret(self) -> bytes:
        # Read once: the key file never changes while the process runs.
        if self._key is None:
            self._key = self.runtime.secret_key()
        return self._key

    # -- passwords and lockout ----------------------------------------------------------------------------
    def check_password(self, username: str, password: str) -> PasswordCheck:
        """Verify `password` for `username` with exactly one argon2 verification whatever the outcome (an
        unknown user or a service account costs the same time), applying and updating auth.lockout."""
        with self.runtime.db.session() as session:
            row = session.scalar(select(UserRow).where(func.lower(UserRow.username) == username.strip().lower()))
            stored = row.password_hash if row is not None and not row.service_account else None
            user_id = row.id if row is not None else None
        matches = verify_password(stored, password)
        if user_id is None or stored is None:
            return PasswordCheck(Outcome.UNKNOWN)
        locked_for = self._locked_for(user_id)
        if locked_for is not None:
            return PasswordCheck(Outcome.LOCKED, locked_for=locked_for if matches else None)
        if not matches:
            return PasswordCheck(Outcome.WRONG, locked_now=self._record_failure(user_id))
        with self.runtime.db.session() as session:
            user_row = session.get(UserRow, user_id)
            assert user_row is not None
            user_row.failed_sign_ins = 0
            user_row.locked_until = None
            return PasswordCheck(Outcome.OK, user=to_user(user_row))

    def _locked_for(self, user_id: int) -> timedelta | None:
        with self.runtime.db.session() as session:
            row = session.get(UserRow, user_id)
            until = row.locked_until if row else None
        now = utcnow()
        return until - now if until is not None and until > now else None

    def _record_failure(self, user_id: int) -> bool:
        """Count a wrong password; True when it locks the account."""
        lockout = self.runtime.config.auth_lockout
        now = utcnow()
        with self.runtime.db.session() as session:
            row = session.get(UserRow, user_id)
            assert row is not None
            window_open = row.last_failed_at is not None and now - row.last_failed_at <= timedelta(
                seconds=lockout.consecutive_period
            )
            row.failed_sign_ins = (row.failed_sign_ins if window_open else 0) + 1
            row.last_failed_at = now
            locked = row.failed_sign_ins >= lockout.failed_attempt_threshold
            if locked:
                row.locked_until = now + timedelta(seconds=lockout.lockout_period)
                row.failed_sign_ins = 0
        return locked

    def unlock(self, actor: Actor, user_id: int) -> None:
        """End a sign-in lockout now (user managers only)."""
        ensure(actor, Action.USERS_MANAGE)
        with self.runtime.db.session() as session:
            row = session.get(UserRow, user_id)
            if row is not None:
                row.locked_until = None
                row.failed_sign_ins = 0
        self.audit.record("auth.signIn", "unlocked", actor=actor, details={"userID": user_id})

    # -- password reset links -----------------------------------------------------------------------------
    def password_reset_link(self, actor: Actor, user_id: int) -> str:
        """An absolute link that lets the user set a new password once, valid for
        auth.passwordResetLinkExpiry seconds (site admins only; it is shown to them to pass on)."""
        ensure(actor, Action.USERS_MANAGE)
        user = self.accounts.get_user(user_id)
        if user.service_account:
            raise InvalidInput("service accounts have no password", hint="create an access token instead")
        expires = int(utcnow().timestamp()) + self.runtime.config.auth_password_reset_link_expiry
        code = f"{expires}.{self.reset_mac(user_id, expires)}"
        self.audit.record("accounts.user", "passwordResetLinkCreated", actor=actor, details={"userID": user_id})
        return f"{self.runtime.external_url}/password-reset?userID={user_id}&code={code}"

    def check_reset_code(self, user_id: int, code: str) -> bool:
        """Whether `code` is a live reset code for the user (it dies once the password changes)."""
        expires_text, _, mac = code.partition(".")
        if not expires_text.isdigit() or int(expires_text) < utcnow().timestamp():
            return False
        return hmac.compare_digest(mac, self.reset_mac(user_id, int(expires_text)))

    def reset_password(self, user_id: int, code: str, password: str) -> None:
        if not self.check_reset_code(user_id, code):
            raise InvalidInput(
                "this password reset link is invalid or has expired", hint="ask a site admin for a new one"
            )
        self.accounts.reset_password_with_link(user_id, password)

    def reset_mac(self, user_id: int, expires: int) -> str:
        """The MAC of a reset code; it covers the current password hash, so a used link dies with it."""
        with self.runtime.db.session() as session:
            row = session.get(UserRow, user_id)
            fingerprint = "missing" if row is None else (row.password_hash or "")
        message = f"reset:{user_id}:{expires}:{fingerprint}".encode()
        return hmac.new(self._secret(), message, hashlib.sha256).hexdigest()

    # -- sessions -----------------------------------------------------------------------------------------
    def create_session(self, user_id: int, *, ip: str, user_agent: str) -> SessionInfo:
        """Store a new browser session (the caller signs its ID into the cookie)."""
        row = SessionRow(
            id=new_session_id(),
            user_id=user_id,
            csrf_token=new_csrf_token(),
            expires_at=utcnow() + SESSION_LIFETIME,
            ip=ip[:64],
            user_agent=user_agent[:512],
        )
        with self.runtime.db.session() as session:
            session.add(row)
        return SessionInfo(row.id, row.user_id, row.csrf_token, row.expires_at)

    def session_user(self, session_id: str) -> tuple[User, SessionInfo] | None:
        """The user of a live session, or None (signed out, expired, deleted, or a service account)."""
        with self.runtime.db.session() as session:
            found = session.execute(
                select(SessionRow, UserRow)
                .join(UserRow, UserRow.id == SessionRow.user_id)
                .where(SessionRow.id == session_id)
            ).first()
            if found is None:
                return None
            row, user_row = found
            if row.expires_at <= utcnow() or user_row.service_account:
                return None
            return to_user(user_row), SessionInfo(row.id, row.user_id, row.csrf_token, row.expires_at)

    def delete_session(self, session_id: str) -> None:
        with self.runtime.db.session() as session:
            row = session.get(SessionRow, session_id)
            if row is not None:
                session.delete(row)
