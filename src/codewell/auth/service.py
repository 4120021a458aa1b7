"""Request authentication: the Authorization header, bearer resolvers, session cookies, password sign-in.

The middleware and the sign-in pages call this service; other capabilities register extra bearer
resolvers (the OAuth server) and paths that anonymous callers may reach (they do their own challenge).
What is stored about credentials (password hashes, lockout counters, session rows, reset links) belongs to
accounts: this service signs cookies, writes audit entries with the client's address and words the errors,
and calls `codewell.accounts.credentials.CredentialService` for the rest.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from codewell.accounts.audit import AuditService
from codewell.accounts.credentials import CredentialService, Outcome, SessionInfo
from codewell.accounts.service import AccountService, User
from codewell.accounts.tokens import SCOPE_SUDO, SCOPE_USER_ALL, TokenService
from codewell.auth.header import Credentials, MalformedHeader, Scheme, parse_authorization
from codewell.authz import Action, allowed
from codewell.core.actors import Actor
from codewell.core.errors import PermissionDenied, Unauthenticated
from codewell.http.sessions import sign, unsign

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

BearerResolver = Callable[[str], Actor | None]
Challenger = Callable[[str], str | None]
# (path, lower-cased headers, client) → the actor a trusted header names, or None (http-header provider).
RequestResolver = Callable[[str, dict[str, str], "ClientInfo"], Actor | None]
INVALID_HEADER = "Invalid Authorization header."
INVALID_TOKEN = "Invalid access token."
SIGN_IN_FAILED = "Invalid username or password."
SUDO_NOT_ADMIN = "The subject user of a sudo access token must be a site admin."
SUDO_NO_USER = "Unable to sudo to nonexistent user."
# Paths anonymous callers reach even when auth.public is false (prefix match).
DEFAULT_ANONYMOUS_PATHS = (
    "/healthz",
    "/readyz",
    "/metrics",
    "/.api/health",
    "/sign-in",
    "/sign-up",
    "/sign-out",
    "/password-reset",
    "/.assets/",
    "/favicon.ico",
    # OAuth endpoints, discovery documents and the MCP server answer unauthenticated callers themselves
    # (with the OAuth challenge MCP clients need to discover how to sign in).
    "/.auth/",
    "/.well-known/",
    "/.api/mcp",
)


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Where a request came from, for audit entries (the socket peer: proxy headers are not trusted)."""

    ip: str = ""
    user_agent: str = ""


class AuthService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.accounts = runtime.get(AccountService)
        self.tokens = runtime.get(TokenService)
        self.audit = runtime.get(AuditService)
        # Passwords, lockouts and sessions live in accounts' tables: only accounts writes them (issue #15).
        self.credentials = runtime.get(CredentialService)
        self._lock = threading.Lock()
        self._key: bytes | None = None
        self._resolvers: list[BearerResolver] = []
        self._request_resolvers: list[RequestResolver] = []
        self._anonymous_paths: list[str] = list(DEFAULT_ANONYMOUS_PATHS)
        self._challenges: list[Challenger] = []
        # Scope → path prefixes a credential holding that scope (but not user:all) may call.
        self._scope_paths: dict[str, list[str]] = {"mcp": ["/.api/mcp"]}

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def _secret(self) -> bytes:
        # Read once: the key file never changes while the process runs, and sessions check it per request.
        if self._key is None:
            self._key = self.runtime.secret_key()
        return self._key

    # -- registration -------------------------------------------------------------------------------------
    def add_bearer_resolver(self, resolver: BearerResolver) -> None:
        """Offer `Bearer` values that are not access tokens to `resolver` (returns an Actor or None)."""
        with self._lock:
            if resolver not in self._resolvers:
                self._resolvers.append(resolver)

    def add_request_resolver(self, resolver: RequestResolver) -> None:
        """Ask `resolver` for the actor of requests without an Authorization header, before the session
        cookie (the http-header provider: an authenticating proxy names the user in a header)."""
        with self._lock:
            if resolver not in self._request_resolvers:
                self._request_resolvers.append(resolver)

    def resolve_request(self, path: str, headers: dict[str, str], client: ClientInfo) -> Actor | None:
        """The first actor a request resolver finds; resolvers may raise Unauthenticated to refuse."""
        for resolver in list(self._request_resolvers):
            actor = resolver(path, headers, client)
            if actor is not None:
                return actor
        return None

    def add_challenger(self, challenger: Challenger) -> None:
        """Let `challenger(path)` supply the `WWW-Authenticate` value sent with a 401 for that path (the
        MCP endpoints point OAuth clients at their protected resource metadata), or None for no challenge."""
        with self._lock:
            if challenger not in self._challenges:
                self._challenges.append(challenger)

    def challenge_for(self, path: str) -> str | None:
        for challenger in list(self._challenges):
            value = challenger(path)
            if value:
                return value
        return None

    def add_anonymous_path(self, prefix: str) -> None:
        """Let anonymous callers reach paths under `prefix` even when auth.public is false (the route
        then answers unauthenticated callers itself, e.g. with an OAuth challenge)."""
        with self._lock:
            if prefix not in self._anonymous_paths:
                self._anonymous_paths.append(prefix)

    def add_scope_path(self, scope: str, prefix: str) -> None:
        """Let credentials holding `scope` (without user:all) call paths under `prefix`."""
        with self._lock:
            paths = self._scope_paths.setdefault(scope, [])
            if prefix not in paths:
                paths.append(prefix)

    def is_anonymous_path(self, path: str) -> bool:
        """Whether anonymous callers reach `path` whatever auth.public says (prefix match on segments)."""
        for prefix in self._anonymous_paths:
            if prefix.endswith("/") and path.startswith(prefix):
                return True
            if path == prefix or path.startswith(prefix + "/"):
                return True
        return False

    def scopes_allow(self, actor: Actor, path: str) -> bool:
        """Whether the credential's scopes reach `path`: user:all reaches everything, other scopes their paths."""
        if actor.via not in ("access_token", "oauth") or SCOPE_USER_ALL in actor.scopes:
            return True
        return any(path.startswith(prefix) for s in actor.scopes for prefix in self._scope_paths.get(s, ()))

    # -- the Authorization header -------------------------------------------------------------------------
    def authenticate_header(self, value: str, client: ClientInfo) -> Actor | None:
        """The actor named by an Authorization header; None when the scheme is not ours (ignored, audited).

        Raises Unauthenticated (malformed header, unknown token) or PermissionDenied (sudo refused).
        """
        try:
            credentials = parse_authorization(value)
        except MalformedHeader as exc:
            self._audit_failure(client, f"malformed Authorization header: {exc.detail}")
            raise Unauthenticated(INVALID_HEADER) from None
        if credentials is None:
            if value.strip():
                self._audit_failure(client, "invalid Authorization header")
            return None
        if credentials.scheme is Scheme.TOKEN_SUDO:
            return self._sudo(credentials, client)
        owner = self.tokens.authenticate_owner(credentials.token)
        if owner is not None:
            return owner.actor
        if credentials.scheme is Scheme.BEARER:
            for resolver in list(self._resolvers):
                actor = resolver(credentials.token)
                if actor is not None:
                    return actor
        self._audit_failure(client, "unknown, revoked or expired access token")
        raise Unauthenticated(INVALID_TOKEN)

    def _sudo(self, credentials: Credentials, client: ClientInfo) -> Actor:
        owner = self.tokens.authenticate_owner(credentials.token)
        if owner is None:
            self._audit_failure(client, "unknown, revoked or expired access token (sudo)")
            raise Unauthenticated(INVALID_TOKEN)
        if SCOPE_SUDO not in owner.actor.scopes:
            self._audit_failure(client, "sudo with a token lacking the site-admin:sudo scope", owner.actor)
            raise PermissionDenied(
                f"The access token lacks the {SCOPE_SUDO} scope.", hint="create a token with the site-admin:sudo scope"
            )
        if not allowed(owner.actor, Action.SUDO):
            self._audit_failure(client, "sudo by a user who is not a site admin", owner.actor)
            raise PermissionDenied(SUDO_NOT_ADMIN)
        target = self.accounts.find_by_username(credentials.sudo_user)
        if target is None:
            self._audit_failure(client, "sudo to a nonexistent user", owner.actor)
            raise PermissionDenied(SUDO_NO_USER)
        self.audit.record(
            "auth.accessToken",
            "impersonated",
            actor=owner.actor,
            ip=client.ip,
            user_agent=client.user_agent,
            details={"tokenID": owner.token_id, "user": target.username},
        )
        return self.accounts.actor_for(target, via="sudo", scopes=frozenset({SCOPE_USER_ALL}))

    def audit_token_in_url(self, client: ClientInfo) -> None:
        self._audit_failure(client, "access token in the URL refused")

    def _audit_failure(self, client: ClientInfo, reason: str, actor: Actor | None = None) -> None:
        self.audit.record(
            "auth.accessToken", "failed", actor=actor, reason=reason, ip=client.ip, user_agent=client.user_agent
        )

    # -- sessions -----------------------------------------------------------------------------------------
    def start_session(self, user: User, client: ClientInfo) -> tuple[str, SessionInfo]:
        """Create a session for `user`; returns (signed cookie value, session)."""
        info = self.credentials.create_session(user.id, ip=client.ip, user_agent=client.user_agent)
        return sign(self._secret(), "session", info.id), info

    def session_actor(self, cookie: str) -> tuple[Actor, SessionInfo] | None:
        """The signed-in user of a session cookie, or None (bad signature, signed out, expired, deleted)."""
        session_id = unsign(self._secret(), "session", cookie)
        if session_id is None:
            return None
        found = self.credentials.session_user(session_id)
        if found is None:
            return None
        user, info = found
        return self.accounts.actor_for(user, via="session"), info

    def end_session(self, cookie: str) -> None:
        session_id = unsign(self._secret(), "session", cookie)
        if session_id is not None:
            self.credentials.delete_session(session_id)

    # -- password sign-in ---------------------------------------------------------------------------------
    def builtin_enabled(self) -> bool:
        return any(p.get("type") == "builtin" for p in self.runtime.config.auth_providers)

    def sign_in_password(self, username: str, password: str, client: ClientInfo) -> User:
        """The user whose password this is; Unauthenticated with one message for every failure (unknown
        user, wrong password, service account) after one argon2 verification each, so neither the message
        nor the time tells them apart. A locked account says so only when the password was right."""
        if not self.builtin_enabled():
            raise PermissionDenied("password sign-in is disabled", hint="use one of the sign-in providers")
        check = self.credentials.check_password(username, password)
        if check.outcome is Outcome.OK and check.user is not None:
            user = check.user
            self._sign_in_audit("succeeded", user.username, client, "", Actor.user(user.id, user.username))
            return user
        self._sign_in_audit("failed", username, client, check.outcome.value)
        if check.locked_now:
            threshold = self.runtime.config.auth_lockout.failed_attempt_threshold
            self._sign_in_audit("locked", username, client, f"{threshold} failed attempts")
        if check.locked_for is not None:
            minutes = max(1, math.ceil(check.locked_for.total_seconds() / 60))
            raise Unauthenticated(
                f"Too many failed sign-in attempts: this account is locked for {minutes} more minutes.",
                hint="wait, or ask a site admin for a password reset link",
            )
        raise Unauthenticated(SIGN_IN_FAILED)

    def _sign_in_audit(
        self, action: str, username: str, client: ClientInfo, reason: str, actor: Actor | None = None
    ) -> None:
        self.audit.record(
            "auth.signIn",
            action,
            actor=actor,
            reason=reason,
            ip=client.ip,
            user_agent=client.user_agent,
            details={"username": username[:255]},
        )
