"""Request authentication: the Authorization header, bearer resolvers, session cookies, password sign-in.

The middleware and the sign-in pages call this service; other capabilities register extra bearer
resolvers (the OAuth server) and paths that anonymous callers may reach (they do their own challenge).
What is stored about credentials (password hashes, lockout counters, session rows, reset links) belongs to
accounts: this service signs cookies, writes audit entries with the client's address and words the errors,
and calls `codewell.accounts.credentials.CredentialService` for the rest.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

import requests
from sqlalchemy import select

from codewell.accounts.audit import AuditService
from codewell.accounts.credentials import CredentialService, Outcome, SessionInfo
from codewell.accounts.service import AccountService, User
from codewell.accounts.tokens import SCOPE_SUDO, SCOPE_USER_ALL, TokenService
from codewell.auth.header import Credentials, MalformedHeader, Scheme, parse_authorization
from codewell.auth.identities import Identity, IdentityService
from codewell.auth.models import ExternalAccountRow
from codewell.auth.providers.bitbucketcloud import BitbucketCloudSignIn
from codewell.auth.providers.bitbucketserver import BitbucketServerSignIn
from codewell.auth.providers.github import GitHubSignIn
from codewell.auth.providers.gitlab import GitLabSignIn
from codewell.auth.providers.oauth import CodeHostSignIn
from codewell.authz import Action, UserRef, allowed, ensure
from codewell.config.providers import Provider
from codewell.core.actors import Actor
from codewell.core.errors import Conflict, NotFound, PermissionDenied, Unauthenticated, Unavailable
from codewell.http.sessions import sign, unsign

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

BearerResolver = Callable[[str], Actor | None]
Challenger = Callable[[str], str | None]
# (path, lower-cased headers, client) → the actor a trusted header names, or None (http-header provider).
RequestResolver = Callable[[str, dict[str, str], "ClientInfo"], Actor | None]
# Asked with a provider kind ("saml", "github", ...) before an external sign-in starts or completes; raises
# (a CodewellError) to refuse it.
ProviderGate = Callable[[str], None]
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


# Refresh an OAuth token this many seconds before it expires.
TOKEN_REFRESH_MARGIN_SECONDS = 60
_TOKEN_CLIENTS: dict[str, type[CodeHostSignIn[Any]]] = {
    "github": GitHubSignIn,
    "gitlab": GitLabSignIn,
    "bitbucketcloud": BitbucketCloudSignIn,
    "bitbucketserver": BitbucketServerSignIn,
}
__all__ = ["AuthService", "ClientInfo", "ConnectOption", "Identity", "LinkedIdentity", "TokenRefreshFailed"]
# Provider kinds that sign people in (an identity of one of them is a way back into the account).
SIGN_IN_KINDS = ("github", "gitlab", "bitbucketcloud", "bitbucketserver", "openidconnect", "saml", "http-header")
# Provider kinds a signed-in user connects from account settings through `/.auth/<kind>/connect` (a POST with
# the CSRF token; the OAuth state binds the flow to this browser and user). Gerrit has its credentials page.
CONNECT_KINDS = ("github", "gitlab", "bitbucketcloud", "bitbucketserver", "openidconnect")
LAST_SIGN_IN_METHOD = "This is your only way to sign in: disconnecting it would lock you out of your account."
LAST_SIGN_IN_METHOD_HINT = "set a password or connect another sign-in provider first"


class TokenRefreshFailed(Unavailable):
    """A linked account's OAuth token expired and the provider did not refresh it (message safe to show)."""


@dataclass(frozen=True, slots=True)
class LinkedIdentity:
    """An external account linked to a user, as the user may see it (never its token)."""

    id: int
    kind: str
    provider_name: str  # the configured provider's display name, else the kind
    service_id: str  # code host URL, issuer, IdP
    login: str  # the login or e-mail at the provider, else its account ID
    account_id: str
    linked_at: datetime
    last_used_at: datetime  # the last sign-in, connection or token refresh through it
    configured: bool  # its provider is still in auth.providers
    sign_in: bool  # signing in with it works (configured, a sign-in kind, not noSignIn)


@dataclass(frozen=True, slots=True)
class ConnectOption:
    """A configured provider the user may connect from account settings."""

    provider_id: str
    kind: str
    name: str
    url: str
    method: str  # "POST": a form with the CSRF token and `pc`; "GET": a page (Gerrit credentials)


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
        self._provider_gates: list[ProviderGate] = []
        # Called with (user ID, the removed identity) after a linked account is disconnected (code hosts drop the
        # repository permissions it granted at once).
        self._unlink_listeners: list[Callable[[int, LinkedIdentity], None]] = []
        # Scope → path prefixes a credential holding that scope (but not user:all) may call.
        self._scope_paths: dict[str, list[str]] = {"mcp": ["/.api/mcp"]}
        # Paths whose routes read HTTP Basic themselves (OAuth client authentication, client_secret_basic): Basic
        # there is no stray credential, so it is not audited as an invalid header (issue #33 item 7).
        self._basic_paths: set[str] = set()
        # Path prefixes whose route authenticates a header credential in its own worker-thread hop
        # (`add_deferred_path`).
        self._deferred_paths: list[str] = []

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

    def add_deferred_path(self, prefix: str) -> None:
        """Let the routes under `prefix` run the authentication of a request carrying an Authorization header in
        their own worker-thread hop (`codewell.http.requests.authenticate_deferred`) instead of the middleware's:
        one hop a request instead of two, on the MCP endpoints' hot path. Same checks, same answers."""
        with self._lock:
            if prefix not in self._deferred_paths:
                self._deferred_paths.append(prefix)

    def defers(self, path: str) -> bool:
        """Whether a route under `path` runs the request's authentication itself (`add_deferred_path`)."""
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self._deferred_paths)

    def add_basic_auth_path(self, path: str) -> None:
        """Declare that the route at exactly `path` authenticates HTTP Basic credentials itself (an OAuth client
        at the token endpoint): the request middleware then leaves such a header to it, unaudited."""
        with self._lock:
            self._basic_paths.add(path)

    def add_scope_path(self, scope: str, prefix: str) -> None:
        """Let credentials holding `scope` (without user:all) call paths under `prefix`."""
        with self._lock:
            paths = self._scope_paths.setdefault(scope, [])
            if prefix not in paths:
                paths.append(prefix)

    def add_provider_gate(self, gate: ProviderGate) -> None:
        """Ask `gate(kind)` before every external sign-in of that provider kind starts or completes; it raises
        to refuse (licensing: SAML sign-in needs the saml feature). The providers' config loads regardless."""
        with self._lock:
            if gate not in self._provider_gates:
                self._provider_gates.append(gate)

    def check_provider(self, kind: str) -> None:
        """Raise what a provider gate raises when sign-in with `kind` is refused."""
        for gate in list(self._provider_gates):
            gate(kind)

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

    # -- linked external accounts (repository-permission sync) ----------------------------------------------
    def add_identity_listener(self, listener: Callable[[Identity], None]) -> None:
        """Call `listener(identity)` after every external sign-in or link (failures are logged, not raised)."""
        identities = self.runtime.get(IdentityService)
        if listener not in identities.listeners:
            identities.listeners.append(listener)

    def add_unlink_listener(self, listener: Callable[[int, LinkedIdentity], None]) -> None:
        """Call `listener(user_id, identity)` after a linked account is disconnected (failures are logged; the
        disconnect stands)."""
        if listener not in self._unlink_listeners:
            self._unlink_listeners.append(listener)

    def linked_identities(self, actor: Actor, kind: str, service_id: str, user_id: int | None = None) -> list[Identity]:
        """Identities linked at the provider `kind` at `service_id` (a code host URL), of one user when given."""
        ensure(actor, Action.IDENTITY_SECRETS_READ)
        return self.runtime.get(IdentityService).of_service(kind, service_id, user_id)

    def identity_token(self, actor: Actor, identity: Identity) -> dict[str, Any] | None:
        """The stored OAuth token of a linked account, refreshed first (refresh_token grant at the provider's
        token URL, stored again) when it expires within a minute. TokenRefreshFailed when that fails."""
        ensure(actor, Action.IDENTITY_SECRETS_READ)
        identities = self.runtime.get(IdentityService)
        token = identities.token_of(actor, identity.id)
        if token is None:
            return None
        expires_at = token.get("expires_at")
        if not isinstance(expires_at, (int, float)) or expires_at - TOKEN_REFRESH_MARGIN_SECONDS > time.time():
            return token
        refreshed = self._refresh(identity, token)
        identities.replace_token(identity.id, refreshed)
        return refreshed

    def _refresh(self, identity: Identity, token: dict[str, Any]) -> dict[str, Any]:
        label = f"{identity.kind} at {identity.service_id}"
        refresh_token = token.get("refresh_token")
        if not refresh_token:
            raise TokenRefreshFailed(
                f"the OAuth token of the linked {label} account expired and has no refresh token",
                hint="sign in with that provider again",
            )
        provider = next(
            (
                p
                for p in self.runtime.config.providers
                if p.kind == identity.kind and p.service_id == identity.service_id and p.client_id == identity.client_id
            ),
            None,
        )
        client_class = _TOKEN_CLIENTS.get(identity.kind)
        if provider is None or client_class is None:
            raise TokenRefreshFailed(
                f"the OAuth token of the linked {label} account expired and its provider is no longer configured",
                hint="add the provider back to auth.providers",
            )
        endpoint = client_class(provider, "").token_endpoint()
        form = {
            "grant_type": "refresh_token",
            "refresh_token": str(refresh_token),
            "client_id": provider.client_id,
            "client_secret": str(getattr(provider, "client_secret", "")),
        }
        try:
            response = requests.post(endpoint, data=form, headers={"Accept": "application/json"}, timeout=15)
            body = response.json() if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            body = None
        if not isinstance(body, dict) or not body.get("access_token"):
            raise TokenRefreshFailed(
                f"{label} refused to refresh the OAuth token of the linked account",
                hint="sign in with that provider again",
            )
        fresh: dict[str, Any] = {**token, **body}
        if isinstance(body.get("expires_in"), (int, float)):
            fresh["expires_at"] = int(time.time() + float(body["expires_in"]))
        else:
            fresh.pop("expires_at", None)
        return fresh

    # -- linked external accounts (account settings) -------------------------------------------------------
    def _provider_of(self, kind: str, service_id: str, client_id: str) -> Provider | None:
        for provider in self.runtime.config.providers:
            if (provider.kind, provider.service_id, provider.client_id) == (kind, service_id, client_id):
                return provider
        return None

    def _linked(self, row: ExternalAccountRow) -> LinkedIdentity:
        data = json.loads(row.account_data or "{}")
        login = next(
            (str(data[k]) for k in ("login", "username", "name", "email", "nameID") if data.get(k)), row.account_id
        )
        provider = self._provider_of(row.service_type, row.service_id, row.client_id)
        name = row.service_type
        if provider is not None:
            name = provider.display_name or provider.label.removeprefix(provider.display_prefix)
        return LinkedIdentity(
            id=row.id,
            kind=row.service_type,
            provider_name=name,
            service_id=row.service_id,
            login=login,
            account_id=row.account_id,
            linked_at=row.created_at,
            last_used_at=row.updated_at,
            configured=provider is not None,
            sign_in=provider is not None and row.service_type in SIGN_IN_KINDS and not provider.no_sign_in,
        )

    def list_identities(self, actor: Actor, user_id: int | None = None) -> list[LinkedIdentity]:
        """The external accounts linked to a user (the actor's own by default; a site admin may name another),
        oldest first. Tokens never leave the service."""
        target = actor.user_id if user_id is None else user_id
        if target is None:
            raise Unauthenticated("Sign in to see your linked accounts.")
        ensure(actor, Action.USER_READ, UserRef(target))
        with self.runtime.db.session() as session:
            rows = session.scalars(
                select(ExternalAccountRow).where(ExternalAccountRow.user_id == target).order_by(ExternalAccountRow.id)
            ).all()
            return [self._linked(r) for r in rows]

    def unlink_identity(self, actor: Actor, identity_id: int, client: ClientInfo | None = None) -> LinkedIdentity:
        """Disconnect one of the actor's own linked accounts (audited `auth.externalAccount` / `unlinked`).

        NotFound for an unknown ID or someone else's identity (alike); Conflict when it is the actor's last way
        to sign in (no password usable with the builtin provider, no other sign-in identity, no proxy header)."""
        if actor.user_id is None:
            raise Unauthenticated("Sign in to disconnect a linked account.")
        ensure(actor, Action.USER_MANAGE, UserRef(actor.user_id))
        identities = self.list_identities(actor)
        removed = next((i for i in identities if i.id == identity_id), None)
        if removed is None:
            raise NotFound(f"linked account {identity_id} not found", hint="pick one listed on /settings/accounts")
        if removed.sign_in and not self._other_sign_in(actor.user_id, identities, identity_id):
            raise Conflict(LAST_SIGN_IN_METHOD, hint=LAST_SIGN_IN_METHOD_HINT)
        with self.runtime.db.session() as session:
            row = session.get(ExternalAccountRow, identity_id)
            if row is None or row.user_id != actor.user_id:
                raise NotFound(f"linked account {identity_id} not found", hint="pick one listed on /settings/accounts")
            session.delete(row)
        client = client or ClientInfo()
        self.audit.record(
            "auth.externalAccount",
            "unlinked",
            actor=actor,
            ip=client.ip,
            user_agent=client.user_agent,
            details={"provider": removed.kind, "service": removed.service_id, "accountID": removed.account_id},
        )
        for listener in list(self._unlink_listeners):
            try:
                listener(actor.user_id, removed)
            except Exception:
                log.exception("unlink listener failed", extra={"user_id": actor.user_id})
        return removed

    def _other_sign_in(self, user_id: int, identities: list[LinkedIdentity], without: int) -> bool:
        """Whether the user keeps a way to sign in once identity `without` is gone."""
        if any(i.sign_in for i in identities if i.id != without):
            return True
        kinds = {p.kind for p in self.runtime.config.providers}
        if "http-header" in kinds:
            return True  # the authenticating proxy names users by username
        return "builtin" in kinds and self.accounts.get_user(user_id).has_password

    def connect_options(self, actor: Actor) -> list[ConnectOption]:
        """The configured providers (not hidden) the actor may connect and has not linked yet, in file order."""
        linked = {(i.kind, i.service_id) for i in self.list_identities(actor)}
        options: list[ConnectOption] = []
        for provider in self.runtime.config.providers:
            if provider.hidden or (provider.kind, provider.service_id) in linked:
                continue
            name = provider.display_name or provider.label.removeprefix(provider.display_prefix)
            if provider.kind in CONNECT_KINDS:
                options.append(
                    ConnectOption(provider.id, provider.kind, name, f"/.auth/{provider.kind}/connect", "POST")
                )
            elif provider.kind == "gerrit":
                options.append(ConnectOption(provider.id, provider.kind, name, "/.auth/gerrit/credentials", "GET"))
        return options

    # -- the Authorization header -------------------------------------------------------------------------
    def authenticate_header(self, value: str, client: ClientInfo, path: str = "") -> Actor | None:
        """The actor named by an Authorization header; None when the scheme is not ours (ignored, audited, except
        Basic at a path whose route reads Basic itself: `add_basic_auth_path`).

        Raises Unauthenticated (malformed header, unknown token) or PermissionDenied (sudo refused).
        """
        try:
            credentials = parse_authorization(value)
        except MalformedHeader as exc:
            self._audit_failure(client, f"malformed Authorization header: {exc.detail}")
            raise Unauthenticated(INVALID_HEADER) from None
        if credentials is None:
            if value.strip() and not self._basic_here(value, path):
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

    def _basic_here(self, value: str, path: str) -> bool:
        """Whether `value` is an HTTP Basic header sent to a route that authenticates Basic itself."""
        scheme = value.strip().partition(" ")[0].lower()
        return scheme == "basic" and path in self._basic_paths

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
