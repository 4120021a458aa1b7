"""OAuth grants: authorization requests and consent, codes, access and refresh tokens.

Authorization code + PKCE (S256 only), RFC 8707 resource binding, refresh-token rotation with reuse
detection, RFC 7009 revocation, RFC 7662 introspection. Codes and tokens are stored as SHA-256 hashes.
Clients (who may ask) are in `codewell.oauth.clients`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from sqlalchemy import exists, select, update

from codewell.accounts.service import AccountService
from codewell.authz import Action, IssuedTo, allowed
from codewell.core.actors import Actor
from codewell.core.errors import NotFound
from codewell.core.tools import Endpoint
from codewell.db.base import utcnow
from codewell.oauth.clients import (
    ClientService,
    OAuthClient,
    check_redirect_uri,
    check_scope,
    redirect_matches,
    sha256,
    to_client,
)
from codewell.oauth.errors import OAuthError
from codewell.oauth.models import OAuthClientRow, OAuthCodeRow, OAuthTokenRow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

ACCESS_TOKEN_TTL = timedelta(hours=1)
REFRESH_TOKEN_TTL = timedelta(days=30)
CODE_TTL = timedelta(minutes=5)
ACCESS_PREFIX = "cwoa_"
REFRESH_PREFIX = "cwor_"
CODE_PREFIX = "cwoc_"


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of a verifier (RFC 7636 §4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """A validated /authorize request (everything needed to issue a code and to redirect back)."""

    client: OAuthClient
    redirect_uri: str
    state: str | None
    code_challenge: str
    resource: str
    scope: str
    # Whether the request carried redirect_uri (else the client's only one was used): the token request must
    # then repeat it (RFC 6749 §4.1.3).
    redirect_uri_given: bool = True


@dataclass(frozen=True, slots=True)
class TokenResponse:
    access_token: str
    refresh_token: str
    expires_in: int
    scope: str
    resource: str

    def as_json(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": self.refresh_token,
            "scope": self.scope,
        }


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """What an access token grants (the resource server's view of it)."""

    user_id: int
    client: OAuthClient
    scope: str
    resource: str
    expires_at: datetime
    created_at: datetime


def registration_setting(runtime: Runtime) -> bool:
    """The site's `auth.idpDynamicClientRegistrationEnabled` itself. Off revokes dynamic clients' tokens; MCP being
    off (which also closes registration) only suspends them."""
    return runtime.config.auth_idp_dynamic_client_registration_enabled


class GrantService:
    """Authorization, codes and tokens of the authorization server."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.clients = runtime.get(ClientService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # -- identity of the server -------------------------------------------------------------------------
    @property
    def issuer(self) -> str:
        """The issuer identifier: the external URL, byte-exact, no trailing slash."""
        return self.runtime.external_url

    def resources(self) -> list[str]:
        """Resources tokens may be bound to: each MCP endpoint URL, and the instance root (all endpoints)."""
        return [self.runtime.external_url + e.value for e in Endpoint] + [self.runtime.external_url]

    def canonical_resource(self, resource: str | None) -> str:
        """The resource a token is bound to; absent means the instance root. Unknown → invalid_target."""
        if resource is None or resource == "":
            return self.runtime.external_url
        normalized = resource.rstrip("/") if resource.rstrip("/") else resource
        if normalized not in self.resources():
            raise OAuthError(
                "invalid_target",
                f"unknown resource {resource!r}; this server issues tokens for {', '.join(self.resources())}",
            )
        return normalized

    # -- authorization --------------------------------------------------------------------------------------
    def validate_authorization_request(
        self, params: Mapping[str, str], resources: Sequence[str]
    ) -> AuthorizationRequest:
        """Check an /authorize request. Errors before the redirect URI is trusted are not redirectable; the
        others may be sent back to the client only where `error_redirect_uri` allows it."""
        client = self.clients.get_client(params.get("client_id", ""))
        redirect_uri = params.get("redirect_uri") or ""
        given = bool(redirect_uri)
        if not redirect_uri:
            if len(client.redirect_uris) != 1:
                raise OAuthError("invalid_request", "redirect_uri is required", redirectable=False)
            redirect_uri = client.redirect_uris[0]
        if not redirect_matches(client.redirect_uris, redirect_uri):
            raise OAuthError(
                "invalid_request",
                f"redirect_uri {redirect_uri!r} is not registered for this client",
                redirectable=False,
            )
        try:
            # Clients registered before the policy got stricter may hold URIs it refuses now (userinfo, ...).
            check_redirect_uri(redirect_uri)
        except OAuthError as exc:
            raise OAuthError("invalid_request", exc.description, redirectable=False) from None
        state = params.get("state")
        if params.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "response_type must be code")
        scope = check_scope(params.get("scope"))
        challenge = params.get("code_challenge") or ""
        if not challenge:
            raise OAuthError("invalid_request", "code_challenge is required (PKCE with S256)")
        if params.get("code_challenge_method") != "S256":
            raise OAuthError("invalid_request", "code_challenge_method must be S256")
        if not 43 <= len(challenge) <= 128:
            raise OAuthError("invalid_request", "code_challenge must be 43-128 characters (base64url of SHA-256)")
        if len(resources) > 1:
            raise OAuthError("invalid_target", "request one resource per authorization")
        resource = self.canonical_resource(resources[0] if resources else None)
        return AuthorizationRequest(client, redirect_uri, state, challenge, resource, scope, given)

    def error_redirect_uri(self, params: Mapping[str, str], user_id: int | None) -> str | None:
        """Where an /authorize error may be sent back to, or None to show it on a page instead.

        RFC 9700 §4.11.2: anybody can register a client whose redirect URI is theirs, so redirecting errors
        there turns this server into an open redirector. Only a registered redirect URI of a client an admin
        registered, or one the signed-in user (`user_id`) has approved before, is trusted with errors.
        """
        try:
            client = self.clients.get_client(params.get("client_id", ""))
        except OAuthError:
            return None
        uri = params.get("redirect_uri") or (client.redirect_uris[0] if len(client.redirect_uris) == 1 else "")
        if not uri or not redirect_matches(client.redirect_uris, uri):
            return None
        if client.kind == "static" or (user_id is not None and self.has_approved(user_id, client)):
            return uri
        return None

    def has_approved(self, user_id: int, client: OAuthClient) -> bool:
        """Whether the user has approved this client before (a code is only ever issued after consent; codes
        are kept after use, as the replay check needs them, and go only with the client or the user)."""
        with self.runtime.db.session() as session:
            return bool(
                session.scalar(
                    select(exists().where(OAuthCodeRow.client_pk == client.pk, OAuthCodeRow.user_id == user_id))
                )
            )

    def issue_code(self, user_id: int, request: AuthorizationRequest) -> str:
        code = CODE_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        with self.runtime.db.session() as session:
            session.add(
                OAuthCodeRow(
                    code_sha256=sha256(code),
                    client_pk=request.client.pk,
                    user_id=user_id,
                    # "" when the request had no redirect_uri: the token request need not repeat it then.
                    redirect_uri=request.redirect_uri if request.redirect_uri_given else "",
                    code_challenge=request.code_challenge,
                    resource=request.resource,
                    scope=request.scope,
                    created_at=now,
                    expires_at=now + CODE_TTL,
                )
            )
        return code

    # -- tokens ---------------------------------------------------------------------------------------------
    def exchange_code(
        self, client: OAuthClient, code: str, redirect_uri: str | None, verifier: str, resource: str | None
    ) -> TokenResponse:
        """authorization_code grant: single use, PKCE-verified, bound to client, redirect URI and resource."""
        now = utcnow()
        with self.runtime.db.session() as session:
            row = session.get(OAuthCodeRow, sha256(code)) if code else None
            if row is None or row.client_pk != client.pk:
                raise OAuthError("invalid_grant", "the authorization code is invalid")
            replayed = row.used_at is not None
            row.used_at = now
            snapshot = (row.user_id, row.redirect_uri, row.code_challenge, row.resource, row.scope, row.expires_at)
            family = row.code_sha256.hex()
        if replayed:
            # RFC 6749 §4.1.2: a replayed code revokes what was issued from it (committed before answering).
            self._revoke_family(family)
            log.warning("authorization code replayed; tokens issued from it revoked")
            raise OAuthError("invalid_grant", "the authorization code was already used")
        user_id, bound_redirect, challenge, bound_resource, scope, expires_at = snapshot
        if expires_at < now:
            raise OAuthError("invalid_grant", "the authorization code has expired")
        if bound_redirect and redirect_uri is None:
            # RFC 6749 §4.1.3: required when the authorization request included it.
            raise OAuthError("invalid_grant", "redirect_uri is required: the authorization request included one")
        if redirect_uri is not None and redirect_uri != (bound_redirect or redirect_uri):
            raise OAuthError("invalid_grant", "redirect_uri does not match the authorization request")
        if redirect_uri is not None and not bound_redirect and not redirect_matches(client.redirect_uris, redirect_uri):
            raise OAuthError("invalid_grant", "redirect_uri is not registered for this client")
        if not verifier or not hmac.compare_digest(pkce_challenge(verifier), challenge):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        if resource is not None and self.canonical_resource(resource) != bound_resource:
            raise OAuthError("invalid_target", "resource differs from the one authorized")
        return self._issue_tokens(client, user_id, scope, bound_resource, family)

    def refresh(
        self, client: OAuthClient, refresh_token: str, scope: str | None, resource: str | None
    ) -> TokenResponse:
        """refresh_token grant with rotation: the old refresh token is spent; reuse revokes the family."""
        now = utcnow()
        if scope is not None:
            check_scope(scope)
        with self.runtime.db.session() as session:
            row = (
                session.scalar(
                    select(OAuthTokenRow).where(
                        OAuthTokenRow.token_sha256 == sha256(refresh_token), OAuthTokenRow.kind == "refresh"
                    )
                )
                if refresh_token
                else None
            )
            if row is None or row.client_pk != client.pk:
                raise OAuthError("invalid_grant", "the refresh token is invalid")
            reused = row.used_at is not None
            dead = row.revoked_at is not None or row.expires_at < now
            if not reused and not dead:
                row.used_at = now
            user_id, bound_scope, bound_resource, family = row.user_id, row.scope, row.resource, row.family
        if reused:
            # A spent refresh token presented again means one of two parties holds a stolen copy.
            self._revoke_family(family)
            log.warning("refresh token reused; token family revoked")
            raise OAuthError("invalid_grant", "the refresh token was already used")
        if dead:
            raise OAuthError("invalid_grant", "the refresh token has expired or was revoked")
        if resource is not None and self.canonical_resource(resource) != bound_resource:
            raise OAuthError("invalid_target", "resource differs from the one authorized")
        return self._issue_tokens(client, user_id, bound_scope, bound_resource, family)

    def _issue_tokens(self, client: OAuthClient, user_id: int, scope: str, resource: str, family: str) -> TokenResponse:
        access = ACCESS_PREFIX + secrets.token_urlsafe(32)
        refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        with self.runtime.db.session() as session:
            for raw, kind, ttl in ((access, "access", ACCESS_TOKEN_TTL), (refresh, "refresh", REFRESH_TOKEN_TTL)):
                session.add(
                    OAuthTokenRow(
                        token_sha256=sha256(raw),
                        kind=kind,
                        client_pk=client.pk,
                        user_id=user_id,
                        scope=scope,
                        resource=resource,
                        family=family,
                        created_at=now,
                        expires_at=now + ttl,
                    )
                )
        return TokenResponse(access, refresh, int(ACCESS_TOKEN_TTL.total_seconds()), scope, resource)

    def _revoke_family(self, family: str) -> None:
        with self.runtime.db.session() as session:
            session.execute(
                update(OAuthTokenRow)
                .where(OAuthTokenRow.family == family, OAuthTokenRow.revoked_at.is_(None))
                .values(revoked_at=utcnow())
            )

    def revoke(self, client: OAuthClient | None, token: str) -> None:
        """RFC 7009: revoke a token (and, for a refresh token, its whole family). Unknown tokens are ignored."""
        now = utcnow()
        with self.runtime.db.session() as session:
            row = session.scalar(select(OAuthTokenRow).where(OAuthTokenRow.token_sha256 == sha256(token)))
            if row is None or (client is not None and row.client_pk != client.pk):
                return
            if row.kind == "refresh":
                session.execute(
                    update(OAuthTokenRow)
                    .where(OAuthTokenRow.family == row.family, OAuthTokenRow.revoked_at.is_(None))
                    .values(revoked_at=now)
                )
            else:
                row.revoked_at = now

    def revoke_dynamic_tokens(self) -> int:
        """Revoke every live token of dynamically registered clients; the number revoked.

        Called when `auth.idpDynamicClientRegistrationEnabled` is off (oauth/setup.py, and `grant_of` when such a
        token is presented): turning registration off revokes those tokens for good, so turning it on again does
        not revive them (issue #33 item 7). Their clients stay registered and may ask their users again."""
        dynamic = select(OAuthClientRow.id).where(OAuthClientRow.kind == "dynamic")
        with self.runtime.db.session() as session:
            result = session.execute(
                update(OAuthTokenRow)
                .where(OAuthTokenRow.revoked_at.is_(None), OAuthTokenRow.client_pk.in_(dynamic))
                .values(revoked_at=utcnow())
            )
            revoked = int(getattr(result, "rowcount", 0) or 0)
        if revoked:
            log.info("dynamic client registration is off: %d tokens of dynamic clients revoked", revoked)
        return revoked

    def grant_of(self, token: str, kind: str = "access") -> TokenGrant | None:
        """The live grant of a token (not expired, not revoked, client still usable), else None."""
        if not token.startswith(ACCESS_PREFIX if kind == "access" else REFRESH_PREFIX):
            return None
        with self.runtime.db.session() as session:
            found = session.execute(
                select(OAuthTokenRow, OAuthClientRow)
                .join(OAuthClientRow, OAuthClientRow.id == OAuthTokenRow.client_pk)
                .where(OAuthTokenRow.token_sha256 == sha256(token), OAuthTokenRow.kind == kind)
            ).first()
            if found is None:
                return None
            row, client_row = found
            grant = TokenGrant(
                row.user_id, to_client(client_row), row.scope, row.resource, row.expires_at, row.created_at
            )
            dead = row.revoked_at is not None or row.expires_at < utcnow() or (kind == "refresh" and row.used_at)
        if dead or not self.clients.client_usable(grant.client):
            if not dead and grant.client.kind == "dynamic" and not registration_setting(self.runtime):
                # A process that missed the switch (it started or reloaded after it) still revokes for good.
                self.revoke_dynamic_tokens()
            return None
        return grant

    def authenticate_access_token(self, token: str) -> Actor | None:
        """The bearer resolver: the user behind a live OAuth access token, acting with scope mcp."""
        grant = self.grant_of(token)
        if grant is None:
            return None
        accounts = self.runtime.get(AccountService)
        try:
            user = accounts.get_user(grant.user_id)
        except NotFound:
            return None
        return accounts.actor_for(user, via="oauth", scopes=frozenset(grant.scope.split()))

    def audience_problem(self, token: str, resource: str) -> str:
        """ "" when the access token may be used at `resource` (bound to it or to the instance root)."""
        grant = self.grant_of(token)
        if grant is None:
            return "the access token is invalid, expired or revoked"
        if grant.resource in (resource, self.runtime.external_url):
            return ""
        return f"the access token was issued for {grant.resource}, not for {resource}"

    def introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662 response for an access or refresh token (whoever asks; see `introspect_for`)."""
        for kind in ("access", "refresh"):
            grant = self.grant_of(token, kind)
            if grant is None:
                continue
            try:
                user = self.runtime.get(AccountService).get_user(grant.user_id)
            except NotFound:
                return {"active": False}
            return {
                "active": True,
                "scope": grant.scope,
                "client_id": grant.client.client_id,
                "username": user.username,
                "sub": str(user.id),
                "aud": grant.resource,
                "iss": self.issuer,
                "exp": int(grant.expires_at.timestamp()),
                "iat": int(grant.created_at.timestamp()),
                "token_type": "Bearer" if kind == "access" else "refresh_token",
            }
        return {"active": False}

    def introspect_for(self, actor: Actor, client_id: str, secret: str | None, token: str) -> dict[str, Any]:
        """RFC 7662 introspection as `actor`, calling as client `client_id`: site admins see any token; a
        client must authenticate and sees only its own tokens (others read as inactive, telling nothing)."""
        result = self.introspect(token)
        if not allowed(actor, Action.OAUTH_TOKENS_INTROSPECT):  # site admins may introspect any token
            client = self.clients.authenticate_client(client_id, secret)
            issued = IssuedTo(token_client=str(result.get("client_id", "")), caller_client=client.client_id)
            if result.get("active") and not allowed(actor, Action.OAUTH_TOKENS_INTROSPECT, issued):
                result = {"active": False}  # a client may only introspect its own tokens
        return result
