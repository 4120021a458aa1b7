"""E-mail verification by e-mailed link.

A link carries a random 256-bit code; only its SHA-256 is stored, in a row bound to one user and one address.
Opening the link while signed in as that user marks the address verified. Each code works once and expires
after `email.verificationLinkExpiry` seconds; wrong, expired, replayed and foreign codes are refused and
recorded in the audit log (entity `accounts.email`, action `verifyFailed`). Without `email.smtp` nothing is
sent and site admins mark addresses verified (AccountService.set_email_verified).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Self

from sqlalchemy import select, update

from codewell.accounts.audit import AuditService
from codewell.accounts.mail import Mailer, MailNotConfigured
from codewell.accounts.models import EmailVerificationRow, UserEmailRow, UserRow
from codewell.accounts.service import normalize_email
from codewell.authz import Action, UserRef, ensure
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound, QuotaExceeded
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

VERIFY_PATH = "/.auth/verify-email"
# A new link for the same address at most this often: the endpoint would otherwise relay mail on demand.
RESEND_INTERVAL = timedelta(seconds=60)
_CODE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)
NOT_CONFIGURED = (
    "e-mail verification links are not available: no SMTP relay is configured (email.smtp)",
    "ask a site admin to mark the address verified",
)
SendOutcome = Literal["sent", "notConfigured", "failed", "alreadyVerified"]


@dataclass(frozen=True, slots=True)
class VerifiedEmail:
    user_id: int
    email: str


class VerificationFailed(InvalidInput):
    """A verification link that cannot be used; `reason` is the audit reason."""

    def __init__(self, message: str, reason: str, *, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason


def _digest(code: str) -> bytes:
    return hashlib.sha256(code.encode()).digest()


class EmailVerificationService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = runtime.get(AuditService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def mail_configured(self) -> bool:
        """Whether verification links can be sent (`email.smtp` and `email.senderAddress` are set)."""
        return Mailer.from_runtime(self.runtime) is not None

    # -- sending ------------------------------------------------------------------------------------------
    def send_link(self, actor: Actor, user_id: int, email: str, *, ip: str = "", user_agent: str = "") -> None:
        """E-mail a fresh verification link for one of the user's unverified addresses (self or site admin).

        Raises MailNotConfigured without SMTP, NotFound when the user has no such address, InvalidInput when it
        is already verified, QuotaExceeded within RESEND_INTERVAL of the previous link, MailDeliveryFailed when
        the relay refuses; on failure to deliver, the new code is discarded."""
        ensure(actor, Action.USER_MANAGE, UserRef(user_id))
        mailer = Mailer.from_runtime(self.runtime)
        if mailer is None:
            raise MailNotConfigured(NOT_CONFIGURED[0], hint=NOT_CONFIGURED[1])
        address = normalize_email(email)
        code = secrets.token_urlsafe(32)
        now = utcnow()
        with self.runtime.db.session() as session:
            owned = session.scalar(
                select(UserEmailRow).where(UserEmailRow.user_id == user_id, UserEmailRow.email == address)
            )
            if owned is None:
                raise NotFound(f"user {user_id} has no e-mail address {address!r}")
            if owned.verified:
                raise InvalidInput(f"the e-mail address {address!r} is already verified")
            last = session.scalar(
                select(EmailVerificationRow.created_at)
                .where(EmailVerificationRow.user_id == user_id, EmailVerificationRow.email == address)
                .order_by(EmailVerificationRow.created_at.desc())
                .limit(1)
            )
            if last is not None and now - last < RESEND_INTERVAL:
                raise QuotaExceeded(
                    "a verification link was sent to this address less than a minute ago",
                    hint="check the inbox (and spam folder), or wait a minute and resend",
                )
            username = session.get(UserRow, user_id).username  # type: ignore[union-attr]  # row exists (FK)
            row = EmailVerificationRow(
                user_id=user_id,
                email=address,
                code_sha256=_digest(code),
                created_at=now,
                expires_at=now + timedelta(seconds=self.runtime.config.email_verification_link_expiry),
            )
            session.add(row)
            session.flush()
            row_id = row.id
        link = f"{self.runtime.external_url}{VERIFY_PATH}?code={code}"
        try:
            mailer.send(address, "Verify your e-mail address", self._body(username, address, link))
        except CodewellError:
            with self.runtime.db.session() as session:
                session.execute(
                    update(EmailVerificationRow).where(EmailVerificationRow.id == row_id).values(used_at=now)
                )
            raise
        self.audit.record(
            "accounts.email",
            "verificationSent",
            actor=actor,
            ip=ip,
            user_agent=user_agent,
            details={"userID": user_id, "email": address},
        )

    def after_email_added(self, actor: Actor, user_id: int, email: str) -> SendOutcome:
        """Send the first link for a just-added address; never raises (the address stays, resend is possible)."""
        if not self.mail_configured():
            return "notConfigured"
        try:
            self.send_link(actor, user_id, email)
        except InvalidInput as exc:
            if "already verified" in exc.message:
                return "alreadyVerified"
            log.warning("verification link for user %s not sent: %s", user_id, exc.message)
            return "failed"
        except CodewellError as exc:
            log.warning("verification link for user %s not sent: %s", user_id, exc.message)
            return "failed"
        return "sent"

    def _body(self, username: str, address: str, link: str) -> str:
        hours = self.runtime.config.email_verification_link_expiry // 3600
        lifetime = (
            f"{hours} hours" if hours >= 2 else f"{self.runtime.config.email_verification_link_expiry // 60} minutes"
        )
        return (
            f"Someone (hopefully you) added {address} to the codewell account {username!r}.\n\n"
            f"To verify the address, sign in as {username} and open this link within {lifetime}:\n\n"
            f"{link}\n\nThe link works once. If you did not add this address, ignore this message.\n"
        )

    # -- verifying ----------------------------------------------------------------------------------------
    def verify(self, actor: Actor, code: str, *, ip: str = "", user_agent: str = "") -> VerifiedEmail:
        """Mark the address of a live code verified; the actor must be the signed-in user the link was sent to.

        Raises VerificationFailed (400) for a malformed, unknown, used, expired or foreign code, or when the
        address left the account; each refusal is audited (never with the code)."""
        try:
            result = self._consume(actor, code)
        except VerificationFailed as exc:
            self.audit.record(
                "accounts.email", "verifyFailed", actor=actor, reason=exc.reason, ip=ip, user_agent=user_agent
            )
            raise
        self.audit.record(
            "accounts.email",
            "verified",
            actor=actor,
            reason="verification link",
            ip=ip,
            user_agent=user_agent,
            details={"userID": result.user_id, "email": result.email},
        )
        return result

    def _consume(self, actor: Actor, code: str) -> VerifiedEmail:
        again = "add the address again or use Resend on your e-mail settings page"
        if not _CODE.match(code):
            raise VerificationFailed("this verification link is malformed", "malformed code", hint=again)
        now = utcnow()
        with self.runtime.db.session() as session:
            row = session.scalar(select(EmailVerificationRow).where(EmailVerificationRow.code_sha256 == _digest(code)))
            if row is None:
                raise VerificationFailed("this verification link is not valid", "unknown code", hint=again)
            if row.used_at is not None:
                raise VerificationFailed("this verification link was already used", "replayed code", hint=again)
            if row.expires_at <= now:
                raise VerificationFailed("this verification link has expired", "expired code", hint=again)
            if not actor.is_user or actor.user_id != row.user_id:
                # Not consumed: the right user can still open it. Says nothing about whose link it is.
                raise VerificationFailed(
                    "this verification link belongs to another account",
                    "signed in as another user",
                    hint="sign in as the account the address was added to, then open the link again",
                )
            user_id, address = row.user_id, row.email
            # Conditional update: of two concurrent uses, exactly one sees its row change.
            claimed = session.execute(
                update(EmailVerificationRow)
                .where(EmailVerificationRow.id == row.id, EmailVerificationRow.used_at.is_(None))
                .values(used_at=now)
            )
            if claimed.rowcount != 1:  # type: ignore[attr-defined]
                raise VerificationFailed("this verification link was already used", "replayed code", hint=again)
            owned = session.scalar(
                select(UserEmailRow).where(UserEmailRow.user_id == user_id, UserEmailRow.email == address)
            )
            if owned is None:
                removed = True  # raised after the block so the spent code is committed
            else:
                removed = False
                owned.verified = True
            # Other outstanding links for the address are spent too: one verification, one live code at most.
            session.execute(
                update(EmailVerificationRow)
                .where(
                    EmailVerificationRow.user_id == user_id,
                    EmailVerificationRow.email == address,
                    EmailVerificationRow.used_at.is_(None),
                )
                .values(used_at=now)
            )
        if removed:
            raise VerificationFailed(
                "this e-mail address is no longer on your account", "address removed", hint="add it again"
            )
        return VerifiedEmail(user_id, address)
