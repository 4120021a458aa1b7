"""Users, e-mails and passwords: the account registry every other capability asks "who is this?".

Callers pass the acting `Actor`; changes need a site admin (or the user themself where noted) and raise
`codewell.core.errors` exceptions. The first user created on an empty instance becomes a site admin.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Self

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from codewell.accounts.audit import AuditService
from codewell.accounts.models import SessionRow, UserEmailRow, UserRow
from codewell.accounts.passwords import check_password_policy, hash_password
from codewell.accounts.roles import RoleService
from codewell.accounts.usernames import validate_username
from codewell.authz import Action, UserRef, allowed, ensure
from codewell.core.actors import Actor
from codewell.core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from codewell.db.base import utcnow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
MAX_DISPLAY_NAME = 255
# Usernames and display names are at most 255 characters, so a longer substring can match nothing; the bound
# also keeps SQLite's LIKE from failing with "pattern too complex" (~50,000 characters).
MAX_USER_QUERY = 255


@dataclass(frozen=True, slots=True)
class User:
    id: int
    username: str
    display_name: str
    site_admin: bool
    service_account: bool
    has_password: bool
    created_at: datetime

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "username": self.username,
            "displayName": self.display_name,
            "siteAdmin": self.site_admin,
            "serviceAccount": self.service_account,
            "createdAt": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class Email:
    email: str
    verified: bool
    primary: bool

    def as_json(self) -> dict[str, object]:
        return {"email": self.email, "verified": self.verified, "primary": self.primary}


def to_user(row: UserRow) -> User:
    return User(
        id=row.id,
        username=row.username,
        display_name=row.display_name,
        site_admin=row.site_admin,
        service_account=row.service_account,
        has_password=row.password_hash is not None,
        created_at=row.created_at,
    )


def normalize_email(email: str) -> str:
    """The lower-cased address; InvalidInput when it does not look like one."""
    email = email.strip().lower()
    if not _EMAIL.match(email) or len(email) > 320:
        raise InvalidInput(f"invalid e-mail address {email[:80]!r}", hint="use the form name@example.com")
    return email


def builtin_signup_allowed(runtime: Runtime) -> bool:
    """Whether the builtin provider lets people create their own accounts (`allowSignup`)."""
    return any(p.get("type") == "builtin" and p.get("allowSignup") is True for p in runtime.config.auth_providers)


# Asked with the number of accounts before each new one is created; raises (a CodewellError) to refuse it.
UserLimitCheck = Callable[[int], None]


class AccountService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = runtime.get(AuditService)
        self.roles = runtime.get(RoleService)
        self._user_limit_checks: list[UserLimitCheck] = []

    def add_user_limit_check(self, check: UserLimitCheck) -> None:
        """Ask `check(existing accounts)` before every account is created, whoever creates it (sign-up, site
        admins, external sign-in); it raises to refuse (licensing's user limit). Idempotent."""
        if check not in self._user_limit_checks:
            self._user_limit_checks.append(check)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # -- reading ------------------------------------------------------------------------------------------
    def get_user(self, user_id: int) -> User:
        """The user with this ID; NotFound when there is none (deleted users are gone)."""
        with self.runtime.db.session() as session:
            row = session.get(UserRow, user_id)
            if row is None:
                raise NotFound(f"user {user_id} not found")
            return to_user(row)

    def get_by_username(self, username: str) -> User:
        """The user with this username (case-insensitive); NotFound when there is none."""
        with self.runtime.db.session() as session:
            return to_user(self._by_username(session, username))

    def find_by_username(self, username: str) -> User | None:
        with self.runtime.db.session() as session:
            row = session.scalar(select(UserRow).where(func.lower(UserRow.username) == username.lower()))
            return to_user(row) if row else None

    def find_by_verified_email(self, email: str) -> User | None:
        """The user owning this verified address (used to link external identities), else None."""
        with self.runtime.db.session() as session:
            row = session.scalar(
                select(UserRow)
                .join(UserEmailRow, UserEmailRow.user_id == UserRow.id)
                .where(UserEmailRow.email == email.strip().lower(), UserEmailRow.verified.is_(True))
            )
            return to_user(row) if row else None

    def list_users(self, actor: Actor, query: str = "", limit: int = 100, offset: int = 0) -> list[User]:
        """Users ordered by username, optionally filtered by a username/display-name substring; signed-in only."""
        ensure(actor, Action.USERS_READ)
        if not 1 <= limit <= 10000:
            raise InvalidInput("limit must be between 1 and 10000")
        if len(query) > MAX_USER_QUERY:
            raise InvalidInput(
                f"the user search query is longer than {MAX_USER_QUERY} characters",
                hint=f"usernames and display names are at most {MAX_USER_QUERY} characters: search for a part of one",
            )
        stmt = select(UserRow).order_by(UserRow.username).limit(limit).offset(max(offset, 0))
        if query:
            like = f"%{query.lower()}%"
            stmt = stmt.where(func.lower(UserRow.username).like(like) | func.lower(UserRow.display_name).like(like))
        with self.runtime.db.session() as session:
            return [to_user(row) for row in session.scalars(stmt)]

    def count_users(self) -> int:
        with self.runtime.db.session() as session:
            return session.scalar(select(func.count()).select_from(UserRow)) or 0

    def list_emails(self, actor: Actor, user_id: int) -> list[Email]:
        ensure(actor, Action.USER_READ, UserRef(user_id))
        with self.runtime.db.session() as session:
            rows = session.scalars(
                select(UserEmailRow).where(UserEmailRow.user_id == user_id).order_by(UserEmailRow.email)
            )
            return [Email(r.email, r.verified, r.is_primary) for r in rows]

    def directory(self, actor: Actor) -> list[tuple[User, str]]:
        """Every user with their primary e-mail ("" when none), ordered by ID, in one query; site admins only
        (instance-wide exports such as the analytics reports, issue #9)."""
        ensure(actor, Action.USERS_EXPORT)
        # Plain columns, not ORM entities: exports read every user, and entity bookkeeping would dominate.
        u = UserRow
        stmt = (
            select(u.id, u.username, u.display_name, u.site_admin, u.service_account, u.password_hash.is_not(None))
            .add_columns(u.created_at, UserEmailRow.email)
            .outerjoin(UserEmailRow, (UserEmailRow.user_id == u.id) & UserEmailRow.is_primary.is_(True))
            .order_by(u.id)
        )
        with self.runtime.db.session() as session:
            return [(User(*row[:7]), row[7] or "") for row in session.execute(stmt)]

    # -- actors and permissions ---------------------------------------------------------------------------
    def actor_for(self, user: User, *, via: str, scopes: frozenset[str] = frozenset()) -> Actor:
        """The Actor a request made by `user` acts as (flags are read now, so changes apply at once)."""
        return Actor.user(
            user.id,
            user.username,
            site_admin=user.site_admin,
            service_account=user.service_account,
            scopes=scopes,
            via=via,
        )

    def has_permission(self, actor: Actor, permission: str) -> bool:
        """Whether the actor holds `permission` (e.g. "MCP#ACCESS") right now; anonymous holds none."""
        if actor.is_internal:
            return True
        if not actor.is_user or actor.user_id is None:
            return False
        try:
            user = self.get_user(actor.user_id)
        except NotFound:
            return False
        return permission in self.roles.permissions_of(user.id, site_admin=user.site_admin)

    # -- changes ------------------------------------------------------------------------------------------
    def create_user(
        self,
        actor: Actor,
        username: str,
        *,
        password: str | None = None,
        email: str | None = None,
        email_verified: bool = False,
        site_admin: bool = False,
        service_account: bool = False,
        display_name: str = "",
    ) -> User:
        """Create an account. Site admins (and INTERNAL) create exactly what they ask for; others may only
        sign up (builtin `allowSignup`), and the first user to sign up on an empty instance becomes a site
        admin. Conflict on a taken username or e-mail (usernames compare case-insensitively)."""
        validate_username(username)
        if len(display_name) > MAX_DISPLAY_NAME:
            raise InvalidInput(f"a display name must be at most {MAX_DISPLAY_NAME} characters")
        if service_account and password is not None:
            raise InvalidInput("service accounts cannot have a password", hint="they authenticate with access tokens")
        if password is not None:
            check_password_policy(password, self.runtime.config.auth_min_password_length)
        address = normalize_email(email) if email else None
        existing = self.count_users()
        first_user = existing == 0
        manages_users = allowed(actor, Action.USERS_MANAGE)
        if not first_user and not manages_users:
            if site_admin or service_account or email_verified:
                raise PermissionDenied("only site admins can create site admins, service accounts or verified e-mails")
            if not builtin_signup_allowed(self.runtime):
                raise PermissionDenied("sign-up is disabled", hint="ask a site admin to create your account")
        for check in list(self._user_limit_checks):
            check(existing)
        password_hash = hash_password(password) if password is not None else None
        try:
            with self.runtime.db.session() as session:
                self._check_free(session, username, address)
                row = UserRow(
                    username=username,
                    display_name=display_name,
                    password_hash=password_hash,
                    site_admin=site_admin or (first_user and not manages_users and not service_account),
                    service_account=service_account,
                )
                session.add(row)
                session.flush()
                if address:
                    session.add(UserEmailRow(user_id=row.id, email=address, verified=email_verified, is_primary=True))
                user = to_user(row)
        except IntegrityError:  # a concurrent create won the race
            raise Conflict(f"the username {username!r} or e-mail is already taken") from None
        self.audit.record(
            "accounts.user",
            "created",
            actor=actor,
            details={"user": user.username, "siteAdmin": user.site_admin, "serviceAccount": service_account},
        )
        return user

    def set_site_admin(self, actor: Actor, user_id: int, site_admin: bool) -> User:
        """Promote or demote; demoting the last site admin (oneself included) is refused."""
        ensure(actor, Action.USERS_MANAGE)
        with self.runtime.db.session() as session:
            row = self._row(session, user_id)
            if row.service_account and site_admin:
                raise InvalidInput("a service account cannot be a site admin", hint="create a regular user instead")
            if row.site_admin and not site_admin:
                self._ensure_another_admin(session, row, "demote")
            row.site_admin = site_admin
            row.updated_at = utcnow()
            user = to_user(row)
        self.audit.record(
            "accounts.user", "siteAdminSet", actor=actor, details={"user": user.username, "siteAdmin": site_admin}
        )
        return user

    def delete_user(self, actor: Actor, user_id: int) -> None:
        """Delete an account and everything hanging off it (tokens, sessions, e-mails, roles, repo grants)."""
        ensure(actor, Action.USERS_MANAGE)
        with self.runtime.db.session() as session:
            row = self._row(session, user_id)
            if row.site_admin:
                self._ensure_another_admin(session, row, "delete")
            username = row.username
            session.delete(row)
        self.audit.record("accounts.user", "deleted", actor=actor, details={"user": username, "userID": user_id})

    def set_password(self, actor: Actor, user_id: int, password: str) -> None:
        """Set a new password (self or admin); existing sessions of the user are signed out."""
        ensure(actor, Action.USER_MANAGE, UserRef(user_id))
        self._store_password(user_id, password)
        self.audit.record("accounts.user", "passwordChanged", actor=actor, details={"userID": user_id})

    def reset_password_with_link(self, user_id: int, password: str) -> None:
        """Set a password for a verified reset link (the caller checked the link)."""
        self._store_password(user_id, password)
        self.audit.record("accounts.user", "passwordReset", details={"userID": user_id})

    def set_username(self, actor: Actor, user_id: int, username: str) -> User:
        """Rename a user (self or admin); the new name must be valid and free (case-insensitively)."""
        ensure(actor, Action.USER_MANAGE, UserRef(user_id))
        validate_username(username)
        with self.runtime.db.session() as session:
            row = self._row(session, user_id)
            old = row.username
            if username.lower() != old.lower():
                self._check_free(session, username, None)
            row.username = username
            row.updated_at = utcnow()
            user = to_user(row)
        self.audit.record("accounts.user", "renamed", actor=actor, details={"user": old, "newName": username})
        return user

    def set_display_name(self, actor: Actor, user_id: int, display_name: str) -> User:
        ensure(actor, Action.USER_MANAGE, UserRef(user_id))
        if len(display_name) > MAX_DISPLAY_NAME:
            raise InvalidInput(f"a display name must be at most {MAX_DISPLAY_NAME} characters")
        with self.runtime.db.session() as session:
            row = self._row(session, user_id)
            row.display_name = display_name
            return to_user(row)

    def add_email(self, actor: Actor, user_id: int, email: str, *, verified: bool = False) -> Email:
        """Add an address (only admins may add it as verified); Conflict when any account already has it."""
        ensure(actor, Action.USER_MANAGE, UserRef(user_id))
        if verified:
            ensure(actor, Action.USERS_MANAGE)
        address = normalize_email(email)
        with self.runtime.db.session() as session:
            self._row(session, user_id)
            self._check_free(session, None, address)
            has_primary = session.scalar(
                select(UserEmailRow.id).where(UserEmailRow.user_id == user_id, UserEmailRow.is_primary.is_(True))
            )
            session.add(UserEmailRow(user_id=user_id, email=address, verified=verified, is_primary=has_primary is None))
        self.audit.record("accounts.email", "added", actor=actor, details={"userID": user_id, "email": address})
        return Email(address, verified, has_primary is None)

    def set_email_verified(self, actor: Actor, user_id: int, email: str, verified: bool) -> None:
        ensure(actor, Action.USERS_MANAGE)
        address = normalize_email(email)
        with self.runtime.db.session() as session:
            row = session.scalar(
                select(UserEmailRow).where(UserEmailRow.user_id == user_id, UserEmailRow.email == address)
            )
            if row is None:
                raise NotFound(f"user {user_id} has no e-mail address {address!r}")
            row.verified = verified
        self.audit.record(
            "accounts.email", "verifiedSet", actor=actor, details={"userID": user_id, "email": address, "v": verified}
        )

    def remove_email(self, actor: Actor, user_id: int, email: str) -> None:
        ensure(actor, Action.USER_MANAGE, UserRef(user_id))
        address = normalize_email(email)
        with self.runtime.db.session() as session:
            row = session.scalar(
                select(UserEmailRow).where(UserEmailRow.user_id == user_id, UserEmailRow.email == address)
            )
            if row is None:
                raise NotFound(f"user {user_id} has no e-mail address {address!r}")
            session.delete(row)
        self.audit.record("accounts.email", "removed", actor=actor, details={"userID": user_id, "email": address})

    # -- helpers ------------------------------------------------------------------------------------------
    def _store_password(self, user_id: int, password: str) -> None:
        check_password_policy(password, self.runtime.config.auth_min_password_length)
        password_hash = hash_password(password)
        with self.runtime.db.session() as session:
            row = self._row(session, user_id)
            if row.service_account:
                raise InvalidInput("service accounts cannot have a password", hint="they authenticate with tokens")
            row.password_hash = password_hash
            row.failed_sign_ins = 0
            row.locked_until = None
            row.updated_at = utcnow()
            session.query(SessionRow).filter(SessionRow.user_id == user_id).delete()

    @staticmethod
    def _row(session: Session, user_id: int) -> UserRow:
        row = session.get(UserRow, user_id)
        if row is None:
            raise NotFound(f"user {user_id} not found")
        return row

    @staticmethod
    def _by_username(session: Session, username: str) -> UserRow:
        row = session.scalar(select(UserRow).where(func.lower(UserRow.username) == username.lower()))
        if row is None:
            raise NotFound(f"user {username!r} not found", hint="`codewell users list` shows the users")
        return row

    @staticmethod
    def _check_free(session: Session, username: str | None, email: str | None) -> None:
        if username is not None:
            taken = session.scalar(select(UserRow.id).where(func.lower(UserRow.username) == username.lower()))
            if taken is not None:
                raise Conflict(f"the username {username!r} is already taken", hint="choose another username")
        if email is not None and session.scalar(select(UserEmailRow.id).where(UserEmailRow.email == email)):
            raise Conflict(f"the e-mail address {email!r} is already in use by another account")

    @staticmethod
    def _ensure_another_admin(session: Session, row: UserRow, what: str) -> None:
        others = session.scalar(
            select(func.count()).select_from(UserRow).where(UserRow.site_admin.is_(True), UserRow.id != row.id)
        )
        if not others:
            raise Conflict(
                f"cannot {what} {row.username!r}: it is the last site admin",
                hint="make another user a site admin first",
            )
