"""Linking external identities to accounts (spec "Linking accounts"; behaviour notes §3).

Order at every external sign-in:
1. an identity already linked (same provider kind, service, client and account ID) signs in its user;
2. http-header only: an account with the same username;
3. an account holding a verified e-mail equal to a verified e-mail of the external account;
4. a new account when the provider allows sign-up, with the normalized username (rules 1-7) and on a
   clash one retry with `-` + five random lowercase letters.
Username and e-mails are set once, at creation; later sign-ins only refresh the stored token and data.
The provider's OAuth token is stored encrypted (AES-GCM, key derived from the instance secret).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import select

from codewell.accounts.audit import AuditService
from codewell.accounts.service import AccountService, User, normalize_email
from codewell.accounts.usernames import normalize_username, with_random_suffix
from codewell.auth.models import ExternalAccountRow
from codewell.authz import Action, UserRef, ensure
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.auth.service import ClientInfo
    from codewell.runtime import Runtime

NO_VERIFIED_EMAIL = (
    "Your account at {provider} could not be linked to an account here because no verified email was provided."
)
NO_VERIFIED_EMAIL_HINT = "verify an e-mail address at {provider}, then sign in again"
SIGNUP_DISABLED = (
    "User account with verified email {email!r} does not exist. "
    "Ask a site admin to create your account and then verify your email."
)
_NONCE_BYTES = 12
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExternalAccount:
    """What a provider told us about the person signing in (already authenticated by the provider)."""

    kind: str  # provider kind (github, gitlab, openidconnect, saml, http-header, ...)
    service_id: str  # code host URL, issuer, IdP
    client_id: str
    account_id: str  # the provider's stable ID for the account
    username: str  # the provider's login (normalized before use)
    display_name: str = ""
    verified_emails: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)  # shown to admins; never secrets
    token: dict[str, Any] | None = None  # OAuth token response: encrypted at rest


@dataclass(frozen=True, slots=True)
class LinkPolicy:
    """How one provider entry may link: its label (for messages) and its sign-up rules."""

    label: str
    allow_signup: bool
    link_by_username: bool = False  # http-header only (discouraged: usernames are mutable)
    single_identity_per_user: bool = False


@dataclass(frozen=True, slots=True)
class Identity:
    id: int
    user_id: int
    kind: str
    service_id: str
    client_id: str
    account_id: str
    data: dict[str, Any]


class TokenCipher:
    """AES-256-GCM with a key derived from the instance secret; output is nonce || ciphertext+tag."""

    def __init__(self, secret: bytes) -> None:
        self._aead = AESGCM(hashlib.sha256(b"codewell external account tokens\n" + secret).digest())

    def encrypt(self, value: dict[str, Any]) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, json.dumps(value, sort_keys=True).encode(), b"auth_data")

    def decrypt(self, blob: bytes) -> dict[str, Any]:
        """The token; raises cryptography's InvalidTag when the blob was altered or the secret changed."""
        plain = self._aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], b"auth_data")
        loaded: dict[str, Any] = json.loads(plain)
        return loaded


def _identity(row: ExternalAccountRow) -> Identity:
    return Identity(
        row.id,
        row.user_id,
        row.service_type,
        row.service_id,
        row.client_id,
        row.account_id,
        json.loads(row.account_data),
    )


def _username_for(account: ExternalAccount, emails: list[str]) -> str:
    """The normalized username for a new account: the provider's login, else the e-mail's local part."""
    for candidate in (account.username, *emails[:1]):
        try:
            return normalize_username(candidate)
        except InvalidInput:
            continue
    raise InvalidInput(
        f"The username {account.username[:64]!r} from the provider cannot be turned into a valid username.",
        hint="ask a site admin to create your account",
    )


class IdentityService:
    """Finds or creates the account of an external identity and keeps the identity (with its token)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.accounts = runtime.get(AccountService)
        self.audit = runtime.get(AuditService)
        # Called with the identity after each sign-in or link (repository-permission sync on sign-in).
        self.listeners: list[Callable[[Identity], None]] = []

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def _cipher(self) -> TokenCipher:
        return TokenCipher(self.runtime.secret_key())

    # -- reading ------------------------------------------------------------------------------------------
    def list_identities(self, actor: Actor, user_id: int) -> list[Identity]:
        """The identities linked to a user (the user themself or a site admin)."""
        ensure(actor, Action.USER_READ, UserRef(user_id))
        with self.runtime.db.session() as session:
            rows = session.scalars(select(ExternalAccountRow).where(ExternalAccountRow.user_id == user_id))
            return [_identity(r) for r in rows]

    def token_of(self, actor: Actor, identity_id: int) -> dict[str, Any] | None:
        """The decrypted OAuth token of an identity, for repository-permission sync (INTERNAL only)."""
        ensure(actor, Action.IDENTITY_SECRETS_READ)
        with self.runtime.db.session() as session:
            row = session.get(ExternalAccountRow, identity_id)
            if row is None:
                raise NotFound(f"linked account {identity_id} not found")
            blob = row.auth_data
        return self._cipher().decrypt(blob) if blob else None

    def of_service(self, kind: str, service_id: str, user_id: int | None = None) -> list[Identity]:
        """Identities linked at one provider (kind and service URL), of one user when given."""
        statement = select(ExternalAccountRow).where(
            ExternalAccountRow.service_type == kind, ExternalAccountRow.service_id == service_id
        )
        if user_id is not None:
            statement = statement.where(ExternalAccountRow.user_id == user_id)
        with self.runtime.db.session() as session:
            return [_identity(r) for r in session.scalars(statement.order_by(ExternalAccountRow.id))]

    def replace_token(self, identity_id: int, token: dict[str, Any]) -> None:
        """Store a refreshed OAuth token for an identity (encrypted)."""
        blob = self._cipher().encrypt(token)
        with self.runtime.db.session() as session:
            row = session.get(ExternalAccountRow, identity_id)
            if row is not None:
                row.auth_data = blob
                row.updated_at = utcnow()

    def _linked(self, identity: Identity) -> None:
        for listener in list(self.listeners):
            try:
                listener(identity)
            except Exception:
                # A listener (repository-permission sync) must never fail a sign-in.
                log.exception("identity listener failed", extra={"user_id": identity.user_id})

    def find(self, account: ExternalAccount) -> Identity | None:
        with self.runtime.db.session() as session:
            row = session.scalar(self._select(account))
            return _identity(row) if row else None

    @staticmethod
    def _select(account: ExternalAccount) -> Any:
        return select(ExternalAccountRow).where(
            ExternalAccountRow.service_type == account.kind,
            ExternalAccountRow.service_id == account.service_id,
            ExternalAccountRow.client_id == account.client_id,
            ExternalAccountRow.account_id == account.account_id,
        )

    # -- signing in ---------------------------------------------------------------------------------------
    def sign_in(self, account: ExternalAccount, policy: LinkPolicy, client: ClientInfo) -> User:
        """The user this external account signs in as (linked, matched or created, in that order).

        Raises PermissionDenied with the reference's messages when no account may be used; every outcome
        is audited under `auth.signIn` / `auth.externalAccount`.
        """
        try:
            user, how = self._resolve(account, policy)
        except (PermissionDenied, InvalidInput, Conflict) as exc:
            self._audit(account, "failed", client, exc.message)
            raise
        identity = self._store(user.id, account)
        if how != "existing":
            self.audit.record(
                "auth.externalAccount",
                "linked",
                actor=Actor.user(user.id, user.username),
                ip=client.ip,
                user_agent=client.user_agent,
                details={"provider": account.kind, "service": account.service_id, "how": how},
            )
        self._audit(account, "succeeded", client, how, Actor.user(user.id, user.username))
        self._linked(identity)
        return user

    def link(self, user: User, account: ExternalAccount, client: ClientInfo, how: str = "account security") -> Identity:
        """Attach an identity to an already signed-in user (gerrit credentials, connecting a provider from
        account settings); Conflict when another account holds it."""
        existing = self.find(account)
        if existing is not None and existing.user_id != user.id:
            raise Conflict(f"this {account.kind} account is already linked to another user")
        identity = self._store(user.id, account)
        self.audit.record(
            "auth.externalAccount",
            "linked",
            actor=Actor.user(user.id, user.username),
            ip=client.ip,
            user_agent=client.user_agent,
            details={"provider": account.kind, "service": account.service_id, "how": how},
        )
        self._linked(identity)
        return identity

    def _resolve(self, account: ExternalAccount, policy: LinkPolicy) -> tuple[User, str]:
        existing = self.find(account)
        if existing is not None:
            return self.accounts.get_user(existing.user_id), "existing"
        if policy.link_by_username and account.username:
            by_name = self.accounts.find_by_username(account.username)
            if by_name is not None:
                return by_name, "username"
        emails = [normalize_email(e) for e in account.verified_emails if e.strip()]
        for email in emails:
            user = self.accounts.find_by_verified_email(email)
            if user is not None:
                self.check_single_identity(user, account, policy)
                return user, "email"
        if not emails and not policy.link_by_username:
            raise PermissionDenied(
                NO_VERIFIED_EMAIL.format(provider=policy.label),
                hint=NO_VERIFIED_EMAIL_HINT.format(provider=policy.label),
            )
        if not policy.allow_signup:
            shown = emails[0] if emails else account.username
            raise PermissionDenied(SIGNUP_DISABLED.format(email=shown), hint="sign-up is disabled for this provider")
        return self._create(account, emails), "created"

    def check_single_identity(self, user: User, account: ExternalAccount, policy: LinkPolicy) -> None:
        """PermissionDenied when the provider allows one identity per user and `user` has another one there."""
        if not policy.single_identity_per_user:
            return
        with self.runtime.db.session() as session:
            other = session.scalar(
                select(ExternalAccountRow.id).where(
                    ExternalAccountRow.user_id == user.id,
                    ExternalAccountRow.service_type == account.kind,
                    ExternalAccountRow.service_id == account.service_id,
                    ExternalAccountRow.client_id == account.client_id,
                )
            )
        if other is not None:
            raise PermissionDenied(
                f"The account with this e-mail is already linked to another identity at {policy.label}.",
                hint="singleIdentityPerUser allows one identity per user; sign in with the linked one",
            )

    def _create(self, account: ExternalAccount, emails: list[str]) -> User:
        base = _username_for(account, emails)
        primary = emails[0] if emails else None
        for attempt in (base, with_random_suffix(base)):  # rule 6: retry once with a random suffix
            try:
                user = self.accounts.create_user(
                    INTERNAL,
                    attempt,
                    email=primary,
                    email_verified=primary is not None,
                    display_name=account.display_name[:255],
                )
            except Conflict as exc:
                if "username" not in exc.message:
                    raise Conflict(
                        f"The e-mail address {primary!r} is already used (unverified) by another account.",
                        hint="ask a site admin to verify or remove that address",
                    ) from None
                continue
            for extra in emails[1:]:
                with contextlib.suppress(Conflict):  # another account holds it: keep it there
                    self.accounts.add_email(INTERNAL, user.id, extra, verified=True)
            return user
        raise Conflict(f"could not find a free username for {base!r}", hint="ask a site admin to create the account")

    def _store(self, user_id: int, account: ExternalAccount) -> Identity:
        """Insert or refresh the identity row: token and data change, the user link never does."""
        auth_data = self._cipher().encrypt(account.token) if account.token else None
        now = utcnow()
        with self.runtime.db.session() as session:
            row = session.scalar(self._select(account))
            if row is None:
                row = ExternalAccountRow(
                    user_id=user_id,
                    service_type=account.kind,
                    service_id=account.service_id,
                    client_id=account.client_id,
                    account_id=account.account_id,
                    created_at=now,
                )
                session.add(row)
            row.account_data = json.dumps(account.data, sort_keys=True, default=str)
            if auth_data is not None:
                row.auth_data = auth_data
            row.updated_at = now
            session.flush()
            return _identity(row)

    def _audit(
        self, account: ExternalAccount, action: str, client: ClientInfo, reason: str, actor: Actor | None = None
    ) -> None:
        self.audit.record(
            "auth.signIn",
            action,
            actor=actor,
            reason=reason,
            ip=client.ip,
            user_agent=client.user_agent,
            details={"provider": account.kind, "service": account.service_id, "externalUser": account.username},
        )
