"""codewell as an OAuth 2 authorization server for MCP clients.

Authorization code + PKCE (S256 only), RFC 8707 resource binding, RFC 9207 `iss`, refresh-token rotation
with reuse detection, RFC 7009 revocation, RFC 7662 introspection. Clients: dynamic (RFC 7591), static
(pre-registered by admins) and Client ID Metadata Documents (an HTTPS URL as client_id). The only scope is
`mcp`. Codes, tokens and secrets are stored as SHA-256 hashes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from sqlalchemy import delete, select, update

from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound, PermissionDenied
from codewell.core.tools import Endpoint
from codewell.db.base import utcnow
from codewell.oauth.errors import OAuthError
from codewell.oauth.models import OAuthClientRow, OAuthCodeRow, OAuthTokenRow

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

SCOPE = "mcp"
ACCESS_TOKEN_TTL = timedelta(hours=1)
REFRESH_TOKEN_TTL = timedelta(days=30)
CODE_TTL = timedelta(minutes=5)
METADATA_CACHE_TTL = timedelta(minutes=10)
ACCESS_PREFIX = "cwoa_"
REFRESH_PREFIX = "cwor_"
CODE_PREFIX = "cwoc_"
CLIENT_PREFIX = "cwc_"
SECRET_PREFIX = "cwcs_"
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
# Schemes a browser would execute or read locally instead of handing to an app.
UNSAFE_SCHEMES = frozenset(
    {"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "ftp", "ws", "wss"}
)


def sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of a verifier (RFC 7636 §4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class OAuthClient:
    pk: int
    client_id: str
    kind: str  # "dynamic" | "static" | "metadata"
    client_name: str
    client_uri: str
    redirect_uris: tuple[str, ...]
    token_endpoint_auth_method: str
    scope: str
    created_at: datetime
    has_secret: bool

    @property
    def public(self) -> bool:
        return self.token_endpoint_auth_method == "none"

    def as_json(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "kind": self.kind,
            "client_name": self.client_name,
            "client_uri": self.client_uri or None,
            "redirect_uris": list(self.redirect_uris),
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "grant_types": sorted(GRANT_TYPES),
            "response_types": ["code"],
            "scope": self.scope,
            "created_at": self.created_at.isoformat(),
        }


def _client(row: OAuthClientRow) -> OAuthClient:
    return OAuthClient(
        pk=row.id,
        client_id=row.client_id,
        kind=row.kind,
        client_name=row.client_name,
        client_uri=row.client_uri,
        redirect_uris=tuple(json.loads(row.redirect_uris)),
        token_endpoint_auth_method=row.token_endpoint_auth_method,
        scope=row.scope,
        created_at=row.created_at,
        has_secret=row.client_secret_sha256 is not None,
    )


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """A validated /authorize request (everything needed to issue a code and to redirect back)."""

    client: OAuthClient
    redirect_uri: str
    state: str | None
    code_challenge: str
    resource: str
    scope: str


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


def is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


def check_redirect_uri(uri: str) -> None:
    """Accept https, loopback http (RFC 8252 §7.3) and private-use schemes (RFC 8252 §7.1); never fragments."""
    if not isinstance(uri, str) or not uri or len(uri) > 2048:
        raise OAuthError("invalid_redirect_uri", "redirect URIs must be non-empty strings of at most 2048 characters")
    parts = urlsplit(uri)
    if parts.fragment:
        raise OAuthError("invalid_redirect_uri", f"redirect URI {uri!r} must not contain a fragment")
    if parts.scheme == "https" and parts.hostname:
        return
    if is_loopback_redirect(uri):
        return
    if parts.scheme and parts.scheme not in {"http", "https", *UNSAFE_SCHEMES}:
        return  # private-use URI scheme of a native app (RFC 8252 §7.1): cursor://..., com.example.app:/cb
    raise OAuthError(
        "invalid_redirect_uri",
        f"redirect URI {uri!r} is not allowed: use https, http on a loopback address (127.0.0.1, localhost, [::1]) "
        "or an app's private-use scheme (cursor://..., com.example.app:/cb)",
    )


def redirect_matches(registered: Sequence[str], given: str) -> bool:
    """Exact match, except that loopback redirect URIs may use any port (RFC 8252 §7.3)."""
    if given in registered:
        return True
    if not is_loopback_redirect(given):
        return False
    g = urlsplit(given)
    for uri in registered:
        r = urlsplit(uri)
        if is_loopback_redirect(uri) and (r.hostname, r.path, r.query) == (g.hostname, g.path, g.query):
            return True
    return False


class OAuthService:
    """Storage and rules of the authorization server; the HTTP routes are thin adapters over it."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

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

    def dynamic_registration_enabled(self) -> bool:
        return self.runtime.config.mcp_dynamic_client_registration_enabled

    # -- clients ------------------------------------------------------------------------------------------
    def register_dynamic(self, metadata: Mapping[str, Any]) -> tuple[OAuthClient, str | None]:
        """RFC 7591 registration; returns the client and its secret (None for public clients)."""
        if not self.dynamic_registration_enabled():
            raise OAuthError("access_denied", "dynamic client registration is disabled", status=404)
        fields = self._validate_metadata(metadata)
        return self._insert_client("dynamic", fields, created_by=None)

    def create_static_client(
        self, actor: Actor, name: str, redirect_uris: Sequence[str], *, confidential: bool = False
    ) -> tuple[OAuthClient, str | None]:
        """Pre-register a client (site admins only); public PKCE clients by default."""
        if not actor.site_admin:
            raise PermissionDenied("only site admins can manage OAuth clients")
        if not name.strip():
            raise InvalidInput("the client needs a name", hint="pass a name such as 'Claude Code'")
        try:
            fields = self._validate_metadata(
                {
                    "client_name": name.strip(),
                    "redirect_uris": list(redirect_uris),
                    "token_endpoint_auth_method": "client_secret_basic" if confidential else "none",
                }
            )
        except OAuthError as exc:
            raise InvalidInput(exc.description, hint="use https or loopback http redirect URIs") from None
        return self._insert_client("static", fields, created_by=actor.user_id)

    def list_clients(self, actor: Actor, kind: str | None = None) -> list[OAuthClient]:
        if not actor.site_admin:
            raise PermissionDenied("only site admins can list OAuth clients")
        with self.runtime.db.session() as session:
            query = select(OAuthClientRow).order_by(OAuthClientRow.id)
            if kind:
                query = query.where(OAuthClientRow.kind == kind)
            return [_client(r) for r in session.scalars(query)]

    def delete_client(self, actor: Actor, client_id: str) -> None:
        """Delete a client and (by cascade) its codes and tokens."""
        if not actor.site_admin:
            raise PermissionDenied("only site admins can delete OAuth clients")
        with self.runtime.db.session() as session:
            deleted = session.execute(delete(OAuthClientRow).where(OAuthClientRow.client_id == client_id))
            if not deleted.rowcount:  # type: ignore[attr-defined]
                raise NotFound(f"no OAuth client {client_id!r}", hint="list clients with `codewell oauth clients list`")

    def get_client(self, client_id: str) -> OAuthClient:
        """A usable client (metadata-document clients fetched and cached); invalid_client otherwise."""
        if not client_id:
            raise OAuthError("invalid_client", "client_id is required", status=401, redirectable=False)
        if client_id.startswith("https://"):
            return self._metadata_client(client_id)
        with self.runtime.db.session() as session:
            row = session.scalar(select(OAuthClientRow).where(OAuthClientRow.client_id == client_id))
            client = _client(row) if row is not None else None
        if client is None or not self.client_usable(client):
            raise OAuthError("invalid_client", f"unknown client {client_id!r}", status=401, redirectable=False)
        return client

    def client_usable(self, client: OAuthClient) -> bool:
        """Dynamic clients (and their tokens) stop working while dynamic registration is off."""
        return client.kind != "dynamic" or self.dynamic_registration_enabled()

    def authenticate_client(self, client_id: str, secret: str | None) -> OAuthClient:
        """The client of a token-endpoint request; confidential clients must present their secret."""
        client = self.get_client(client_id)
        if client.public:
            return client
        with self.runtime.db.session() as session:
            stored = session.scalar(select(OAuthClientRow.client_secret_sha256).where(OAuthClientRow.id == client.pk))
        if not secret or stored is None or not hmac.compare_digest(stored, sha256(secret)):
            raise OAuthError("invalid_client", "client authentication failed", status=401, redirectable=False)
        return client

    def _validate_metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(metadata, Mapping):
            raise OAuthError("invalid_client_metadata", "the registration request must be a JSON object")
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > 20:
            raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty array (at most 20 URIs)")
        for uri in uris:
            check_redirect_uri(uri)
        method = metadata.get("token_endpoint_auth_method", "none")
        if method not in AUTH_METHODS:
            raise OAuthError(
                "invalid_client_metadata",
                f"token_endpoint_auth_method {method!r} is not supported; use one of {', '.join(AUTH_METHODS)}",
            )
        grants = metadata.get("grant_types", ["authorization_code", "refresh_token"])
        if not isinstance(grants, list) or not set(grants) <= GRANT_TYPES or "authorization_code" not in grants:
            raise OAuthError(
                "invalid_client_metadata", "grant_types must include authorization_code and only add refresh_token"
            )
        responses = metadata.get("response_types", ["code"])
        if responses != ["code"]:
            raise OAuthError("invalid_client_metadata", 'response_types must be ["code"]')
        return {
            "client_name": str(metadata.get("client_name") or "")[:255],
            "client_uri": str(metadata.get("client_uri") or "")[:512],
            "redirect_uris": list(uris),
            "token_endpoint_auth_method": method,
            "software_id": str(metadata.get("software_id") or "")[:255],
            "software_version": str(metadata.get("software_version") or "")[:100],
        }

    def _insert_client(
        self, kind: str, fields: dict[str, Any], *, created_by: int | None, client_id: str | None = None
    ) -> tuple[OAuthClient, str | None]:
        secret = None if fields["token_endpoint_auth_method"] == "none" else SECRET_PREFIX + secrets.token_hex(24)
        row = OAuthClientRow(
            client_id=client_id or CLIENT_PREFIX + secrets.token_hex(16),
            kind=kind,
            client_name=fields["client_name"],
            client_uri=fields["client_uri"],
            redirect_uris=json.dumps(fields["redirect_uris"]),
            token_endpoint_auth_method=fields["token_endpoint_auth_method"],
            client_secret_sha256=sha256(secret) if secret else None,
            scope=SCOPE,
            software_id=fields["software_id"],
            software_version=fields["software_version"],
            created_by_user_id=created_by,
            created_at=utcnow(),
            fetched_at=utcnow() if kind == "metadata" else None,
        )
        with self.runtime.db.session() as session:
            session.add(row)
            session.flush()
            return _client(row), secret

    def _metadata_client(self, url: str) -> OAuthClient:
        """A Client ID Metadata Document client: cached row, re-fetched when stale."""
        from codewell.oauth.cimd import fetch_client_metadata

        with self.runtime.db.session() as session:
            row = session.scalar(select(OAuthClientRow).where(OAuthClientRow.client_id == url))
            cached = _client(row) if row is not None else None
            fetched_at = row.fetched_at if row is not None else None
        if cached is not None and fetched_at is not None and utcnow() - fetched_at < METADATA_CACHE_TTL:
            return cached
        try:
            document = fetch_client_metadata(url)
            fields = self._validate_metadata(document)
        except OAuthError as exc:
            raise OAuthError("invalid_client", exc.description, status=401, redirectable=False) from None
        if fields["token_endpoint_auth_method"] != "none":
            raise OAuthError(
                "invalid_client",
                "metadata-document clients must be public (token_endpoint_auth_method none)",
                status=401,
                redirectable=False,
            )
        if cached is None:
            return self._insert_client("metadata", fields, created_by=None, client_id=url)[0]
        with self.runtime.db.session() as session:
            session.execute(
                update(OAuthClientRow)
                .where(OAuthClientRow.id == cached.pk)
                .values(
                    client_name=fields["client_name"],
                    client_uri=fields["client_uri"],
                    redirect_uris=json.dumps(fields["redirect_uris"]),
                    fetched_at=utcnow(),
                )
            )
            row = session.get(OAuthClientRow, cached.pk)
            assert row is not None
            return _client(row)

    # -- authorization --------------------------------------------------------------------------------------
    def validate_authorization_request(
        self, params: Mapping[str, str], resources: Sequence[str]
    ) -> AuthorizationRequest:
        """Check an /authorize request. Errors before the redirect URI is trusted are not redirectable."""
        client = self.get_client(params.get("client_id", ""))
        redirect_uri = params.get("redirect_uri") or ""
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
        state = params.get("state")
        request = AuthorizationRequest(client, redirect_uri, state, "", "", SCOPE)
        if params.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "response_type must be code")
        scope = self.check_scope(params.get("scope"))
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
        return AuthorizationRequest(request.client, redirect_uri, state, challenge, resource, scope)

    @staticmethod
    def check_scope(scope: str | None) -> str:
        """Only `mcp` may be requested (absent means `mcp`)."""
        requested = set((scope or SCOPE).split())
        if requested != {SCOPE}:
            extra = sorted(requested - {SCOPE})
            raise OAuthError(
                "invalid_scope",
                f"scope {' '.join(extra) or repr(scope)} is not allowed; request only the scope mcp",
            )
        return SCOPE

    def issue_code(self, user_id: int, request: AuthorizationRequest) -> str:
        code = CODE_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        with self.runtime.db.session() as session:
            session.add(
                OAuthCodeRow(
                    code_sha256=sha256(code),
                    client_pk=request.client.pk,
                    user_id=user_id,
                    redirect_uri=request.redirect_uri,
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
        if redirect_uri is not None and redirect_uri != bound_redirect:
            raise OAuthError("invalid_grant", "redirect_uri does not match the authorization request")
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
            self.check_scope(scope)
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
                row.user_id, _client(client_row), row.scope, row.resource, row.expires_at, row.created_at
            )
            dead = row.revoked_at is not None or row.expires_at < utcnow() or (kind == "refresh" and row.used_at)
        if dead or not self.client_usable(grant.client):
            return None
        return grant

    def authenticate_access_token(self, token: str) -> Actor | None:
        """The bearer resolver: the user behind a live OAuth access token, acting with scope mcp."""
        grant = self.grant_of(token)
        if grant is None:
            return None
        from codewell.accounts.service import AccountService

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
        """RFC 7662 response for an access or refresh token."""
        for kind in ("access", "refresh"):
            grant = self.grant_of(token, kind)
            if grant is None:
                continue
            from codewell.accounts.service import AccountService

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
